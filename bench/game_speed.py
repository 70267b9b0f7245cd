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

Steps/s including resets weighs a game's reset against its steps by its episode length, and the two
random policies play episodes of different lengths (GEM's Minesweeper policy also reveals open cells
and flags, so its episodes run longer; ours places the mines at the first reveal and redraws them
until the board can be cleared by logic). Minesweeper is therefore measured a third time (row
``GEM's+pol``): at GEM's settings with GEM's own random policy on both sides (:data:`COMMON_POLICY`), so
both step the same mix of moves and play episodes of the same length. The last columns separate the parts: mean steps per
episode, mean reset time, and mean step time with the action's sampling (the first reveal's mine
placement is in the step time).
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import time
from dataclasses import dataclass

from gem_core.registry import make

#: (our id, kwargs matching GEM's registration of that id, GEM's id, GEM's steps/s quoted from issue 23)
GAMES = [
    ("game:Minesweeper-v0-hard", dict(rows=8, cols=8, mines=12, max_turns=64), "game:Minesweeper-v0-hard", 33_200),
    ("game:2048-v0-easy", dict(size=4, target=64, max_turns=50), "game:Game2048-v0-easy", 38_200),
    ("game:Mastermind-v0-hard", dict(code_length=4, num_colors=8, max_turns=30), "game:Mastermind-v0-hard", 211_000),
    ("game:FifteenPuzzle-v0-hard", dict(size=4, max_turns=50), "game:FifteenPuzzle-v0-hard", 89_000),
    ("game:TowerOfHanoi-v0-hard", dict(disks=5, max_turns=35), "game:TowerofHanoi-v0-hard", 280_000),
]

#: The timed loop both sides run, ours in this process and GEM's in the reference interpreter: one
#: source, so neither side's loop costs less. Returns (steps incl. resets, episodes, seconds, reset seconds).
TIMED_LOOP = r"""
def timed_loop(env, sample, seconds):
    env.reset(seed=0)
    steps = episode = 0
    reset_time = 0.0
    clock = time.perf_counter
    start = clock()
    deadline = start + seconds
    while clock() < deadline:
        for _ in range(100):
            _, _, terminated, truncated, _ = env.step(sample())
            steps += 1
            if terminated or truncated:
                episode += 1
                begin = clock()
                env.reset(seed=episode)
                reset_time += clock() - begin
                steps += 1
    return steps, episode, clock() - start, reset_time
"""
exec(TIMED_LOOP)  # defines timed_loop here

#: A random policy both sides can play, for games whose own samplers differ: GEM's Minesweeper policy
#: (reveal 9 times in 10, else flag; any cell, open or not), coordinates from ``first`` (GEM's 0, ours 1).
#: Both sides then step the same mix of moves, so steps/s compares the envs, not the policies.
COMMON_POLICY = r"""
def gem_minesweeper_policy(rows, cols, first):
    import random
    rng = random.Random(0)
    def sample():
        kind = "reveal" if rng.random() < 0.9 else "flag"
        return "\\boxed{%s %d %d}" % (kind, rng.randrange(rows) + first, rng.randrange(cols) + first)
    return sample
"""
exec(COMMON_POLICY)  # defines gem_minesweeper_policy here
#: Games measured a third time, both sides playing :data:`COMMON_POLICY`.
COMMON_POLICY_GAMES = {"game:Minesweeper-v0-hard"}

#: GEM's side: one "env_id seconds" request per line on stdin, one :class:`Rates` line per request on stdout.
GEM_RUNNER = r"""
import random, sys, time, warnings
warnings.filterwarnings("ignore")
import gem
envs = {}
def hanoi_move():
    return "\\boxed{%s %s}" % (random.choice("ABC"), random.choice("ABC"))
""" + TIMED_LOOP + COMMON_POLICY + r"""
print("ready", flush=True)
for line in sys.stdin:
    env_id, seconds, policy = line.split()
    env = envs.get(env_id) or envs.setdefault(env_id, gem.make(env_id))
    if policy == "common":
        sample = gem_minesweeper_policy(env.rows, env.cols, 0)
    else:
        try:
            sample = env.sample_random_action
            sample()
        except NotImplementedError:
            sample = hanoi_move
    print(*timed_loop(env, sample, float(seconds)), flush=True)
"""


@dataclass
class Rates:
    """One timed run: steps (resets included) and episodes ended, total and reset seconds."""

    steps: int
    episodes: int
    elapsed: float
    reset_time: float

    @property
    def per_second(self) -> float:
        return self.steps / self.elapsed

    @property
    def episode_length(self) -> float:
        return (self.steps - self.episodes) / max(self.episodes, 1)

    @property
    def reset_us(self) -> float:
        return self.reset_time / max(self.episodes, 1) * 1e6

    @property
    def step_us(self) -> float:
        return (self.elapsed - self.reset_time) / max(self.steps - self.episodes, 1) * 1e6

    def __add__(self, other: Rates) -> Rates:
        return Rates(
            self.steps + other.steps, self.episodes + other.episodes, self.elapsed + other.elapsed, self.reset_time + other.reset_time
        )


