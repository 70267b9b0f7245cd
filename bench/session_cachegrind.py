"""Instructions and cache misses per turn of GEM's episode bookkeeping, counted by cachegrind: a measure that a
noisy machine cannot move.

``bench/session_overhead.py`` times the session against a bare ``env.step`` loop; on a shared 2-vCPU machine its
rounds vary by 2x, so a 5% change is invisible there. This bench plays the same loops (512 episodes in flight,
each move the env's own random action, its ids and log-probs made once per distinct text as a sampler hands them
over) under ``valgrind --tool=cachegrind`` twice, with ``--turns`` and twice as many turns, and reports the
difference per turn, so start-up (imports, tokenizer, the first episodes' template caches) cancels out:

- ``I``: instructions;
- ``D1 misses``: first-level data cache misses (reads and writes);
- ``LL misses``: misses of the simulated last level, sized by default as this machine's 2 MiB L2 (its L3 is
  shared and large: a miss of a 2 MiB level is what the session's working set pays);
- ``full GCs``: the garbage collector's full collections in the extra turns. One traverses every object of the
  process (about 80k here) and costs ~1.2 M LL misses, ~110 a turn of a 10240-turn window, and ~3% of a turn's
  instructions: two ways whose counts differ are not compared by their LL misses. Each run collects fully before
  its first turn, so the collection the start-up's objects would set off is not counted (a long run is past it).

    python bench/session_cachegrind.py [--turns 10240] [--episodes 512] [--against REV]

``--against REV`` also counts the session code of git revision ``REV`` (``session.py`` and ``trajectory.py``
as they were there, the rest of gem_core this checkout's; see ``bench/session_overhead.py --against``). Each
run takes one to three minutes (cachegrind runs Python ~50x slower). Needs valgrind (``apt install valgrind``).
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import math
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

ENV_ID = "game:GuessTheNumber-v0-hard"
#: The summary lines cachegrind prints, and the counts read from each.
SUMMARY = {"I": r"I\s+refs:\s+([\d,]+)", "D1 misses": r"D1\s+misses:\s+([\d,]+)", "LL misses": r"LL misses:\s+([\d,]+)"}
#: The line :func:`play` ends with: the garbage collector's collections of each generation, the last one full.
GC_LINE = re.compile(r"^gc collections: (\d+) (\d+) (\d+)$", re.MULTILINE)


def play(way: str, turns: int, episodes: int) -> None:
    """Play ``turns`` turns of ``way`` ("bare", "session" or "at:REV") with ``bench/session_overhead.py``'s loops."""
    from session_overhead import bare, load, session_class_at, sessions

    from gem_core.rollout import ChatTemplate, EpisodeSession

    # The full collection that the objects of the imports and of the 512 episodes' set-up would set off comes before
    # the first turn, not among the counted ones (a long run is long past it): whether it fell in the window moved a
    # way's LL misses by ~110 a turn.
    if way == "bare":
        bare(ENV_ID, episodes, math.inf, turns=turns, ready=gc.collect)
    else:
        session_class = session_class_at(way.removeprefix("at:")) if way.startswith("at:") else EpisodeSession
        tokenizer, _ = load("deepseek")
        template = ChatTemplate.for_tokenizer(tokenizer)
        asyncio.run(sessions(ENV_ID, episodes, math.inf, tokenizer, template, session_class, turns=turns, ready=gc.collect))
    print("gc collections:", *(generation["collections"] for generation in gc.get_stats()), flush=True)


