"""Math grading throughput: grades per second through make_vec's backends, side by side.

Every step of ``math:<local table>`` grades one answer with math-verify. Cells:

- backend ``sync`` / ``thread`` / ``process`` (``gem_core.vector``);
- grading ``worker``: the default, a time-limited grade in a persistent worker subprocess (safe against
  pathological answers), or ``inline``: ``grade_timeout=None``, math-verify in the env's own process
  (no time limit: for trusted answers only).

The golds are those of the labelled grading table of the tests (fractions, expressions, intervals,
units, ...); the answers are drawn from templates of the same kinds with a fresh number in each, so
math-verify's parse cache does not turn later cells into cache lookups (a policy rarely repeats itself). Rows: cells;
columns: grades/s and the ratio to ``sync + worker``. Run ``python bench/grading.py`` (about a minute
on 2 cores) or ``--quick``.

``--extraction`` instead times answer extraction on hostile responses (nested ``\\boxed{``, unclosed
tags, a megabyte) against the previous rescan-per-opener extractor, side by side.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

from gymnasium.vector import AutoresetMode

import gem_core.envs.math  # noqa: F401  (registers math:* even before gem_core.envs lists it)
from gem_core.vector import make_vec

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "core" / "envs"))
from math_grading_table import GRADING_TABLE, reference_extract_boxed  # noqa: E402

CELLS = [
    ("sync", "worker"),
    ("thread", "worker"),
    ("process", "worker"),
    ("sync", "inline"),
    ("thread", "inline"),
    ("process", "inline"),
]


def write_table(directory: Path) -> Path:
    """The grading table as a math dataset: the gold is the answer, the question is its row number."""
    path = directory / "grading_table.jsonl"
    rows = [{"problem": f"row {i}", "answer": gold} for i, (_, gold, _) in enumerate(GRADING_TABLE)]
    path.write_text("\n".join(json.dumps(row) for row in rows))
    return path


ANSWER_TEMPLATES = [
    "\\boxed{{{n}}}",
    "\\boxed{{\\frac{{{n}}}{{{m}}}}}",
    "\\boxed{{{n}.25}}",
    "\\boxed{{x^2+{n}x+{m}}}",
    "\\boxed{{({n}, {m}]}}",
    "\\boxed{{{n}\\sqrt{{{m}}}}}",
    "The answer is \\boxed{{{n}\\text{{ cm}}}}.",
    "\\boxed{{(-\\infty, {n}) \\cup ({m}, \\infty)}}",
    "\\boxed{{{n}^\\circ}}",
    "\\boxed{{x = {n}}}",
]


def answer(k: int) -> str:
    """The ``k``-th benchmark answer: every one distinct."""
    template = ANSWER_TEMPLATES[k % len(ANSWER_TEMPLATES)]
    return template.format(n=k // len(ANSWER_TEMPLATES) + 2, m=k % 7 + 3)


def grades_per_second(backend: str, grading: str, data_file: Path, num_envs: int, seconds: float, offset: int) -> float:
    timeout = 10.0 if grading == "worker" else None
    vec = make_vec(
        "math:Sample",
        num_envs=num_envs,
        backend=backend,
        autoreset_mode=AutoresetMode.SAME_STEP,
        data_files=str(data_file),
        grade_timeout=timeout,
    )
    try:
        vec.reset(seed=0)
        step = 0

        def actions() -> list[str]:
            return [answer(offset + step * num_envs + i) for i in range(num_envs)]

        vec.step(actions())  # warm-up: grader workers start, math-verify imports
        step, grades, start = 1, 0, time.perf_counter()
        while time.perf_counter() - start < seconds:
            vec.step(actions())
            grades += num_envs
            step += 1
        return grades / (time.perf_counter() - start)
    finally:
        vec.close()


def extraction_table() -> None:
    from gem_core.envs.math.answer import extract_boxed

    cases = {
        "nested \\boxed{ x1000": "\\boxed{" * 1000,
        "nested \\boxed{ x3000": "\\boxed{" * 3000,
        "1 MB, one box at the end": "x" * 1_000_000 + "\\boxed{42}",
        "\\boxed{1} x 50,000": "\\boxed{1}" * 50_000,
    }
    print(f"{'response':<26} {'rescanning s':>13} {'one pass s':>11} {'speed-up':>9}")
    for name, text in cases.items():
        timings = []
        for extract in (reference_extract_boxed, extract_boxed):
            start = time.perf_counter()
            extract(text)
            timings.append(time.perf_counter() - start)
        print(f"{name:<26} {timings[0]:>13.4f} {timings[1]:>11.4f} {timings[0] / timings[1]:>8.1f}x")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--num-envs", type=int, default=4)
    parser.add_argument("--seconds", type=float, default=8.0, help="timed budget per cell")
    parser.add_argument("--quick", action="store_true", help="3 s per cell")
    parser.add_argument("--extraction", action="store_true", help="time answer extraction on hostile responses instead")
    args = parser.parse_args()
    if args.extraction:
        extraction_table()
        return
    seconds = 3.0 if args.quick else args.seconds
    with tempfile.TemporaryDirectory() as tmp:
        data_file = write_table(Path(tmp))
        results = {
            cell: grades_per_second(*cell, data_file, args.num_envs, seconds, offset=1_000_000 * i)
            for i, cell in enumerate(CELLS)
        }
    base = results[("sync", "worker")]
    print(f"math grading, {args.num_envs} envs, {len(GRADING_TABLE)}-answer mix, {seconds:g} s per cell")
    print(f"{'backend':<9} {'grading':<8} {'grades/s':>9} {'vs sync+worker':>15}")
    for (backend, grading), rate in results.items():
        print(f"{backend:<9} {grading:<8} {rate:>9.1f} {rate / base:>14.2f}x")


if __name__ == "__main__":
    main()
