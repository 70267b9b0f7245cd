"""The GEM paper's estimator comparison at CPU scale: vanilla REINFORCE, ReBN and GRPO through TRL.

Why: the paper's central claim is that REINFORCE with Return Batch Normalization (ReBN) over per-turn
discounted returns learns multi-turn tasks better than vanilla REINFORCE and matches or beats GRPO, which
gives every turn of an episode the same credit. This script measures that on this project's own stack:
the main job's recipe (``examples/train_trl.py``: a random-weight 2-layer transformer, a tokenizer trained
on the env's text, TRL's stock ``GRPOTrainer`` with ``GemRolloutFunc``), one run per env x estimator x seed,
every run in a fresh process with one torch thread (so a run's numbers do not depend on what runs beside it).

Estimators (``TurnCreditGRPOTrainer(turn_credit=...)``; TRL's loss, clipping and optimizer are the same for all):
- ``reinforce``: each turn's tokens get the discounted return ``G_t`` (gamma < 1), no baseline;
- ``rebn``: the same ``G_t`` normalized over all turns of the batch (ReBN);
- ``baseline`` (an ablation): ReBN's ``G_t`` minus the batch mean, without the division;
- ``grpo``: stock GRPO, the episode return normalized within its group of ``num_generations`` rollouts;
- ``grpo8``: the same on the same episodes per step, split into groups of 8 (GRPO's usual group size).
Turn-level GAE (``gem_core.rollout.turn_level_gae``) is not run: it needs a value estimate per turn, and
TRL's GRPOTrainer is critic-free (no value head, no value loss); training a critic would be a second model
and loss inside the trainer, which is beyond an adapter (verl and OpenRLHF, which train critics, can use it).

Outputs in ``--out``: ``<env>.png`` (mean +- std over seeds of each estimator's return curve, smoothed),
``results.md`` (per env and estimator: final return = mean of the last 20% of steps with its 95% interval
over seeds, AUC = mean return over all steps, steps to reach random + 50% of the gap to the best return), ``results.json`` (every
run's curves, the config and the machine's load), and ``runs/`` (each run's own metrics and TRL log).
A run whose ``metrics.json`` exists with the same settings is reused (``--resume``), so an interrupted
comparison continues where it stopped.

    python bench/learning/compare.py --quick      # smoke test: one env, one seed, a few steps (~1 min)
    python bench/learning/compare.py --resume     # the comparison of bench/learning/results/README.md (75 runs, ~50 min)
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import sys
import threading
import time
from dataclasses import MISSING, asdict, dataclass, fields
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))  # trl_runs.py beside it, also when loaded by path (tests)
import trl_runs  # noqa: E402


@dataclass(frozen=True)
class EnvSetting:
    """One env of the comparison: a GEM id and the kwargs that make it 3-6 turns with per-turn rewards."""

    env_id: str
    env_kwargs: dict


ENVS: dict[str, EnvSetting] = {
    # The main job's env: reward 1 on the turn that guesses right, 0 otherwise (a binary search wins every game).
    "guess": EnvSetting("game:GuessTheNumber-v0", {"min_number": 1, "max_number": 4, "max_turns": 3}),
    # The smallest Mastermind: 2 positions x 2 colours, 3 guesses (always enough when the pegs are read: guess
    # 1 1, then by the black count 2 2 / done / 1 2, then 2 1). Dense: each turn earns the rise of the best
    # black-peg count / 2. (Issue 29: 3 x 4 in 5 guesses, and 2 x 3 in 4, did not learn at this scale.)
    "mastermind-2x2": EnvSetting("game:Mastermind-v0", {"code_length": 2, "num_colors": 2, "max_turns": 3}),
    # Hangman over four words that share most letters, 4 turns: reading which letters hit wins every game
    # (the best fixed letter order returns 0.85). Dense: each turn earns the letters it reveals / 5.
    # (Issue 29: the whole 480-word list in 6 turns did not learn at this scale.)
    "hangman-4words": EnvSetting("game:Hangman-v0", {"words": ["refer", "offer", "river", "never"], "lives": 8, "max_turns": 4}),
}
#: name -> ``turn_credit`` of TurnCreditGRPOTrainer. ``baseline`` (per-turn returns minus the batch mean,
#: ReBN without the division by the std) is an ablation, run only when named in ``--estimators``.
ESTIMATORS: dict[str, str] = {"reinforce": "reinforce", "rebn": "rebn", "grpo": "episode", "baseline": "baseline",
                              "grpo8": "episode"}
#: Estimators trained on another split of the same episodes per step: rollouts per episode start. ``grpo8`` is
#: GRPO at its usual group size (64 episodes = 8 starts x 8), beside ``grpo`` on the others' batches (32 x 2).
GROUP_SIZE: dict[str, int] = {"grpo8": 8}
DEFAULT_ESTIMATORS = ["reinforce", "rebn", "baseline", "grpo", "grpo8"]


@dataclass(frozen=True)
class RunSpec:
    """Everything that determines one training run (its metrics are reused only if all of it matches)."""

    env: str
    estimator: str
    seed: int
    steps: int
    gamma: float
    learning_rate: float
    num_generations: int
    prompts_per_step: int
    beta: float = 0.0
    vocab_size: int = 1000
    warm_start_steps: int = 15

    @property
    def name(self) -> str:
        return f"{self.env}/{self.estimator}/seed{self.seed}"


#: Settings the recipe gained after runs were saved (issue 29): a saved run without one ran at this value.
BEFORE_SETTING = {"vocab_size": 320, "warm_start_steps": 0}


def run_one(spec: RunSpec, out: str) -> dict:
    """Train one run in ``out`` (see ``trl_runs.train_example``); its metrics."""
    setting = ENVS[spec.env]
    return trl_runs.train_example(dict(
        env=setting.env_id, env_kwargs=json.dumps(setting.env_kwargs), steps=spec.steps, seed=spec.seed,
        turn_credit=ESTIMATORS[spec.estimator], gamma=spec.gamma, learning_rate=spec.learning_rate,
        num_generations=spec.num_generations, prompts_per_step=spec.prompts_per_step, beta=spec.beta,
        vocab_size=spec.vocab_size, warm_start_steps=spec.warm_start_steps,
    ), asdict(spec), out)


def reusable(path: Path, spec: RunSpec) -> dict | None:
    """The metrics of a finished run with this spec, or None."""
    # A run saved before a setting existed ran at that setting's default.
    defaults = {f.name: f.default for f in fields(RunSpec) if f.default is not MISSING}
    return trl_runs.finished_run(path, asdict(spec), spec.steps,
                             same_spec=lambda saved: {**defaults, **BEFORE_SETTING, **saved} == asdict(spec))


class Progress:
    """A tqdm bar over all steps of all runs, fed by polling each run's ``log.jsonl`` (one line per step);
    it also samples the machine's load average, which the results report next to the timings."""

    def __init__(self, run_dirs: list[Path], done: int, total: int, interval: float = 2.0):
        from tqdm import tqdm

        self.run_dirs, self.interval = run_dirs, interval
        self.bar = tqdm(total=total, initial=done, unit="step", dynamic_ncols=True, file=sys.stderr)
        self.base, self.loads = done, [os.getloadavg()[0]]
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._poll, daemon=True)
        self._last_sample = time.monotonic()

    def __enter__(self) -> Progress:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()
        self._update()
        self.bar.close()

    def _update(self) -> None:
        steps = 0
        for run_dir in self.run_dirs:
            with contextlib.suppress(OSError):
                with open(run_dir / "log.jsonl", "rb") as f:
                    steps += sum(1 for _ in f)
        self.bar.update(max(0, self.base + steps - self.bar.n))

    def _poll(self) -> None:
        while not self._stop.wait(self.interval):
            self._update()
            if time.monotonic() - self._last_sample >= 60:
                self.loads.append(os.getloadavg()[0])
                self._last_sample = time.monotonic()