def measure(env_id: str, seconds: float, common_policy: bool = False, **overrides) -> Rates:
    env = make(env_id, **overrides)
    sample = gem_minesweeper_policy(env.rows, env.cols, 1) if common_policy else env.sample_random_action  # noqa: F821
    return Rates(*timed_loop(env, sample, seconds))  # noqa: F821 - defined by exec(TIMED_LOOP)


class GemReference:
    """GEM's games stepped in another interpreter (where ``gem-llm`` is installed)."""

    def __init__(self, python: str):
        # -I: run from a checkout, `python -c` would put this repository's own `gem` package (the drop-in
        # layer over gem_core) ahead of the installed gem-llm.
        self.proc = subprocess.Popen([python, "-I", "-c", GEM_RUNNER], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        if self.proc.stdout.readline().strip() != "ready":
            raise RuntimeError(f"{python} could not import gem (pip install gem-llm==0.1.0 there).")

    def measure(self, gem_id: str, seconds: float, common_policy: bool = False) -> Rates:
        self.proc.stdin.write(f"{gem_id} {seconds} {'common' if common_policy else 'own'}\n")
        self.proc.stdin.flush()
        steps, episodes, elapsed, reset_time = self.proc.stdout.readline().split()
        return Rates(int(steps), int(episodes), float(elapsed), float(reset_time))

    def close(self) -> None:
        self.proc.stdin.close()
        self.proc.wait(timeout=10)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=3.0, help="timed budget per row and side")
    parser.add_argument("--rounds", type=int, default=3, help="alternating rounds per row (with --gem-python)")
    parser.add_argument("--games", nargs="*", help="only the ids containing one of these (e.g. Minesweeper)")
    parser.add_argument("--gem-python", help="an interpreter with gem-llm installed: measure GEM side by side")
    args = parser.parse_args()
    if args.gem_python and not shutil.which(args.gem_python):
        parser.error(f"--gem-python {args.gem_python}: no such interpreter (make one: python -m venv /tmp/gem-ref && /tmp/gem-ref/bin/pip install gem-llm==0.1.0)")
    gem = GemReference(args.gem_python) if args.gem_python else None
    reference = "GEM measured side by side" if gem else "GEM figures quoted from issue 23 (GEM not run)"
    print(f"random policy, steps/s incl. resets, {args.seconds:g} s per row and side; {reference}")
    print("then ours / GEM's: steps per episode, reset µs, step µs (with sampling the action)")
    print(f"{'game':<28} {'settings':<9} {'ours':>10} {'GEM':>10} {'ours/GEM':>9} {'ep. length':>12} {'reset µs':>13} {'step µs':>13}")
    try:
        for env_id, gem_kwargs, gem_id, quoted in GAMES:
            if args.games and not any(name in env_id for name in args.games):
                continue
            rows = [("ours", measure(env_id, args.seconds), None)]
            policies = [False, True] if gem and env_id in COMMON_POLICY_GAMES else [False]
            for common in policies:
                if gem:  # alternate short rounds, so a load spike hits both sides alike
                    ours_gem_settings = gem_rates = Rates(0, 0, 0.0, 0.0)
                    for _ in range(args.rounds):
                        ours_gem_settings += measure(env_id, args.seconds / args.rounds, common, **gem_kwargs)
                        gem_rates += gem.measure(gem_id, args.seconds / args.rounds, common)
                else:
                    ours_gem_settings, gem_rates = measure(env_id, args.seconds, **gem_kwargs), None
                rows.append(("GEM's+pol" if common else "GEM's", ours_gem_settings, gem_rates))
            gem_rate = rows[1][2].per_second if gem else float(quoted)
            for label, rates, their in rows:
                parts = ""
                if their is not None:
                    parts = (
                        f" {rates.episode_length:>5.1f}/{their.episode_length:<6.1f}"
                        f" {rates.reset_us:>6.1f}/{their.reset_us:<6.1f} {rates.step_us:>6.1f}/{their.step_us:<6.1f}"
                    )
                their_rate = their.per_second if their is not None else gem_rate
                rate = rates.per_second
                print(f"{env_id:<28} {label:<9} {rate:>10.0f} {their_rate:>10.0f} {rate / their_rate:>8.2f}x{parts}", flush=True)
    finally:
        if gem:
            gem.close()


if __name__ == "__main__":
    main()
