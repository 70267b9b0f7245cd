"""What ``examples/train_trl.py`` prints and writes about a run: one console line per step, TRL's metrics as JSON
lines, ``metrics.json`` beside a random-move baseline, the reward curve; and the Ctrl-C (or SIGTERM) that stops a
run after the step under way and still writes all of it."""

from __future__ import annotations

import contextlib
import errno
import json
import os
import shutil
import signal
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np

import gem_core
from gem_adapters.trl.recipe.options import InvalidRecipeArgument
from gem_core.curriculum import Task, TaskSampler
from gem_core.eval.episode_log import ReportWriteError
from gem_core.transport.atomic_file import atomic_path
from gem_core.transport.folder_lock import lock_folder, release_folder

__all__ = ["OUT_LOCK_FILE", "StepLog", "exit_code", "own_output_folder", "plot_reward_curve",
           "random_move_return", "run_metrics", "save_model", "step_log_callback", "stop_signals", "train_until_stopped",
           "write_report"]

OUT_LOCK_FILE = ".train_trl.lock"
"""The file in a run's ``--out`` that the run holds an exclusive lock on (and writes its pid into) while it runs."""


@contextlib.contextmanager
def own_output_folder(out: str) -> Iterator[None]:
    """Hold ``out`` for one run while open: a second run given the same folder (a seed sweep launched with one
    ``--out``, a job restarted while the first still runs) mixed its log lines into the first one's, and whichever
    ended last wrote its metrics beside the other's curve.

    Raises:
        InvalidRecipeArgument: if another run holds ``out`` (naming its pid), or ``out`` is a file.
    """
    fd = lock_folder(Path(out), OUT_LOCK_FILE, what="--out", error=InvalidRecipeArgument,
                     why="two runs writing into one folder mix their logs, metrics and curves")
    try:
        yield
    finally:
        release_folder(Path(out), OUT_LOCK_FILE, fd)


