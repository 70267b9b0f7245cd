"""Math grading through the scoring pool vs through the Python sandbox's pool, side by side.

Issue 13 asked whether math grading should reuse the sandbox's pool instead of running its own
(:mod:`gem_core.envs.scoring_pool`). Both give a hard time limit on an untrusted answer; they differ in
what a call costs. Cells, one grade at a time on a warm pool, each answer new (math-verify caches parses):

- ``scoring``: :class:`~gem_core.envs.math.grading.GraderPool`, a persistent worker with math-verify
  imported and warmed, reused call after call (killed and replaced only on a timeout);
- ``sandbox``: :class:`~gem_core.tools.sandbox.SandboxPool` in its default mode (bwrap with a zygote
  that preloads math-verify here), a fresh forked, isolated process per call, the grade as a
  :class:`~gem_core.tools.sandbox.FunctionCall` (the project's own code is not visible inside, so the
  snippet calls math-verify directly).

Prints ms per grade and the ratio to ``scoring``. ``python bench/grading_pools.py [--grades N]``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

from gem_core.envs.math.grading import GraderPool
from gem_core.tools.sandbox import FunctionCall, SandboxConfig, SandboxPool
from gem_core.tools.sandbox.isolation import resolve_mode

SNIPPET = """
from math_verify import parse, verify
def grade(prediction, gold):
    return bool(verify(parse("\\\\boxed{" + gold + "}"), parse("\\\\boxed{" + prediction + "}")))
"""


def pairs(n: int, offset: int) -> list[tuple[str, str]]:
    """``(prediction, gold)`` needing math-verify (not equal as text), a fresh number in each."""
    return [(f"\\frac{{{k}}}{{{k + 1}}}", f"{k}/({k}+1)") for k in range(offset, offset + n)]


def time_scoring(n: int) -> tuple[list[float], list[bool]]:
    pool = GraderPool(max_workers=1)
    try:
        pool.warm_up(1)
        times, verdicts = [], []
        for prediction, gold in pairs(n, 1000):
            start = time.perf_counter()
            verdicts.append(pool.grade(prediction, gold, timeout=10.0).correct)
            times.append(time.perf_counter() - start)
        return times, verdicts
    finally:
        pool.close()


def time_sandbox(n: int) -> tuple[list[float], list[bool], str]:
    mode = resolve_mode(None)
    pool = SandboxPool(mode, SandboxConfig(pool_size=2, preload=("math_verify",)))
    try:
        pool.run("pass", timeout=60.0)  # start-up and the preload, not billed to the grades
        times, verdicts = [], []
        for prediction, gold in pairs(n, 5000):
            start = time.perf_counter()
            result = pool.run(SNIPPET, timeout=10.0, memory_mb=2048, call=FunctionCall("grade", [prediction, gold]))
            times.append(time.perf_counter() - start)
            verdicts.append(result.returned is not None and json.loads(result.returned) is True)
        return times, verdicts, mode
    finally:
        pool.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--grades", type=int, default=40)
    args = parser.parse_args()
    scoring, scoring_ok = time_scoring(args.grades)
    sandbox, sandbox_ok, mode = time_sandbox(args.grades)
    base = statistics.median(scoring)
    print(f"{args.grades} grades each, one at a time; median and p90 ms per grade")
    print(f"{'pool':<20} {'median ms':>10} {'p90 ms':>8} {'vs scoring':>11} {'all correct':>12}")
    for name, times, ok in (("scoring", scoring, scoring_ok), (f"sandbox ({mode})", sandbox, sandbox_ok)):
        p90 = statistics.quantiles(times, n=10)[-1] * 1000
        print(f"{name:<20} {statistics.median(times) * 1000:>10.1f} {p90:>8.1f} {statistics.median(times) / base:>10.1f}x {all(ok)!s:>12}")


if __name__ == "__main__":
    main()