def train_all(specs: list[RunSpec], out: Path, jobs: int, resume: bool) -> tuple[list[dict], list[float], int]:
    """Every run's metrics, in the order of ``specs`` (reused ones where ``resume`` allows), the
    1-minute load averages sampled while they ran, and how many runs were trained (not reused)."""
    bars: list[Progress] = []

    def progress(todo: list[RunSpec]) -> Progress:
        for spec in todo:  # a stale log would count in the progress bar
            with contextlib.suppress(FileNotFoundError):
                (out / "runs" / spec.name / "log.jsonl").unlink()
        total = sum(spec.steps for spec in specs)
        bars.append(Progress([out / "runs" / s.name for s in todo], total - sum(s.steps for s in todo), total))
        return bars[-1]

    metrics_list, trained = trl_runs.train_all(specs, out, jobs, resume, run_one, reusable, progress)
    loads = bars[0].loads + [os.getloadavg()[0]]
    for spec, metrics in zip(specs, metrics_list):  # TRL logs the policy's token entropy each step: collapse shows there
        metrics["entropy_per_step"] = logged_values(out / "runs" / spec.name / "log.jsonl", "entropy")
    return metrics_list, loads, trained


def previous_sessions(path: Path, config: dict) -> list[dict]:
    """The sessions recorded in an earlier ``results.json`` of the same config (none if it differs)."""
    try:
        earlier = json.loads(path.read_text())
    except (OSError, ValueError):
        return []
    return earlier.get("sessions", []) if earlier.get("config") == config else []


