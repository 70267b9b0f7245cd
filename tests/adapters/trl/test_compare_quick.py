"""``bench/learning/compare.py --quick`` as CI runs it: the estimator comparison's whole path on one env,
one seed and three steps, in a subprocess as a user starts it; outputs that agree with each other, and a
re-run with the same seeds gives the same curves."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import numpy as np

COMPARE = Path(__file__).resolve().parents[3] / "bench" / "learning" / "compare.py"


def test_compare_quick_writes_a_table_a_plot_and_json_that_agree(tmp_path):
    out = tmp_path / "quick"
    done = subprocess.run([sys.executable, str(COMPARE), "--quick", "--out", str(out)],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]

    report = json.loads((out / "results.json").read_text())
    assert (out / "guess.png").stat().st_size > 10_000
    table = (out / "results.md").read_text()
    assert table in done.stdout  # what is written is what was printed

    runs = report["runs"]
    assert sorted(r["spec"]["estimator"] for r in runs) == ["grpo", "rebn", "reinforce"]
    assert all(r["spec"]["env"] == "guess" and r["spec"]["seed"] == 0 for r in runs)
    assert all(len(r["reward_per_step"]) == len(r["entropy_per_step"]) == report["config"]["steps"] == 3 for r in runs)
    # Each table row restates its run's curve: final = mean of the last 20% of steps, AUC = mean of all.
    for run in runs:
        curve = np.array(run["reward_per_step"])
        row = re.search(rf"^\| {run['spec']['estimator']} \| ([-\d.]+) ± [\d.]+ \| [^|]+ \| ([-\d.]+) ±", table, re.M)
        assert row, table
        assert float(row[1]) == round(curve[-max(1, len(curve) // 5):].mean(), 3)
        assert float(row[2]) == round(curve.mean(), 3)
        assert all(-1.0 <= r <= 1.0 for r in curve)  # a GuessTheNumber return: -0.1 per bad move, 1 for the win
    summary = report["summary"]["guess"]
    assert 0.4 < summary["random_return"] < 0.7 and summary["max_return"] == 1.0
    (session,) = report["sessions"]
    assert session["runs_trained"] == 3 and session["machine"]["cpus"] >= 1 and "load_1min_mean" in session["machine"]

    # Re-run from scratch elsewhere: the same seeds give the same curves (what the committed results rely on).
    again = subprocess.run([sys.executable, str(COMPARE), "--quick", "--out", str(tmp_path / "again")],
                           capture_output=True, text=True, timeout=300)
    assert again.returncode == 0, again.stderr[-3000:]
    rerun = json.loads((tmp_path / "again" / "results.json").read_text())["runs"]
    for first, second in zip(runs, rerun):
        assert first["spec"] == second["spec"]
        assert np.allclose(first["reward_per_step"], second["reward_per_step"], atol=1e-6)


def test_resume_reuses_a_run_saved_before_a_setting_existed_only_at_its_default(tmp_path):
    """``--resume`` must not retrain the committed runs because ``beta`` was added to the spec later,
    nor reuse them for a run that sets it."""
    from dataclasses import asdict

    from gem_core.testing import load_script

    compare = load_script(COMPARE, "compare_under_test")
    spec = compare.RunSpec("guess", "rebn", 0, 3, 0.9, 3e-3, 4, 2)
    saved = {k: v for k, v in asdict(spec).items() if k != "beta"}
    metrics = tmp_path / "metrics.json"
    metrics.write_text(json.dumps({"spec": saved, "steps": 3, "reward_per_step": [0.0, 0.1, 0.2]}))
    reused = compare.reusable(metrics, spec)
    assert reused is not None and reused["spec"] == asdict(spec)
    assert compare.reusable(metrics, compare.RunSpec("guess", "rebn", 0, 3, 0.9, 3e-3, 4, 2, beta=0.04)) is None


def test_resume_does_not_reuse_a_run_of_the_recipe_before_issue_29_for_todays_recipe(tmp_path):
    """Runs saved before the warm start and the 1000-token vocabulary ran without them: ``--resume`` reuses
    them only for a spec that asks for the old recipe (vocab 320, no warm start), never for today's."""
    from dataclasses import asdict

    from gem_core.testing import load_script

    compare = load_script(COMPARE, "compare_under_test")
    today = compare.RunSpec("guess", "rebn", 0, 3, 0.9, 3e-3, 4, 2)
    saved = {k: v for k, v in asdict(today).items() if k not in ("vocab_size", "warm_start_steps")}
    metrics = tmp_path / "metrics.json"
    metrics.write_text(json.dumps({"spec": saved, "steps": 3, "reward_per_step": [0.0, 0.1, 0.2]}))
    assert (today.vocab_size, today.warm_start_steps) == (1000, 15)
    assert compare.reusable(metrics, today) is None
    old_recipe = compare.RunSpec("guess", "rebn", 0, 3, 0.9, 3e-3, 4, 2, vocab_size=320, warm_start_steps=0)
    assert compare.reusable(metrics, old_recipe) is not None


def test_grpo8_trains_on_the_same_episodes_per_step_in_groups_of_8_and_a_split_that_does_not_divide_is_refused():
    import argparse

    import pytest

    from gem_core.testing import load_script

    compare = load_script(COMPARE, "compare_under_test")
    args = argparse.Namespace(num_generations=2, prompts_per_step=32)
    assert compare.batch_split(args, "rebn") == (2, 32)
    assert compare.batch_split(args, "grpo8") == (8, 8)  # 64 episodes either way
    with pytest.raises(SystemExit, match="multiple of 8"):
        compare.batch_split(argparse.Namespace(num_generations=3, prompts_per_step=5), "grpo8")


def test_the_confidence_interval_is_students_t_over_seeds():
    from gem_core.testing import load_script

    compare = load_script(COMPARE, "compare_under_test")
    values = [0.5, 0.7, 0.9, 0.6, 0.8]  # mean 0.7, sample std 0.1581
    assert abs(compare.ci95_half_width(values) - 2.776 * 0.15811388 / 5**0.5) < 1e-6
    assert compare.ci95_half_width([0.5]) is None
