"""Single-env stepping speed of the five games issue 23 found slower than GEM's, at our settings and at GEM's.

A random policy (``env.sample_random_action()``) plays for a fixed time; steps/s counts every step and
every reset (an episode that ends is reset, as a trainer would). Each game runs twice: at the id's own
settings and with the constructor kwargs that match GEM's registration of the same id (board size,
mines, target tile, code length, disks, turn limit), since GEM's levels differ from ours.

The reference is upstream GEM (``gem-llm`` on PyPI, a different package from this project). It is not a
dependency: install it into a scratch virtualenv and pass that interpreter,

    python -m venv /tmp/gem-ref && /tmp/gem-ref/bin/pip install gem-llm==0.1.0
    python bench/game_speed.py --gem-python /tmp/gem-ref/bin/python [--seconds 3]

and GEM's games run in that interpreter (one long-lived child process) in rounds that alternate with
ours, so both see the same machine load; the ratio is ours / GEM's from that one run. Each side plays
its own random policy (GEM's TowerofHanoi has none: random ``\\boxed{X Y}`` moves over its pegs).
Without ``--gem-python`` the GEM column holds the figures measured in issue 23 on this machine,
quoted as constants and labelled as such.
"""

from __future__ import annotations

import argparse
import subprocess
import time

from gem_core.registry import make

#: (our id, kwargs matching GEM's registration of that id, GEM's id, GEM's steps/s quoted from issue 23)
GAMES = [
    ("game:Minesweeper-v0-hard", dict(rows=8, cols=8, mines=12, max_turns=64), "game:Minesweeper-v0-hard", 33_200),
    ("game:2048-v0-easy", dict(size=4, target=64, max_turns=50), "game:Game2048-v0-easy", 38_200),
    ("game:Mastermind-v0-hard", dict(code_length=4, num_colors=8, max_turns=30), "game:Mastermind-v0-hard", 211_000),
    ("game:FifteenPuzzle-v0-hard", dict(size=4, max_turns=50), "game:FifteenPuzzle-v0-hard", 89_000),
    ("game:TowerOfHanoi-v0-hard", dict(disks=5, max_turns=35), "game:TowerofHanoi-v0-hard", 280_000),
]

#: The loop GEM's games run in the reference interpreter: one "env_id seconds" request per line on
#: stdin, one steps/s figure per line on stdout (the same protocol as :func:`steps_per_second`).
GEM_RUNNER = r"""
import random, sys, time, warnings
warnings.filterwarnings("ignore")
import gem
envs = {}
def hanoi_move():
    return "\\boxed{%s %s}" % (random.choice("ABC"), random.choice("ABC"))
print("ready", flush=True)
for line in sys.stdin:
    env_id, seconds = line.split()
    env = envs.get(env_id) or envs.setdefault(env_id, gem.make(env_id))
    try:
        sample = env.sample_random_action
        sample()
    except NotImplementedError:
        sample = hanoi_move
    env.reset(seed=0)
    steps = episode = 0
    start = time.perf_counter()
    deadline = start + float(seconds)
    while time.perf_counter() < deadline:
        for _ in range(100):
            _, _, terminated, truncated, _ = env.step(sample())
            steps += 1
            if terminated or truncated:
                episode += 1
                env.reset(seed=episode)
                steps += 1
    print(steps / (time.perf_counter() - start), flush=True)
"""


def steps_per_second(env_id: str, seconds: float, **overrides) -> float:
    env = make(env_id, **overrides)
    env.reset(seed=0)
    steps, episode = 0, 0
    start = time.perf_counter()
    deadline = start + seconds
    while time.perf_counter() < deadline:
        for _ in range(100):
            _, _, terminated, truncated, _ = env.step(env.sample_random_action())
            steps += 1
            if terminated or truncated:
                episode += 1
                env.reset(seed=episode)
                steps += 1
    return steps / (time.perf_counter() - start)


class GemReference:
    """GEM's games stepped in another interpreter (where ``gem-llm`` is installed)."""

    def __init__(self, python: str):
        self.proc = subprocess.Popen([python, "-c", GEM_RUNNER], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        if self.proc.stdout.readline().strip() != "ready":
            raise RuntimeError(f"{python} could not import gem (pip install gem-llm==0.1.0 there).")

    def steps_per_second(self, gem_id: str, seconds: float) -> float:
        self.proc.stdin.write(f"{gem_id} {seconds}\n")
        self.proc.stdin.flush()
        return float(self.proc.stdout.readline())

    def close(self) -> None:
        self.proc.stdin.close()
        self.proc.wait(timeout=10)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=3.0, help="timed budget per row and side")
    parser.add_argument("--rounds", type=int, default=3, help="alternating rounds per row (with --gem-python)")
    parser.add_argument("--gem-python", help="an interpreter with gem-llm installed: measure GEM side by side")
    args = parser.parse_args()
    gem = GemReference(args.gem_python) if args.gem_python else None
    reference = "GEM measured side by side" if gem else "GEM figures quoted from issue 23 (GEM not run)"
    print(f"random policy, steps/s incl. resets, {args.seconds:g} s per row and side; {reference}")
    print(f"{'game':<28} {'settings':<9} {'ours':>10} {'GEM':>10} {'ours/GEM':>9}")
    try:
        for env_id, gem_kwargs, gem_id, quoted in GAMES:
            if gem:  # alternate short rounds, so a load spike hits both sides alike
                ours_gem_settings = gem_rate = 0.0
                for _ in range(args.rounds):
                    ours_gem_settings += steps_per_second(env_id, args.seconds / args.rounds, **gem_kwargs) / args.rounds
                    gem_rate += gem.steps_per_second(gem_id, args.seconds / args.rounds) / args.rounds
            else:
                ours_gem_settings, gem_rate = steps_per_second(env_id, args.seconds, **gem_kwargs), float(quoted)
            ours_own = steps_per_second(env_id, args.seconds)
            for label, rate in (("ours", ours_own), ("GEM's", ours_gem_settings)):
                print(f"{env_id:<28} {label:<9} {rate:>10.0f} {gem_rate:>10.0f} {rate / gem_rate:>8.2f}x", flush=True)
    finally:
        if gem:
            gem.close()


if __name__ == "__main__":
    main()