def logged_values(log_path: Path, key: str) -> list[float]:
    """One value per step of ``key`` from a run's ``log.jsonl`` (TRL's metrics as train_trl.py writes them)."""
    with open(log_path) as f:
        return [float(json.loads(line)[key]) for line in f if line.strip()]


# ------------------------------------------------------------------------------------------ summary


def moving_average(curve: np.ndarray, window: int) -> np.ndarray:
    """Trailing mean over ``window`` steps (shorter at the start), same length as ``curve``."""
    sums = np.cumsum(np.insert(np.asarray(curve, dtype=float), 0, 0.0))
    idx = np.arange(1, len(curve) + 1)
    lo = np.maximum(0, idx - window)
    return (sums[idx] - sums[lo]) / (idx - lo)


def steps_to_reach(curve: np.ndarray, threshold: float, window: int) -> int | None:
    """First step (1-based) at which the ``window``-step moving average reaches ``threshold``, or None.

    Only full windows count, so a lucky first step is not "reached"."""
    smooth = moving_average(curve, window)
    for step in range(min(window, len(curve)), len(curve) + 1):
        if smooth[step - 1] >= threshold:
            return step
    return None


def max_return(env: str) -> float:
    import gem_core

    setting = ENVS[env]
    built = gem_core.make(setting.env_id, **setting.env_kwargs)
    best = built.unwrapped.max_return
    built.close()
    if best is None:
        raise ValueError(f"{setting.env_id} declares no max_return; the gap to close needs one.")
    return float(best)


