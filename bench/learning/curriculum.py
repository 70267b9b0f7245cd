"""Uniform vs adaptive task sampling on a mixture of three tasks of different difficulty (issue 33).

Why: a GRPO group whose episodes all score the same has zero advantages and teaches nothing; TRL logs
the share of such groups as ``frac_reward_zero_std``. On a fixed mixture that share is high wherever a
task is far too hard (every episode fails) or already learnt (every episode succeeds). An adaptive
sampler (``gem_core.curriculum.TaskSampler``, ``weighting="band"``) draws each group's task in proportion
to the chance that its group disagrees, with a floor per task. This script measures whether that spends
the same episode budget better, on this project's own stack: the main job's recipe
(``examples/train_trl.py``: a random-weight 2-layer transformer, a tokenizer trained on the envs' text, a
format-only warm start, TRL's stock ``GRPOTrainer`` with ``GemRolloutFunc``), one run per curriculum x seed,
each in a fresh process with one torch thread, every run with the same steps x prompts x generations.

The mixture is GuessTheNumber at three levels (registry ids, as ``--env`` would name them):
``game:GuessTheNumber-v0`` with the main job's kwargs (1-4 in 3 guesses), ``-v0-easy`` (1-10 in 6) and
``-v0-hard`` (1-100 in 7: binary search with no guess to spare).

Reported per curriculum (mean and per seed): each task's success and return over the last 20% of steps
(episode-weighted), each task's steps to threshold (first step at which its success over a trailing
window of steps reaches random + 50% of the gap to 1), the mean over tasks of the final success (every
task counts the same, whatever share of the batch it got), and ``frac_reward_zero_std`` over all steps and
the last 20%. Outputs in ``--out``: ``results.json`` (config, every run's curves, the summary, the
machine's load), ``results.md`` (the tables), ``curriculum.png`` (per-task success and the zero-std share
over steps) and ``runs/<curriculum>/seed<k>/`` (each run's metrics, TRL log and sampler state).

    python bench/learning/curriculum.py --seeds 0 1 2      # the bench (on a quiet machine)
    python bench/learning/curriculum.py --quick            # smoke test: one seed, 3 small steps per curriculum
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import sys
import time
import warnings
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))  # trl_runs.py beside it, also when loaded by path (tests)
import trl_runs  # noqa: E402
#: The mixture: the main job's task, then two registered levels of the same game (``--env`` values).
MIXTURE = ["game:GuessTheNumber-v0", "game:GuessTheNumber-v0-easy", "game:GuessTheNumber-v0-hard"]


def mixture_tasks(example) -> list:
    """MIXTURE as the example's tasks: the first with the main job's 1-4 kwargs, which the example gives only
    to a run without ``--env`` (a named id is the registered game), so they are passed here."""
    from gem_core.curriculum import Task

    return [Task(MIXTURE[0], example.DEFAULT_ENV_KWARGS), *(Task(env_id, {}) for env_id in MIXTURE[1:])]
CURRICULA = ["uniform", "adaptive"]


@dataclass(frozen=True)
class RunSpec:
    """Everything that determines one training run (its metrics are reused only if all of it matches)."""

    curriculum: str
    seed: int
    steps: int
    num_generations: int
    prompts_per_step: int
    learning_rate: float
    warm_start_steps: int
    curriculum_floor: float | None
    curriculum_window: int

    @property
    def name(self) -> str:
        return f"{self.curriculum}/seed{self.seed}"

    @property
    def episodes(self) -> int:
        """The episode budget of the run (the same for every curriculum)."""
        return self.steps * self.prompts_per_step * self.num_generations


def run_one(spec: RunSpec, out: str) -> dict:
    """Train one run in ``out`` (see ``trl_runs.train_example``); its metrics."""
    return trl_runs.train_example(dict(
        env=mixture_tasks(trl_runs.load_example()), curriculum=spec.curriculum, seed=spec.seed, steps=spec.steps, num_generations=spec.num_generations,
        prompts_per_step=spec.prompts_per_step, learning_rate=spec.learning_rate, warm_start_steps=spec.warm_start_steps,
        curriculum_floor=spec.curriculum_floor, curriculum_window=spec.curriculum_window,
    ), asdict(spec), out)


def reusable(path: Path, spec: RunSpec) -> dict | None:
    """The metrics of a finished run with exactly this spec, or None."""
    return trl_runs.finished_run(path, asdict(spec), spec.steps)


def announce(todo: list[RunSpec]) -> contextlib.nullcontext:
    """One line per run to train, before they start (each run's own output goes to its ``stdout.txt``)."""
    for number, spec in enumerate(todo, 1):
        print(f"[{number}/{len(todo)}] {spec.name}: {spec.steps} steps, {spec.episodes} episodes", file=sys.stderr, flush=True)
    return contextlib.nullcontext()


def train_all(specs: list[RunSpec], out: Path, jobs: int, resume: bool) -> tuple[list[dict], int]:
    """Every run's metrics in the order of ``specs`` (finished ones reused with ``resume``), and how many were trained."""
    return trl_runs.train_all(specs, out, jobs, resume, run_one, reusable, announce)


# ------------------------------------------------------------------------------------------ summary


def random_success(task: dict, episodes: int = 2000) -> float:
    """Success rate of a policy that plays ``env.sample_random_action()`` every turn on ``task``."""
    import gem_core
    from gem_core.env import episode_success

    env, wins = gem_core.make(task["env_id"], **task["env_kwargs"]), 0
    for episode_seed in range(episodes):
        env.reset(seed=10_000 + episode_seed)
        infos, total, terminated, truncated = [], 0.0, False, False
        while not (terminated or truncated):
            _, reward, terminated, truncated, info = env.step(env.sample_random_action())
            infos.append(info)
            total += float(reward)
        wins += episode_success(infos, total, terminated)
    env.close()
    return wins / episodes


def task_curves(run: dict, name: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per step: the task's episodes, successes and return sum (0 where the step drew none of it)."""
    episodes, successes, returns = [], [], []
    for logged in run["task_metrics_per_step"]:
        n = float(logged.get(f"gem/task/{name}/episodes", 0.0))
        episodes.append(n)
        successes.append(n * float(logged.get(f"gem/task/{name}/success", 0.0)))
        returns.append(n * float(logged.get(f"gem/task/{name}/return", 0.0)))
    return np.array(episodes), np.array(successes), np.array(returns)


def trailing_rate(episodes: np.ndarray, successes: np.ndarray, window: int) -> np.ndarray:
    """Success rate over the trailing ``window`` steps (NaN where those steps hold no episode of the task)."""
    def trailing_sum(values: np.ndarray) -> np.ndarray:
        sums = np.cumsum(np.insert(values, 0, 0.0))
        idx = np.arange(1, len(values) + 1)
        return sums[idx] - sums[np.maximum(0, idx - window)]

    n = trailing_sum(episodes)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(n > 0, trailing_sum(successes) / np.maximum(n, 1e-12), np.nan)


def steps_to_threshold(episodes: np.ndarray, successes: np.ndarray, threshold: float, window: int, min_episodes: int) -> int | None:
    """First step (1-based) whose trailing ``window`` steps hold at least ``min_episodes`` episodes of the task
    with a success rate of at least ``threshold``; None if never."""
    sums = np.cumsum(np.insert(episodes, 0, 0.0))
    rate = trailing_rate(episodes, successes, window)
    for step in range(1, len(episodes) + 1):
        if sums[step] - sums[max(0, step - window)] >= min_episodes and rate[step - 1] >= threshold:
            return step
    return None


def summarize(runs: list[dict], window: int, min_episodes: int) -> dict:
    """Per curriculum: per-task final success/return, steps to threshold, macro success, zero-std share."""
    tasks = runs[0]["tasks"]
    thresholds = {}
    for task in tasks:
        base = random_success(task)
        thresholds[task["name"]] = {"random_success": base, "threshold": base + 0.5 * (1.0 - base)}
    summary: dict = {"tasks": thresholds, "curricula": {}}
    for run in runs:
        spec = run["spec"]
        steps = len(run["reward_per_step"])
        fifth = max(1, steps // 5)
        cell = summary["curricula"].setdefault(spec["curriculum"], {"seeds": [], "per_task": {}, "macro_success": [],
                                                                      "zero_std_all": [], "zero_std_last20": [], "minutes": []})
        cell["seeds"].append(spec["seed"])
        finals = []
        for task in tasks:
            name = task["name"]
            episodes, successes, returns = task_curves(run, name)
            last = slice(steps - fifth, steps)
            n_last = episodes[last].sum()
            final_success = float(successes[last].sum() / n_last) if n_last else float("nan")
            final_return = float(returns[last].sum() / n_last) if n_last else float("nan")
            finals.append(final_success)
            per_task = cell["per_task"].setdefault(name, {"final_success": [], "final_return": [], "steps_to_threshold": [],
                                                          "episode_share": []})
            per_task["final_success"].append(final_success)
            per_task["final_return"].append(final_return)
            per_task["steps_to_threshold"].append(
                steps_to_threshold(episodes, successes, thresholds[name]["threshold"], window, min_episodes))
            per_task["episode_share"].append(float(episodes.sum() / max(1.0, sum(task_curves(run, t["name"])[0].sum() for t in tasks))))
        cell["macro_success"].append(float(np.nanmean(finals)))
        zero_std = np.array([np.nan if v is None else v for v in run["frac_reward_zero_std_per_step"]], dtype=float)
        cell["zero_std_all"].append(float(np.nanmean(zero_std)))
        cell["zero_std_last20"].append(float(np.nanmean(zero_std[-fifth:])))
        cell["minutes"].append(run["minutes"])
    return summary


def mean_std(values: list[float]) -> str:
    """``mean ± std`` over the seeds that measured it (``-`` when none did: the task drew no episode there)."""
    values = np.asarray(values, dtype=float)
    values = values[~np.isnan(values)]
    return f"{values.mean():.3f} ± {values.std():.3f}" if len(values) else "-"


def markdown_tables(summary: dict, spec: RunSpec, window: int, min_episodes: int) -> str:
    lines = [
        f"Mixture: {', '.join(f'`{name}`' for name in summary['tasks'])}; {spec.steps} steps of "
        f"{spec.prompts_per_step} x {spec.num_generations} episodes ({spec.episodes} episodes per run, every curriculum).",
        "",
        "| curriculum | mean final success over tasks | frac_reward_zero_std (all steps) | frac_reward_zero_std (last 20%) "
        "| minutes per run |",
        "|---|---|---|---|---|",
    ]
    for curriculum, cell in summary["curricula"].items():
        lines.append(f"| {curriculum} | {mean_std(cell['macro_success'])} | {mean_std(cell['zero_std_all'])} | "
                     f"{mean_std(cell['zero_std_last20'])} | {np.mean(cell['minutes']):.1f} |")
    lines += [
        "",
        "| task | random success | threshold | curriculum | final success (last 20%) | final return | steps to threshold "
        "(per seed) | share of episodes |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for name, limits in summary["tasks"].items():
        for curriculum, cell in summary["curricula"].items():
            per_task = cell["per_task"][name]
            reached = " / ".join("-" if s is None else str(s) for s in per_task["steps_to_threshold"])
            lines.append(f"| `{name}` | {limits['random_success']:.3f} | {limits['threshold']:.3f} | {curriculum} | "
                         f"{mean_std(per_task['final_success'])} | {mean_std(per_task['final_return'])} | {reached} | "
                         f"{mean_std(per_task['episode_share'])} |")
    lines += [
        "",
        f"± is the standard deviation over seeds {', '.join(map(str, next(iter(summary['curricula'].values()))['seeds']))}; "
        f"final = episode-weighted over the last 20% of steps; threshold = random + 50% of the gap to success 1, on the "
        f"trailing {window}-step success rate with at least {min_episodes} episodes of the task in the window; '-' = not reached.",
    ]
    return "\n".join(lines) + "\n"


def plot(runs: list[dict], summary: dict, window: int, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax, ax_zero) = plt.subplots(2, 1, figsize=(7.5, 6.5), sharex=True, gridspec_kw={"height_ratios": [2, 1]})
    colors = ("tab:green", "tab:blue", "tab:red", "tab:purple")
    styles = {"uniform": "--", "adaptive": "-"}
    for color, name in zip(colors, summary["tasks"]):
        for curriculum in summary["curricula"]:
            mine = [r for r in runs if r["spec"]["curriculum"] == curriculum]
            curves = np.array([trailing_rate(*task_curves(r, name)[:2], window) for r in mine])
            with np.errstate(all="ignore"), warnings.catch_warnings():
                warnings.simplefilter("ignore", RuntimeWarning)  # steps whose window held none of the task: a gap
                mean = np.nanmean(curves, 0)
            ax.plot(np.arange(1, curves.shape[1] + 1), mean, color=color, linestyle=styles.get(curriculum, ":"),
                    label=f"{name} ({curriculum})")
    for curriculum in summary["curricula"]:
        mine = [r for r in runs if r["spec"]["curriculum"] == curriculum]
        zero = np.array([[np.nan if v is None else v for v in r["frac_reward_zero_std_per_step"]] for r in mine], dtype=float)
        ax_zero.plot(np.arange(1, zero.shape[1] + 1), np.nanmean(zero, 0), color="black", linestyle=styles.get(curriculum, ":"),
                     label=curriculum)
    ax.set_ylabel(f"task success ({window}-step trailing)", fontsize=9)
    ax.legend(fontsize=7, loc="lower right")
    ax_zero.set_ylabel("frac_reward_zero_std", fontsize=9)
    ax_zero.set_xlabel("training step")
    ax_zero.legend(fontsize=8)
    ax.set_title("uniform (dashed) vs adaptive (solid) task sampling, mean over seeds", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def compact_run(run: dict) -> dict:
    """A run for ``results.json``: its per-step task metrics as one list per metric (None on steps the task
    was not drawn) instead of one dict per step that repeats every long task name (300 KB a run)."""
    steps = run["task_metrics_per_step"]
    keys = sorted({key for step in steps for key in step})
    columns = {key: [step.get(key) for step in steps] for key in keys}
    return {**{k: v for k, v in run.items() if k != "task_metrics_per_step"}, "task_metrics_by_key": columns}


def machine_state(jobs: int, loads: tuple[float, float]) -> dict:
    import torch
    import trl

    return {"cpus": os.cpu_count(), "platform": platform.platform(), "python": platform.python_version(), "torch": torch.__version__,
            "trl": trl.__version__, "jobs": jobs, "torch_threads_per_run": 1, "load_1min_at_start": loads[0],
            "load_1min_at_end": loads[1]}


def build_parser() -> argparse.ArgumentParser:
    defaults = trl_runs.load_example().Args()
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    parser.add_argument("--curricula", nargs="+", choices=["uniform", "adaptive", "progress"], default=CURRICULA)
    parser.add_argument("--steps", type=int, default=defaults.steps, help="optimizer steps per run (the main job's)")
    parser.add_argument("--num_generations", type=int, default=defaults.num_generations, help="episodes per GRPO group")
    parser.add_argument("--prompts_per_step", type=int, default=defaults.prompts_per_step, help="GRPO groups per step")
    parser.add_argument("--learning_rate", type=float, default=defaults.learning_rate)
    parser.add_argument("--warm_start_steps", type=int, default=defaults.warm_start_steps)
    parser.add_argument("--curriculum_floor", type=float, default=None, help="adaptive: least probability per task (default 0.25/3)")
    parser.add_argument("--curriculum_window", type=int, default=defaults.curriculum_window, help="adaptive: episodes per task it looks at")
    parser.add_argument("--window", type=int, default=10, help="steps in the trailing success rate (threshold and plot)")
    parser.add_argument("--min_episodes", type=int, default=16, help="episodes of a task the threshold window must hold")
    parser.add_argument("--jobs", type=int, default=1, help="runs in parallel (one torch thread each); 1 = one after the other")
    parser.add_argument("--out", default="bench/learning/results/curriculum")
    parser.add_argument("--resume", action="store_true", help="reuse runs already finished with the same settings")
    parser.add_argument("--quick", action="store_true", help="smoke test: seed 0, 3 steps of 2 x 2 episodes, in runs/curriculum_quick")
    return parser


def main(argv: list[str] | None = None) -> dict:
    args = build_parser().parse_args(argv)
    if args.quick:
        args.seeds, args.steps, args.prompts_per_step, args.num_generations = [0], 3, 2, 2
        args.warm_start_steps, args.window, args.min_episodes, args.jobs = 1, 2, 1, 1
        if args.out == build_parser().get_default("out"):
            args.out = "runs/curriculum_quick"
    for name, least in (("steps", 1), ("num_generations", 2), ("prompts_per_step", 1), ("window", 1), ("min_episodes", 1)):
        if getattr(args, name) < least:
            raise SystemExit(f"curriculum.py: error: --{name} must be at least {least}, got {getattr(args, name)}")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    # Seed by seed: a bench stopped early (and continued with --resume) has whole seeds of every curriculum.
    specs = [RunSpec(curriculum, seed, args.steps, args.num_generations, args.prompts_per_step, args.learning_rate,
                     args.warm_start_steps, args.curriculum_floor, args.curriculum_window)
             for seed in args.seeds for curriculum in args.curricula]
    started, load_before = time.perf_counter(), os.getloadavg()[0]
    runs, trained = train_all(specs, out, args.jobs, args.resume)
    wall_minutes = (time.perf_counter() - started) / 60

    summary = summarize(runs, args.window, args.min_episodes)
    tables = markdown_tables(summary, specs[0], args.window, args.min_episodes)
    plot(runs, summary, args.window, out / "curriculum.png")
    config = {k: v for k, v in vars(args).items() if k not in ("out", "resume", "jobs")}
    config["mixture"] = MIXTURE
    report = {
        "config": config,
        "session": {
            "command": "python bench/learning/curriculum.py " + " ".join(argv if argv is not None else sys.argv[1:]),
            "finished_utc": time.strftime("%Y-%m-%d %H:%M", time.gmtime()), "wall_minutes": round(wall_minutes, 2),
            "runs_trained": trained, "machine": machine_state(args.jobs, (load_before, os.getloadavg()[0])),
        },
        "summary": summary,
        "runs": [compact_run(run) for run in runs],
    }
    (out / "results.json").write_text(json.dumps(report, indent=1))
    (out / "results.md").write_text("# Uniform vs adaptive task sampling (issue 33)\n\n" + tables)
    print(tables)
    return report


if __name__ == "__main__":
    main()
