"""Finite episode returns whose sum overflows a float still make a report that saves.

Two returns of 1e308 are each a finite, logged episode, but their sum is inf: the mean return was inf (and
the bootstrap interval inf or NaN), so ``report.save`` (JSON without NaN or inf) raised after every episode
had run, and the run had no report.
"""

from __future__ import annotations

import math
import sys
import warnings

import numpy as np
import pytest

from gem_core.eval.report import EpisodeRecord, EvalReport, bootstrap_mean_ci, summarize_env

BIG = sys.float_info.max


def _report(returns):
    episodes = [EpisodeRecord(env_id="game:X-v0", seed=seed, rewards=[r], terminated=True) for seed, r in enumerate(returns)]
    return EvalReport(model="m", backend="b", config={"episodes": len(episodes)}, env_ids=["game:X-v0"], episodes={"game:X-v0": episodes})


@pytest.mark.parametrize(
    ("returns", "mean"),
    [
        ([1e308, 1e308], 1e308),
        ([1e308, 1.5e308], 1.25e308),
        ([-1e308, -1.5e308, -1.2e308], -1.2333333333333334e308),
        ([-1e308, 1e308, 1e308], 1e308 / 3),
        ([BIG, BIG, BIG], BIG),
        ([BIG, -BIG, BIG, 1.0], BIG / 4),
    ],
    ids=["equal", "unequal", "negative", "both-signs", "largest-float", "largest-float-mixed"],
)
def test_a_report_whose_returns_sum_past_the_largest_float_saves_with_finite_means(tmp_path, returns, mean):
    report = _report(returns)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        path = report.save(tmp_path / "report.json")
        summary = EvalReport.load(path).summary("game:X-v0")
    assert not [w for w in caught if issubclass(w.category, RuntimeWarning)]  # numpy's "overflow encountered"
    assert summary.mean_return == pytest.approx(mean, rel=1e-12)
    low, high = summary.return_ci
    assert all(math.isfinite(x) for x in (low, high))
    assert min(returns) <= low <= summary.mean_return <= high <= max(returns)


def test_returns_that_sum_safely_keep_exactly_the_numbers_they_had():
    """Only an overflowing sum takes the other way: other reports keep the bits numpy gave them."""
    rng = np.random.default_rng(3)
    returns = list(rng.normal(size=50) * 1e5)
    records = [EpisodeRecord(env_id="game:X-v0", seed=s, rewards=[r]) for s, r in enumerate(returns)]
    summary = summarize_env("game:X-v0", records, episodes_requested=50)
    assert summary.mean_return == float(np.mean(returns))
    data = np.asarray(returns)
    means = np.random.default_rng(0).choice(data, size=(2000, data.size), replace=True).mean(axis=1)
    assert bootstrap_mean_ci(returns) == tuple(float(q) for q in np.quantile(means, [(1 - 0.95) / 2, 1 - (1 - 0.95) / 2]))