def summarize(runs: list[dict], window: int) -> dict:
    """Per env and estimator: final return, AUC and steps to threshold, per seed and over seeds."""
    summary: dict[str, dict] = {}
    for run in runs:
        spec = run["spec"]
        env, estimator = spec["env"], spec["estimator"]
        if env not in summary:
            random_return, best = run["random_move_reward"], max_return(env)
            summary[env] = {"random_return": random_return, "max_return": best,
                            "threshold": random_return + 0.5 * (best - random_return), "estimators": {}}
        curve = np.asarray(run["reward_per_step"], dtype=float)
        fifth = max(1, len(curve) // 5)
        cell = summary[env]["estimators"].setdefault(
            estimator, {"seeds": [], "final": [], "auc": [], "steps_to_threshold": [], "final_entropy": [], "minutes": []})
        cell["seeds"].append(spec["seed"])
        cell["final"].append(float(curve[-fifth:].mean()))
        cell["auc"].append(float(curve.mean()))
        cell["steps_to_threshold"].append(steps_to_reach(curve, summary[env]["threshold"], window))
        cell["final_entropy"].append(float(np.mean(run["entropy_per_step"][-fifth:])))
        cell["minutes"].append(run["minutes"])
    for env_summary in summary.values():
        for cell in env_summary["estimators"].values():
            for key in ("final", "auc", "final_entropy"):
                cell[f"{key}_mean"] = float(np.mean(cell[key]))
                cell[f"{key}_std"] = float(np.std(cell[key]))
            cell["final_ci95"] = ci95_half_width(cell["final"])
    return summary


#: Student's t, two-sided 95%, by degrees of freedom (seeds - 1); more seeds than the table: the normal's 1.96.
_T95 = {1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 6: 2.447, 7: 2.365, 8: 2.306, 9: 2.262}


def ci95_half_width(values: list[float]) -> float | None:
    """Half-width of the 95% confidence interval of the mean over seeds (t interval); None for one seed."""
    if len(values) < 2:
        return None
    return float(_T95.get(len(values) - 1, 1.96) * np.std(values, ddof=1) / np.sqrt(len(values)))


def markdown_table(summary: dict, steps: int, window: int) -> str:
    lines = []
    for env, env_summary in summary.items():
        setting = ENVS[env]
        lines += [
            f"### {env}: `{setting.env_id}` {json.dumps(setting.env_kwargs)}",
            "",
            f"random moves {env_summary['random_return']:.3f}, best possible {env_summary['max_return']:.3f}, "
            f"threshold (random + 50% of the gap) {env_summary['threshold']:.3f}; {steps} steps, "
            f"threshold on the {window}-step moving average.",
            "",
            "| estimator | final return (last 20%) | 95% CI of the mean | AUC (mean return) | steps to threshold (per seed) "
            "| final per seed | entropy (last 20%) | minutes per run |",
            "|---|---|---|---|---|---|---|---|",
        ]
        for estimator, cell in env_summary["estimators"].items():
            reached = " / ".join("-" if s is None else str(s) for s in cell["steps_to_threshold"])
            per_seed = " / ".join(f"{v:.3f}" for v in cell["final"])
            ci = cell.get("final_ci95")
            # (a mean cannot exceed the best possible return: the interval's top is cut there)
            interval = "-" if ci is None else f"{cell['final_mean'] - ci:.3f} .. {min(cell['final_mean'] + ci, env_summary['max_return']):.3f}"
            lines.append(
                f"| {estimator} | {cell['final_mean']:.3f} ± {cell['final_std']:.3f} | {interval} | {cell['auc_mean']:.3f} ± "
                f"{cell['auc_std']:.3f} | {reached} | {per_seed} | {cell['final_entropy_mean']:.2f} | "
                f"{np.mean(cell['minutes']):.1f} |"
            )
        lines.append("")
    lines.append("± is the standard deviation over seeds; the 95% CI is Student's t over seeds; '-' = not reached within "
                 "the run; entropy is TRL's mean token entropy of the policy (nats) over the sampled tokens, mean over seeds.")
    return "\n".join(lines) + "\n"


def plot_env(env: str, runs: list[dict], env_summary: dict, window: int, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax, ax_entropy) = plt.subplots(2, 1, figsize=(7, 6), sharex=True, gridspec_kw={"height_ratios": [2.2, 1]})
    for color, estimator in zip(("tab:gray", "tab:blue", "tab:orange", "tab:green", "tab:purple"), env_summary["estimators"]):
        mine = [r for r in runs if r["spec"]["estimator"] == estimator]
        curves = np.array([moving_average(np.asarray(r["reward_per_step"]), window) for r in mine])
        steps = np.arange(1, curves.shape[1] + 1)
        mean, std = curves.mean(0), curves.std(0)
        ax.plot(steps, mean, color=color, label=f"{estimator} ({len(curves)} seeds)")
        ax.fill_between(steps, mean - std, mean + std, color=color, alpha=0.2, linewidth=0)
        entropy = np.array([r["entropy_per_step"] for r in mine])
        ax_entropy.plot(steps, entropy.mean(0), color=color)
        ax_entropy.fill_between(steps, entropy.min(0), entropy.max(0), color=color, alpha=0.15, linewidth=0)
    ax.axhline(env_summary["random_return"], color="tab:red", linestyle="--", label="random moves")
    ax.axhline(env_summary["threshold"], color="tab:red", linestyle=":", label="random + 50% of gap")
    ax_entropy.set_xlabel("training step")
    ax_entropy.set_ylabel("policy entropy\n(mean, min-max)", fontsize=8)
    ax.set_ylabel(f"episode return ({window}-step moving average)", fontsize=9)
    ax.set_title(f"{ENVS[env].env_id} {json.dumps(ENVS[env].env_kwargs)}\nmean ± std over seeds", fontsize=9)
    ax.legend(loc="best", fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def machine_state(loads: list[float], jobs: int) -> dict:
    import torch
    import trl

    return {
        "cpus": os.cpu_count(), "platform": platform.platform(), "python": platform.python_version(),
        "torch": torch.__version__, "trl": trl.__version__, "jobs": jobs, "torch_threads_per_run": 1,
        "load_1min_at_start": loads[0], "load_1min_at_end": loads[-1],
        "load_1min_mean": float(np.mean(loads)), "load_1min_max": float(np.max(loads)),
    }


def batch_split(args: argparse.Namespace, estimator: str) -> tuple[int, int]:
    """``(num_generations, prompts_per_step)`` of ``estimator``'s runs: the same episodes per step for every
    estimator, split into its groups (:data:`GROUP_SIZE`) where it has its own."""
    group = GROUP_SIZE.get(estimator)
    if group is None:
        return args.num_generations, args.prompts_per_step
    episodes = args.num_generations * args.prompts_per_step
    if episodes % group:
        raise SystemExit(f"compare.py: error: {estimator} splits a step's {episodes} episodes into groups of {group}; "
                         f"make --num_generations x --prompts_per_step a multiple of {group}, or leave {estimator} out.")
    return group, episodes // group


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    parser.add_argument("--envs", nargs="+", choices=list(ENVS), default=list(ENVS))
    parser.add_argument("--estimators", nargs="+", choices=list(ESTIMATORS), default=DEFAULT_ESTIMATORS)
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2, 3, 4])
    parser.add_argument("--steps", type=int, default=250, help="optimizer steps per run (the main job's)")
    parser.add_argument("--gamma", type=float, default=0.9, help="discount over turns (the per-turn estimators)")
    parser.add_argument("--learning_rate", type=float, default=3e-3, help="the main job's AdamW learning rate")
    parser.add_argument("--num_generations", type=int, default=2, help="episodes per start (GRPO's group; the main job's)")
    parser.add_argument("--prompts_per_step", type=int, default=32, help="distinct episode starts per step (the main job's)")
    parser.add_argument("--beta", type=float, default=0.0,
                        help="KL penalty to the initial model, for every estimator alike (the random initial "
                             "policy is near uniform: this holds entropy up)")
    parser.add_argument("--vocab_size", type=int, default=1000, help="the tiny tokenizer's BPE vocabulary (the main job's)")
    parser.add_argument("--warm_start_steps", type=int, default=15,
                        help="supervised steps on random-move episodes before RL (the move format only; the main job's)")
    parser.add_argument("--window", type=int, default=10, help="moving-average window for the plots and the threshold")
    parser.add_argument("--jobs", type=int, default=2, help="runs in parallel (one torch thread each); 1 = in this process")
    parser.add_argument("--out", default="bench/learning/results/comparison")
    parser.add_argument("--resume", action="store_true", help="reuse runs already finished with the same settings")
    parser.add_argument("--quick", action="store_true",
                        help="smoke test: env guess, seed 0, 3 steps of 2x4 episodes, in this process")
    return parser


