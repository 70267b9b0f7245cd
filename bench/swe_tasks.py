"""What an SWE episode costs, per task: reset, one tool call and a full grade, p50 / p95 of ``--repeats`` runs.

- ``reset``: a fresh working directory holding the task's tree (read once per process, then copied);
- ``bash``: one shell command (``ls``) in a sandbox of its own: bubblewrap, the interpreter's ``PATH``;
- ``view``: one file's first 40 lines (host side, no sandbox);
- ``grade``: ``submit`` on the untouched tree: the pristine tree copied with the agent's library source
  over it, the task's tests run by pytest in a fresh sandbox process, outcomes read back.

Needs the pack built (``gem swe build``; ``--home`` as there). Prints one row per task and the machine's
load average (other jobs share its cores)::

    python bench/swe_tasks.py [--repeats 5] [--home DIR] [--tasks id,id]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time

from gem_core.envs.swe.swe_env import SweEnv


def _call(name: str, **arguments) -> str:
    return f"<tool_call>{json.dumps({'name': name, 'arguments': arguments})}</tool_call>"


def _percentiles(samples: list[float]) -> str:
    ordered = sorted(samples)
    p95 = ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]
    return f"{statistics.median(ordered) * 1000:7.0f} / {p95 * 1000:6.0f}"


def _timed(function) -> tuple[float, object]:
    start = time.perf_counter()
    value = function()
    return time.perf_counter() - start, value


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=5, help="episodes per task (p50/p95 over them)")
    parser.add_argument("--home", default=None, help="the pack home `gem swe build` used (default: $GEM_SWE_HOME or ~/.cache/gem/swe)")
    parser.add_argument("--tasks", default=None, help="comma-separated task ids (default: all)")
    args = parser.parse_args()
    env = SweEnv(home=args.home, tasks=args.tasks.split(",") if args.tasks else None)
    print(f"SWE tasks, ms p50 / p95 over {args.repeats} episodes each; load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores")
    print(f"{'task':36} {'tests':>5}  {'reset':>14}  {'bash (ls)':>14}  {'view':>14}  {'grade':>14}")
    for task in env.tasks:
        times: dict[str, list[float]] = {"reset": [], "bash": [], "view": [], "grade": []}
        for repeat in range(args.repeats):
            seconds, _ = _timed(lambda: env.reset(seed=repeat, options={"task": task.id}))
            times["reset"].append(seconds)
            seconds, _ = _timed(lambda: env.step(_call("bash", command="ls")))
            times["bash"].append(seconds)
            seconds, _ = _timed(lambda: env.step(_call("view", path=task.mutation.file, start=1, end=40)))
            times["view"].append(seconds)
            seconds, result = _timed(lambda: env.step(_call("submit")))
            assert result[1] == 0.0, f"{task.id}: the untouched tree scored {result[1]}"
            times["grade"].append(seconds)
        cells = "  ".join(f"{_percentiles(times[k]):>14}" for k in ("reset", "bash", "view", "grade"))
        print(f"{task.id:36} {len(task.tests):5d}  {cells}", flush=True)
    env.close()


if __name__ == "__main__":
    main()
