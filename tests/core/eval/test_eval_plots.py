"""gem_core/eval/plots.py: both PNGs are written for any report, including envs with no finished episode."""

from __future__ import annotations

import matplotlib.image
import numpy as np

from gem_core.eval.plots import DISTRIBUTION_PLOT, SUMMARY_PLOT, plot_report
from gem_core.eval.report import EpisodeRecord, EvalReport


def _report():
    rng = np.random.default_rng(0)
    episodes = {
        "game:A-v0": [
            EpisodeRecord(env_id="game:A-v0", seed=i, rewards=[0.0, float(w)], success=bool(w), terminated=bool(w))
            for i, w in enumerate(rng.integers(0, 2, size=12))
        ],
        "game:B-v0": [EpisodeRecord(env_id="game:B-v0", seed=i, rewards=[-0.1] * 3) for i in range(5)],
        "game:C-v0": [EpisodeRecord(env_id="game:C-v0", seed=0, error="EndpointError: HTTP 500")],
    }
    return EvalReport(model="m", backend="test", config={"episodes": 12}, env_ids=list(episodes), episodes=episodes)


def test_plots_are_valid_pngs_even_with_an_env_that_has_no_finished_episode(tmp_path):
    paths = plot_report(_report(), tmp_path)
    assert [p.name for p in paths] == [SUMMARY_PLOT, DISTRIBUTION_PLOT]
    for path in paths:
        image = matplotlib.image.imread(path)
        assert image.ndim == 3 and image.shape[0] > 200 and image.shape[1] > 300
        assert image[..., :3].std() > 0



def test_with_samples_the_summary_plot_gets_a_pass_at_k_panel(tmp_path):
    report = _report()
    plain = matplotlib.image.imread(plot_report(report, tmp_path / "plain")[0])
    report.config["samples"] = 3
    report.episodes["game:A-v0"] = [
        EpisodeRecord(env_id="game:A-v0", seed=i // 3, sample=i % 3, rewards=[float(i % 2)], success=bool(i % 2))
        for i in range(12)
    ]
    sampled = matplotlib.image.imread(plot_report(report, tmp_path / "sampled")[0])
    assert sampled.shape[1] > plain.shape[1] * 1.3  # a third panel