def main(argv: list[str] | None = None) -> dict:
    args = build_parser().parse_args(argv)
    if args.quick:
        args.envs, args.seeds, args.steps, args.jobs = ["guess"], [0], 3, 1
        args.estimators = ["reinforce", "rebn", "grpo"]
        args.num_generations, args.prompts_per_step, args.window = 4, 2, 2
        if args.out == build_parser().get_default("out"):
            args.out = "runs/compare_quick"
    for name in ("steps", "num_generations", "prompts_per_step", "window"):
        if getattr(args, name) < (2 if name == "num_generations" else 1):
            raise SystemExit(f"compare.py: error: --{name} is too small ({getattr(args, name)})")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    # Seed by seed: a comparison stopped early (and continued with --resume) has whole seeds of every cell.
    specs = [RunSpec(env, estimator, seed, args.steps, args.gamma, args.learning_rate, *batch_split(args, estimator),
                     args.beta, args.vocab_size, args.warm_start_steps)
             for seed in args.seeds for env in args.envs for estimator in args.estimators]
    started = time.perf_counter()
    runs, loads, trained = train_all(specs, out, args.jobs, args.resume)
    wall_minutes = (time.perf_counter() - started) / 60

    summary = summarize(runs, args.window)
    table = markdown_table(summary, args.steps, args.window)
    for env, env_summary in summary.items():
        plot_env(env, [r for r in runs if r["spec"]["env"] == env], env_summary, args.window, out / f"{env}.png")
    config = {k: v for k, v in vars(args).items() if k not in ("out", "resume", "jobs")}  # what sets the numbers
    config["envs_settings"] = {env: asdict(ENVS[env]) for env in args.envs}
    session = {
        "command": "python bench/learning/compare.py " + " ".join(argv if argv is not None else sys.argv[1:]),
        "finished_utc": time.strftime("%Y-%m-%d %H:%M", time.gmtime()),
        "wall_minutes": round(wall_minutes, 2),
        "runs_trained": trained,
        "machine": machine_state(loads, args.jobs),
    }
    report = {
        "config": config,
        # Every invocation that wrote this folder, oldest first: a --resume that only re-summarizes keeps the
        # timings and load of the sessions that trained.
        "sessions": previous_sessions(out / "results.json", config) + [session],
        "summary": summary,
        "runs": [{"spec": r["spec"], "minutes": r["minutes"], "random_move_reward": r["random_move_reward"],
                  "reward_per_step": r["reward_per_step"], "success_per_step": r["success_per_step"],
                  "entropy_per_step": r["entropy_per_step"]} for r in runs],
    }
    (out / "results.json").write_text(json.dumps(report, indent=1))
    (out / "results.md").write_text(table)
    print(table)
    print(f"{len(runs)} runs ({trained} trained, {len(runs) - trained} reused) in {wall_minutes:.1f} min "
          f"(load {session['machine']['load_1min_mean']:.1f} mean); wrote {out}/results.md, results.json and one PNG per env",
          flush=True)
    return report


if __name__ == "__main__":
    main()
