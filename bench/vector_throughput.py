"""Throughput of gem_core.vector's backends, side by side, as ratios to the sync backend.

Envs:
- ``cpu``: a toy env whose step does a few milliseconds of pure-Python work (holds the GIL);
- ``io``: a toy env whose step waits a few milliseconds (sleep, as a tool call or grader would);
- ``wordle``: ``game:Wordle-v0`` with random guesses (a cheap step: backend overhead dominates);
- ``guess``: ``game:GuessTheNumber-v0`` with random guesses (the cheapest step there is).

Issue 23's target for the cheap games at n=32: thread and async >= 0.8x of sync, process >= 0.5x
(games declare ``blocking = False``, so thread/async call them inline; the process backend runs its
envs grouped, one worker per CPU, one pipe round trip per worker and batch).

Each cell steps the vector env for a fixed wall-clock budget and reports env steps per second
(vector steps x envs stepped). Run: ``python bench/vector_throughput.py`` (about a minute)
or ``--quick`` (about 20 seconds). ``--ray`` adds the ``ray`` backend (a local single-node Ray on
loopback, one actor per env; needs ``pip install -e ".[ray]"``) with its ratio to the process backend.
"""

from __future__ import annotations

import argparse
import os
import time
from typing import Any

import numpy as np

from gem_core.env import Env
from gem_core.envs.game.wordle import load_words
from gem_core.vector import make_vec

BACKENDS = ("sync", "thread", "process", "async")


class BusyEnv(Env):
    """Each step burns ``work`` iterations of pure-Python arithmetic (a CPU-bound grader)."""

    def __init__(self, work: int = 20_000):
        self.work = work

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        super().reset(seed=seed)
        return "go", {}

    def step(self, action: str):
        total = 0
        for i in range(self.work):
            total += i * i % 7
        return str(total), 1.0, False, False, {}

    def sample_random_action(self) -> str:
        return "x"


class WaitingEnv(Env):
    """Each step sleeps ``seconds`` (an env that waits on a tool, a sandbox or a remote grader)."""

    def __init__(self, seconds: float = 0.002):
        self.seconds = seconds

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        super().reset(seed=seed)
        return "go", {}

    def step(self, action: str):
        time.sleep(self.seconds)
        return "ok", 1.0, False, False, {}

    def sample_random_action(self) -> str:
        return "x"


def constant_actions(num_envs: int, rng: np.random.Generator) -> list[str]:
    return ["x"] * num_envs


def wordle_actions(num_envs: int, rng: np.random.Generator, words=load_words()) -> list[str]:
    return [f"\\boxed{{{words[i]}}}" for i in rng.integers(len(words), size=num_envs)]


def guess_actions(num_envs: int, rng: np.random.Generator) -> list[str]:
    return [f"\\boxed{{{n}}}" for n in rng.integers(1, 21, size=num_envs)]


ENVS = {
    "cpu": (BusyEnv, constant_actions),
    "io": (WaitingEnv, constant_actions),
    "wordle": ("game:Wordle-v0", wordle_actions),
    "guess": ("game:GuessTheNumber-v0", guess_actions),
}


def steps_per_second(
    env: Any, num_envs: int, make_actions, budget: float, backends: tuple[str, ...] = BACKENDS, rounds: int = 5
) -> dict[str, float]:
    """Env steps/s per backend. The backends take turns in short rounds, so a load spike from other
    processes on the machine hits all of them alike instead of skewing one column."""
    # Ray actors ask for no CPU here, so a batch of envs fits on this one machine.
    options = {"ray": {"num_cpus": 0}}
    vecs = {b: make_vec(env, num_envs=num_envs, backend=b, seed=0, backend_kwargs=options.get(b)) for b in backends}
    rngs = {b: np.random.default_rng(0) for b in backends}
    steps = dict.fromkeys(backends, 0)
    seconds = dict.fromkeys(backends, 0.0)
    try:
        for b, vec in vecs.items():
            vec.reset()
            vec.step(make_actions(num_envs, rngs[b]))  # warm-up (thread pool, event loop, pipes)
        for _ in range(rounds):
            for b, vec in vecs.items():
                start = time.perf_counter()
                while time.perf_counter() - start < budget / rounds:
                    vec.step(make_actions(num_envs, rngs[b]))
                    steps[b] += num_envs
                seconds[b] += time.perf_counter() - start
        return {b: steps[b] / seconds[b] for b in backends}
    finally:
        for vec in vecs.values():
            vec.close()


def step_cost_ms(env_name: str) -> str:
    env_cls = ENVS[env_name][0]
    if isinstance(env_cls, str):
        return ""
    env = env_cls()
    env.reset(seed=0)
    start = time.perf_counter()
    for _ in range(20):
        env.step("x")
    return f" ({(time.perf_counter() - start) / 20 * 1e3:.1f} ms/step)"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="short budget per cell (about 20 s in all)")
    parser.add_argument("--budget", type=float, default=None, help="seconds of stepping per cell")
    parser.add_argument("--envs", nargs="+", default=list(ENVS), choices=list(ENVS))
    parser.add_argument("--sizes", nargs="+", type=int, default=[8, 32])
    parser.add_argument("--ray", action="store_true", help="add the ray backend (local Ray on loopback)")
    args = parser.parse_args()
    budget = args.budget or (0.3 if args.quick else 2.0)
    backends = BACKENDS
    if args.ray:
        os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")  # Ray addresses on 127.0.0.1
        import ray

        ray.init(num_cpus=len(os.sched_getaffinity(0)), include_dashboard=False, log_to_driver=False)
        backends = (*BACKENDS, "ray")

    print(f"CPUs available: {len(os.sched_getaffinity(0)) if hasattr(os, 'sched_getaffinity') else os.cpu_count()}; "
          f"{budget:.2f} s per cell; steps/s (ratio to sync)")
    header = f"{'env':<28}{'n':>4}" + "".join(f"{b:>22}" for b in backends) + ("   ray/process" if args.ray else "")
    print(header)
    print("-" * len(header))
    for env_name in args.envs:
        env, make_actions = ENVS[env_name]
        label = env_name + step_cost_ms(env_name)
        for num_envs in args.sizes:
            rates = steps_per_second(env, num_envs, make_actions, budget, backends)
            cells = "".join(f"{rates[b]:>12,.0f} ({rates[b] / rates['sync']:>5.2f}x)" for b in backends)
            if args.ray:
                cells += f"{rates['ray'] / rates['process']:>13.2f}x"
            print(f"{label:<28}{num_envs:>4}{cells}", flush=True)


if __name__ == "__main__":
    main()