def counts(way: str, turns: int, episodes: int, d1: str, ll: str) -> dict[str, int]:
    """cachegrind's totals for one run of :func:`play` in a fresh interpreter, and its full GCs (``"full GCs"``)."""
    command = [
        "valgrind", "--tool=cachegrind", "--cache-sim=yes", f"--D1={d1}", f"--LL={ll}", "--cachegrind-out-file=/dev/null",
        sys.executable, __file__, "--play", way, "--turns", str(turns), "--episodes", str(episodes),
    ]  # fmt: skip
    # One hash seed: dicts and sets lay out the same way in every run, so the two runs differ only by their turns. One
    # OpenBLAS thread: its idle workers spin after numpy's start-up for as long as the (simulated) clock lets them, and
    # their spinning was counted as the session's instructions in some runs only (~10,000 a turn).
    env = {**os.environ, "PYTHONHASHSEED": "0", "OPENBLAS_NUM_THREADS": "1"}
    result = subprocess.run(command, capture_output=True, text=True, env=env, check=False)
    if result.returncode != 0:
        raise SystemExit(f"cachegrind run of {way!r} failed (exit {result.returncode}):\n{result.stderr[-2000:]}")
    found = {name: re.search(pattern, result.stderr) for name, pattern in SUMMARY.items()}
    missing = [name for name, match in found.items() if match is None]
    if missing:
        raise SystemExit(f"cachegrind printed no {', '.join(missing)} for {way!r}:\n{result.stderr[-2000:]}")
    collections = GC_LINE.search(result.stdout)
    if collections is None:
        raise SystemExit(f"the run of {way!r} printed no garbage collector counts:\n{result.stdout[-2000:]}")
    totals = {name: int(match.group(1).replace(",", "")) for name, match in found.items() if match is not None}
    return {**totals, "full GCs": int(collections.group(3))}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--turns", type=int, default=10240, help="turns of the shorter run (the longer plays twice as many)")
    parser.add_argument("--episodes", type=int, default=512, help="episodes in flight")
    parser.add_argument("--against", metavar="REV", help="also count the session code of this git revision")
    parser.add_argument("--d1", default="49152,12,64", help="simulated L1d: size,associativity,line (this machine's)")
    parser.add_argument("--ll", default="2097152,16,64", help="simulated last level: size,associativity,line (this machine's L2)")
    parser.add_argument("--play", help=argparse.SUPPRESS)  # inside valgrind: play one way
    args = parser.parse_args(argv)
    if args.turns < 1 or args.episodes < 1:
        parser.error("--turns and --episodes must be at least 1")
    if args.play:
        play(args.play, args.turns, args.episodes)
        return
    if shutil.which("valgrind") is None:
        raise SystemExit("valgrind is not installed: apt install valgrind (or your system's package of it)")
    if args.against and subprocess.run(["git", "rev-parse", "--verify", "--quiet", f"{args.against}^{{commit}}"],
                                       cwd=HERE, capture_output=True, check=False).returncode != 0:
        raise SystemExit(f"--against {args.against}: not a commit of this repository (git rev-parse found none)")
    ways = ["bare", "session"] + ([f"at:{args.against}"] if args.against else [])
    print(f"{ENV_ID}, {args.episodes} episodes in flight; per turn = (counts at {2 * args.turns} turns - at {args.turns}) / {args.turns}")
    per_turn: dict[str, dict[str, float]] = {}
    full_gcs: dict[str, int] = {}  # full collections in the extra turns of each way
    for way in ways:
        runs = []
        for turns in (args.turns, 2 * args.turns):
            start = time.monotonic()
            runs.append(counts(way, turns, args.episodes, args.d1, args.ll))
            print(f"  {way}: {turns} turns counted in {time.monotonic() - start:.0f} s", flush=True)
        per_turn[way] = {name: (runs[1][name] - runs[0][name]) / args.turns for name in SUMMARY}
        full_gcs[way] = runs[1]["full GCs"] - runs[0]["full GCs"]
    print(f"{'':14}" + "".join(f"{name:>14}" for name in SUMMARY) + f"{'full GCs':>14}")
    for way, values in per_turn.items():
        print(f"{way:14}" + "".join(f"{values[name]:14,.0f}" for name in SUMMARY) + f"{full_gcs[way]:14}")
    if len(set(full_gcs[way] for way in ways[1:])) > 1:
        print("the sessions' windows hold different numbers of full garbage collections (each ~1.2 M LL misses): their LL misses "
              "differ by those; run with another --turns to see whether the count is the code's or the window's")
    bare = per_turn["bare"]
    for way in ways[1:]:
        # Under one event a turn (the bare loop's LL misses: its envs fit in the last level) a ratio says nothing.
        ratios = "  ".join(f"{name} {per_turn[way][name] / bare[name]:.2f}x" if bare[name] >= 1 else f"{name} (bare: 0)" for name in SUMMARY)
        print(f"{way} / bare: {ratios}")
    if args.against:
        at = per_turn[f"at:{args.against}"]
        print(f"session / at {args.against}: " + "  ".join(f"{name} {per_turn['session'][name] / at[name]:.3f}" for name in SUMMARY if at[name] > 0))


if __name__ == "__main__":
    main()
