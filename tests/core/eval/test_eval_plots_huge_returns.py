"""Plots of a report whose returns are finite but near the largest float.

Since such a report saves with finite means (test_eval_report_overflow.py), it reaches the plots too: the
distribution's y limits were computed as ``high - low`` (inf for -1e308 and 1e308), so plot_report raised
``ValueError: Axis limits cannot be NaN or Inf`` (``write_outputs`` warned and the plots were lost), and for
1e308 and 1e308 the mean's 309-digit label collapsed the layout while numpy and matplotlib overflowed.
"""

from __future__ import annotations

import sys
import warnings

import matplotlib.image
import pytest

from gem_core.eval.plots import DISTRIBUTION_PLOT, SUMMARY_PLOT, plot_report
from gem_core.eval.report import EpisodeRecord, EvalReport

BIG = sys.float_info.max


def _report(returns):
    episodes = [EpisodeRecord(env_id="game:X-v0", seed=seed, rewards=[r], terminated=True) for seed, r in enumerate(returns)]
    return EvalReport(model="m", backend="b", config={"episodes": len(episodes)}, env_ids=["game:X-v0"], episodes={"game:X-v0": episodes})


@pytest.mark.parametrize(
    "returns",
    [[1e308, 1e308], [-1e308, 1e308], [1e308, -1e308, 0.0], [BIG, -BIG], [-1e308, -1e308, 5.0]],
    ids=["equal", "both-signs", "both-signs-and-zero", "largest-float", "negative"],
)
def test_plot_report_draws_both_figures_for_returns_near_the_largest_float(tmp_path, returns):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        paths = plot_report(_report(returns), tmp_path)
    assert [p.name for p in paths] == [SUMMARY_PLOT, DISTRIBUTION_PLOT]
    for path in paths:
        image = matplotlib.image.imread(path)
        assert image.ndim == 3 and image.shape[0] > 200 and image.shape[1] > 300
        assert image[..., :3].std() > 0
    # numpy's and matplotlib's "overflow encountered", and "constrained_layout not applied" (a label too long to lay out)
    assert not [str(w.message) for w in caught if issubclass(w.category, (RuntimeWarning, UserWarning))]