def exit_code(run: Callable[[], dict], program: str) -> int:
    """Run the example's ``main`` and turn how it ended into the command's exit code: 0 when trained; 2 on a bad
    argument or an ``--out`` another run holds (one line, nothing written); 1 when the report or the model could not
    be written (one line; the figures were printed); 128 + the signal's number when Ctrl-C (130) or SIGTERM (143)
    stopped it."""
    try:
        metrics = run()
    except InvalidRecipeArgument as error:
        print(f"{program}: error: {error}", file=sys.stderr)
        return 2
    except ReportWriteError as error:
        print(f"{program}: error: {error}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:  # before training started: nothing to save
        print("\nInterrupted before the first step; nothing written.", file=sys.stderr)
        return 130
    return 128 + signal.Signals[metrics["interrupted_by"]] if metrics["interrupted"] else 0


def random_move_return(env_id: str, env_kwargs: dict, episodes: int = 2000) -> float:
    """Mean return of a policy that plays ``env.sample_random_action()`` every turn (the baseline)."""
    env, total = gem_core.make(env_id, **env_kwargs), 0.0
    for episode_seed in range(episodes):
        env.reset(seed=10_000 + episode_seed)
        done = False
        while not done:
            _, reward, terminated, truncated, _ = env.step(env.sample_random_action())
            total, done = total + float(reward), terminated or truncated
    return total / episodes


class StepLog:
    """One console line per step (step, mean return, success rate, seconds); TRL's whole dict to ``log.jsonl``.

    A ``transformers.TrainerCallback`` (built in :func:`step_log_callback`, so this module imports no torch).

    Args:
        rollout_func: The run's :class:`~gem_adapters.trl.GemRolloutFunc`; its ``last_trajectories`` give each step's success rate.
        total_steps: The run's step count, for the ``step i/n`` column.
        log_path: The JSON-lines file that gets TRL's whole log dict per step.
    """

    def __init__(self, rollout_func: Any, total_steps: int, log_path: str):
        self.rollout_func, self.total_steps, self.log_path = rollout_func, total_steps, log_path
        self.rewards: list[float] = []
        self.success: list[float] = []
        self.frac_reward_zero_std: list[float | None] = []  # groups whose episodes all scored the same
        self.task_metrics: list[dict[str, float]] = []  # per step: gem/task/... and gem/curriculum/... of TRL's log
        self.stop_signal: int | None = None  # Ctrl-C's or SIGTERM's number: training ends after the step under way
        self.training_over = False  # set once trainer.train() returned: what was done is being saved
        self.log_lines_lost = 0  # steps whose log.jsonl line could not be written (a full disk): training went on
        self._last = time.perf_counter()

    def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        """Ends training after this step once Ctrl-C was pressed (or SIGTERM came)."""
        if self.stop_signal is not None:
            control.should_training_stop = True

    def on_log(self, args: Any, state: Any, control: Any, logs: dict | None = None, **kwargs: Any) -> None:
        """Records and prints a training step's log (TRL logs every step: ``logging_steps=1``)."""
        if not logs or "reward" not in logs:
            return
        trajectories = self.rollout_func.last_trajectories
        success = sum(bool(t.metrics.get("success")) for t in trajectories) / max(1, len(trajectories))
        now, seconds = time.perf_counter(), time.perf_counter() - self._last
        self._last = now
        self.rewards.append(float(logs["reward"]))
        self.success.append(success)
        self.frac_reward_zero_std.append(logs.get("frac_reward_zero_std"))
        self.task_metrics.append({k: v for k, v in logs.items() if k.startswith(("gem/task/", "gem/curriculum/"))})
        print(f"step {state.global_step:>4}/{self.total_steps}  return {logs['reward']:+.3f}  "
              f"success {success:.2f}  {seconds:5.1f} s", flush=True)
        self._append(json.dumps({"step": state.global_step, "success": success, "seconds": seconds, **logs}) + "\n",
                     state.global_step)

    def _append(self, line: str, step: int) -> None:
        """A step's line, whole or not at all: a full disk costs the log its lines, not the run its training
        (it crashed at the first line). Said once; ``metrics.json`` counts the lines lost, where it can be written."""
        data = line.encode()
        try:
            with open(self.log_path, "ab", buffering=0) as f:  # unbuffered: nothing left to flush at close
                start = f.tell()
                try:
                    if f.write(data) != len(data):
                        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
                except OSError:
                    f.truncate(start)  # no half line for a JSON-lines reader to choke on
                    raise
        except OSError as error:
            self.log_lines_lost += 1
            if self.log_lines_lost == 1:
                print(f"{self.log_path}: step {step} not written ({error.strerror or error}); training goes on, and "
                      "metrics.json counts the lines lost.", file=sys.stderr, flush=True)


def step_log_callback(rollout_func: Any, total_steps: int, log_path: str) -> StepLog:
    """A :class:`StepLog` that is also a ``transformers.TrainerCallback``; starts ``log_path`` empty."""
    from transformers import TrainerCallback

    os.makedirs(os.path.dirname(log_path) or ".", exist_ok=True)
    open(log_path, "w").close()
    return type("StepLogCallback", (StepLog, TrainerCallback), {})(rollout_func, total_steps, log_path)


@contextlib.contextmanager
def stop_signals(step_log: StepLog) -> Iterator[None]:
    """Ctrl-C and SIGTERM while open, for a run and the report of what it did: the first asks training to stop after
    the step under way, a second stops training at once, and any that comes once training is over waits for the report.

    SIGTERM is what a scheduler sends before it kills a job (SLURM's preemption, ``docker stop``, Kubernetes): its
    grace period is for saving what was done, as Ctrl-C does. A signal that came after training, with the handlers
    put back, killed the run between ``metrics.json`` and the curve (SIGTERM) or lost the curve (Ctrl-C)."""

    def request_stop(signum: int, frame: Any) -> None:
        name = "Ctrl-C" if signum == signal.SIGINT else signal.Signals(signum).name
        if step_log.training_over:
            print(f"\n{name}: saving what was done first.", file=sys.stderr, flush=True)
            return
        # A flag, not a KeyboardInterrupt: one raised inside a rollout's event loop can be lost in its
        # cancellation, and one raised in backward leaves the step half done. A second signal stops at once.
        if step_log.stop_signal is not None:
            raise KeyboardInterrupt
        step_log.stop_signal = signum
        print(f"\n{name}: stopping after this step ({name} again to stop at once).", file=sys.stderr, flush=True)

    stopping = (signal.SIGINT, signal.SIGTERM)
    previous_handlers = [signal.signal(signum, request_stop) for signum in stopping]
    try:
        yield
    finally:
        for signum, handler in zip(stopping, previous_handlers, strict=True):
            signal.signal(signum, handler)


def train_until_stopped(trainer: Any, step_log: StepLog) -> int | None:
    """``trainer.train()``, inside :func:`stop_signals`: returns the number of the signal that stopped the run, None
    if it ran to the end."""
    try:
        trainer.train()
    except KeyboardInterrupt:
        if step_log.stop_signal is None:
            step_log.stop_signal = signal.SIGINT
    finally:
        step_log.training_over = True
    if step_log.stop_signal is not None:
        print(f"Interrupted after {len(step_log.rewards)} steps; saving what was done.", file=sys.stderr, flush=True)
    return step_log.stop_signal


def run_metrics(args: Any, tasks: list[Task], step_log: StepLog, **measured: Any) -> dict:
    """``metrics.json`` of a run: its settings, the reward per step, its first and last 20%, the random-move
    baseline (a mixture's: the tasks' averaged by their weights); ``measured`` adds what the run found
    (``minutes``, ``interrupted`` and ``interrupted_by``, the stopping signal's name, the token limits)."""
    mixture = len(tasks) > 1
    curve = np.array(step_log.rewards)
    fifth = max(1, len(curve) // 5)
    random_per_task = {task.name: random_move_return(task.env_id, dict(task.env_kwargs)) for task in tasks}
    metrics = {
        "env": {task.env_id: task.weight for task in tasks} if mixture else tasks[0].env_id,
        "env_kwargs": dict(tasks[0].env_kwargs),
        "tasks": [task.to_json() for task in tasks],
        "curriculum": args.curriculum if mixture else None,
        "seed": args.seed,
        "turn_credit": args.turn_credit,
        "steps": len(curve),
        "warm_start_steps": args.warm_start_steps if args.model is None else 0,
        "interrupted": measured["interrupted"],
        "interrupted_by": measured.get("interrupted_by"),
        "minutes": round(measured["minutes"], 2),
        "max_new_tokens": measured["max_new_tokens"],
        "max_completion_length": measured["max_completion_length"],
        "first_20pct_reward": float(curve[:fifth].mean()) if len(curve) else None,
        "last_20pct_reward": float(curve[-fifth:].mean()) if len(curve) else None,
        "random_move_reward": sum(task.weight * random_per_task[task.name] for task in tasks) / sum(task.weight for task in tasks),
        "random_move_reward_per_task": random_per_task,
        "reward_per_step": curve.tolist(),
        "success_per_step": step_log.success,
        "frac_reward_zero_std_per_step": step_log.frac_reward_zero_std,
        "log_lines_lost": step_log.log_lines_lost,
    }
    if mixture:
        metrics["task_metrics_per_step"] = step_log.task_metrics
    return metrics


def write_report(metrics: dict, out: str, sampler: TaskSampler | None = None) -> None:
    """``out/metrics.json`` (and a mixture's sampler state), ``out/reward_curve.png``, and the summary line.

    Raises:
        ReportWriteError: if a file could not be written (a full disk); the summary line was printed, and each
            file is whole or absent.
    """
    summary = (f"\nreward: first 20% {metrics['first_20pct_reward']:.3f} -> last 20% {metrics['last_20pct_reward']:.3f} "
               f"(random moves: {metrics['random_move_reward']:.3f}) in {metrics['minutes']:.1f} min"
               if metrics["reward_per_step"] else None)
    try:
        if sampler is not None:
            from gem_core.curriculum import save_sampler_state

            metrics["sampler_state_file"] = str(save_sampler_state(sampler, out))
        with atomic_path(os.path.join(out, "metrics.json")) as partial:
            partial.write_text(json.dumps(metrics, indent=2))
        if summary:
            with atomic_path(os.path.join(out, "reward_curve.png")) as partial:
                plot_reward_curve(np.array(metrics["reward_per_step"]), metrics, str(partial))
    except OSError as error:
        if summary:
            print(summary, flush=True)  # the run's figures, where its files cannot hold them
        raise ReportWriteError(f"could not write the run's report in {out}: {error.strerror or error}") from error
    if summary:
        print(f"{summary}; curve: {out}/reward_curve.png")


def save_model(save: Callable[[str], Any], folder: str) -> None:
    """``save(folder)`` (``trainer.save_model``, ``model.save_pretrained``), whole or not at all: written beside
    ``folder``, then renamed over it.

    Raises:
        ReportWriteError: if the model could not be written (a full disk); ``folder`` is left as it was.
    """
    from safetensors import SafetensorError  # the weights' writer: its I/O errors (a full disk) are no OSError

    partial = f"{folder}.{os.getpid()}.partial"
    try:
        save(partial)
        if os.path.isdir(folder):
            shutil.rmtree(folder)
        os.replace(partial, folder)
    except (OSError, SafetensorError) as error:
        reason = error.strerror if isinstance(error, OSError) and error.strerror else error
        raise ReportWriteError(f"could not save the model in {folder}: {reason}") from error
    finally:
        shutil.rmtree(partial, ignore_errors=True)


def plot_reward_curve(curve: np.ndarray, metrics: dict, path: str) -> None:
    """The reward per step, its moving average and the random-move baseline, saved to ``path`` (PNG)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    steps = np.arange(1, len(curve) + 1)
    window = max(1, len(curve) // 15)
    smooth = np.convolve(curve, np.ones(window) / window, mode="valid")
    # Constrained layout keeps the title and the legend inside the figure; the legend sits below the axes,
    # where it can hide no part of the curve.
    fig, ax = plt.subplots(figsize=(7, 4.6), layout="constrained")
    ax.plot(steps, curve, color="tab:blue", alpha=0.3, label="mean episode return per step")
    ax.plot(steps[window - 1 :], smooth, color="tab:blue", label=f"moving average ({window} steps)")
    ax.axhline(metrics["random_move_reward"], color="tab:red", linestyle="--", label="random moves")
    ax.set_xlabel("training step")
    ax.set_ylabel("episode return")
    env = metrics["env"] if isinstance(metrics["env"], str) else f"{len(metrics['env'])} tasks ({metrics['curriculum']})"
    ax.set_title(f"TRL GRPOTrainer ({metrics['turn_credit']} credit) on {env}\n{metrics['minutes']:.1f} min", fontsize=11)
    fig.legend(loc="outside lower center", ncols=3, fontsize=9)
    fig.savefig(path, dpi=120)
    plt.close(fig)
