"""Single-env stepping speed of the five games issue 23 found slower than GEM's, at our settings and at GEM's.

A random policy (``env.sample_random_action()``) plays for a fixed time; steps/s counts every step and
every reset (an episode that ends is reset, as a trainer would). Each game runs twice: at the id's own
settings and with the constructor kwargs that match GEM's registration of the same id (board size,
mines, target tile, code length, disks, turn limit), since GEM's levels differ from ours.

GEM is not installed here, so its figures are the ones measured in issue 23 on this machine (GEM's
code, the same protocol), quoted as constants and labelled as such; the ratio column is ours / GEM's.

    python bench/game_speed.py [--seconds 3]
"""

from __future__ import annotations

import argparse
import time

from gem_core.registry import make

#: (our id, kwargs matching GEM's registration of that id, GEM's steps/s quoted from issue 23)
GAMES = [
    ("game:Minesweeper-v0-hard", dict(rows=8, cols=8, mines=12, max_turns=64), 33_200),
    ("game:2048-v0-easy", dict(size=4, target=64, max_turns=50), 38_200),
    ("game:Mastermind-v0-hard", dict(code_length=4, num_colors=8, max_turns=30), 211_000),
    ("game:FifteenPuzzle-v0-hard", dict(size=4, max_turns=50), 89_000),
    ("game:TowerOfHanoi-v0-hard", dict(disks=5, max_turns=35), 280_000),
]


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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=3.0, help="timed budget per row")
    args = parser.parse_args()
    print(f"random policy, steps/s incl. resets, {args.seconds:g} s per row; GEM figures quoted from issue 23")
    print(f"{'game':<28} {'settings':<9} {'ours':>10} {'GEM (quoted)':>13} {'ours/GEM':>9}")
    for env_id, gem_kwargs, gem_rate in GAMES:
        for label, overrides in (("ours", {}), ("GEM's", gem_kwargs)):
            rate = steps_per_second(env_id, args.seconds, **overrides)
            print(f"{env_id:<28} {label:<9} {rate:>10.0f} {gem_rate:>13,} {rate / gem_rate:>8.2f}x")


if __name__ == "__main__":
    main()
