"""``bench/learning/curriculum.py --quick``: the uniform-vs-adaptive bench's whole path (both curricula, one
seed, three tiny steps) in a subprocess as a user starts it, outputs that agree with each other, ``--resume``
that trains nothing twice, and the threshold rule on known curves."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np

from gem_core.testing import load_script

BENCH = Path(__file__).resolve().parents[3] / "bench" / "learning" / "curriculum.py"


def test_the_quick_bench_runs_both_curricula_on_one_budget_and_reports_each_task(tmp_path):
    out = tmp_path / "quick"
    done = subprocess.run([sys.executable, str(BENCH), "--quick", "--out", str(out)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads((out / "results.json").read_text())
    title, tables = (out / "results.md").read_text().split("\n\n", 1)
    assert title.startswith("# Uniform vs adaptive") and tables in done.stdout  # what is written is what was printed
    assert (out / "curriculum.png").stat().st_size > 10_000
    runs = report["runs"]
    assert [r["spec"]["curriculum"] for r in runs] == ["uniform", "adaptive"]
    budgets = {sum(sum(v or 0 for v in values) for k, values in r["task_metrics_by_key"].items() if k.endswith("/episodes")) for r in runs}
    assert budgets == {3 * 2 * 2}  # the same episode budget for every curriculum
    names = [task["name"] for task in runs[0]["tasks"]]
    assert len(names) == 3
    for curriculum in ("uniform", "adaptive"):
        cell = report["summary"]["curricula"][curriculum]
        assert set(cell["per_task"]) == set(names) and len(cell["zero_std_all"]) == 1
        assert 0.0 <= cell["zero_std_all"][0] <= 1.0
        for name in names:
            assert f"`{name}`" in done.stdout
    randoms = [report["summary"]["tasks"][name]["random_success"] for name in names]
    assert randoms[2] < randoms[1] < randoms[0]  # three tasks of different difficulty
    assert all((out / "runs" / r["spec"]["curriculum"] / "seed0" / "gem_task_sampler.json").exists() for r in runs)

    again = subprocess.run([sys.executable, str(BENCH), "--quick", "--out", str(out), "--resume"],
                           capture_output=True, text=True, timeout=300)
    assert again.returncode == 0, again.stderr[-3000:]
    assert json.loads((out / "results.json").read_text())["session"]["runs_trained"] == 0


def test_steps_to_threshold_needs_enough_episodes_of_the_task_in_the_window():
    bench = load_script(BENCH, "curriculum_bench")
    episodes = np.array([4, 0, 4, 4, 4, 4], dtype=float)
    successes = np.array([4, 0, 1, 3, 4, 4], dtype=float)
    # Step 1 is all successes but holds only 4 episodes; steps 4-5 (window 2) reach 7/8 with 8 episodes.
    assert bench.steps_to_threshold(episodes, successes, 0.8, window=2, min_episodes=8) == 5
    assert bench.steps_to_threshold(episodes, successes, 0.8, window=2, min_episodes=4) == 1
    assert bench.steps_to_threshold(episodes, successes, 1.01, window=2, min_episodes=1) is None
    rate = bench.trailing_rate(episodes, successes, window=2)
    assert rate[1] == 1.0 and np.isclose(rate[3], 4 / 8)
