"""gem_core/eval/plots.py: every title of the summary plot fits in the figure and overlaps no other (the pass@k
panel's title ran past the figure's edge), and the pass@k legend hides no bar; the figures are rendered and
measured, not eyeballed."""

from __future__ import annotations

import pytest
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from gem_core.eval.plots import plot_report
from gem_core.eval.report import EpisodeRecord, EvalReport


def _sampled_report(env_ids: list[str], samples: int = 4) -> EvalReport:
    episodes = {
        env_id: [EpisodeRecord(env_id=env_id, seed=i // samples, sample=i % samples, rewards=[float(i % 2)], success=bool(i % 2))
                 for i in range(3 * samples)]
        for env_id in env_ids
    }
    return EvalReport(model="Qwen/Qwen2.5-1.5B-Instruct", backend="openai", config={"episodes": 3, "samples": samples},
                      env_ids=env_ids, episodes=episodes)


def _overlap(a, b) -> bool:
    return a.x0 < b.x1 and b.x0 < a.x1 and a.y0 < b.y1 and b.y0 < a.y1


@pytest.mark.parametrize(
    ("env_ids", "samples"),
    [(["game:GuessTheNumber-v0"], 16), (["game:GuessTheNumber-v0"], 4), (["game:GuessTheNumber-v0", "game:Wordle-v0", "math:Sample"], 128)],
)
def test_every_title_of_the_summary_plot_fits_and_overlaps_no_other(env_ids, samples, monkeypatch, tmp_path):
    drawn = []
    original = Figure.savefig

    def savefig(self, *args, **kwargs):
        original(self, *args, **kwargs)
        canvas = FigureCanvasAgg(self)  # the figure drawn again as saved (same size, same layout)
        canvas.draw()
        drawn.append((self, canvas.get_renderer()))

    monkeypatch.setattr(Figure, "savefig", savefig)
    plot_report(_sampled_report(env_ids, samples), tmp_path)
    fig, renderer = drawn[0]  # the summary plot: success, return, pass@k
    assert len(fig.axes) == 3
    titles = [ax.title for ax in fig.axes]
    assert "pass@k" in titles[2].get_text() and str(samples) in titles[2].get_text()
    boxes = [title.get_window_extent(renderer) for title in titles]
    for title, box in zip(titles, boxes):
        assert box.x0 >= fig.bbox.x0 - 1 and box.x1 <= fig.bbox.x1 + 1, f"{title.get_text()!r} is cut off"
    for i in range(len(boxes) - 1):
        assert not _overlap(boxes[i], boxes[i + 1]), (titles[i].get_text(), titles[i + 1].get_text())
    legend = fig.axes[2].get_legend()
    legend_box = legend.get_window_extent(renderer)
    assert legend_box.x1 <= fig.bbox.x1 + 1, "the pass@k legend is cut off"
    for bar in fig.axes[2].patches:  # the legend hides no bar of the panel
        assert not _overlap(legend_box, bar.get_window_extent(renderer)), bar.get_label()
    suptitle = fig.get_suptitle() and fig._suptitle.get_window_extent(renderer)
    assert suptitle and not any(_overlap(suptitle, box) for box in boxes), "the figure's title covers a panel's"
