"""examples/train_trl.py as a user reads it: `--help` states each default once, and the reward curve's legend
and title are drawn where they hide no data and are not cut off (the figure is rendered and measured)."""

from __future__ import annotations

import re
import subprocess
import sys

import numpy as np
import pytest
from matplotlib.figure import Figure
from test_learning import EXAMPLE, load_example


def test_help_states_each_default_once():
    done = subprocess.run([sys.executable, str(EXAMPLE), "--help"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    options = re.split(r"\n  (?=--)", done.stdout.split("options:", 1)[1])
    assert len(options) > 20
    for text in options:
        flat = " ".join(text.split())
        assert flat.lower().count("default") <= 1, flat


def _rendered(monkeypatch) -> list[tuple[Figure, object]]:
    """Figures as they are saved, with the renderer that drew them (so every artist's extent is known)."""
    saved = []
    original = Figure.savefig

    def savefig(self, *args, **kwargs):
        original(self, *args, **kwargs)
        saved.append((self, self.canvas.get_renderer()))

    monkeypatch.setattr(Figure, "savefig", savefig)
    return saved


def _inside(inner, outer, slack: float = 1.0) -> bool:
    return (inner.x0 >= outer.x0 - slack and inner.y0 >= outer.y0 - slack
            and inner.x1 <= outer.x1 + slack and inner.y1 <= outer.y1 + slack)


@pytest.mark.parametrize(
    "env", [{"game:GuessTheNumber-v0": 1.0, "game:GuessTheNumber-v0-hard": 2.0}, "rg:propositional_logic_long_name"]
)
def test_the_reward_curve_legend_hides_no_data_and_the_title_fits(env, monkeypatch, tmp_path):
    example = load_example()
    saved = _rendered(monkeypatch)
    # A noisy curve that visits the whole plot: any legend inside the axes would lie over some of its points.
    curve = np.where(np.arange(250) % 2 == 0, -1.0, 1.0) * np.linspace(0.2, 1.0, 250)
    metrics = {"random_move_reward": 0.0, "env": env, "curriculum": "adaptive", "turn_credit": "baseline", "minutes": 12.3}
    example.plot_reward_curve(curve, metrics, str(tmp_path / "curve.png"))
    ((fig, renderer),) = saved
    (ax,) = fig.axes
    legend = ax.get_legend() or fig.legends[0]
    box = legend.get_window_extent(renderer)
    for line in ax.get_lines():
        points = ax.transData.transform(np.column_stack(line.get_data()).astype(float))
        covered = (points[:, 0] > box.x0) & (points[:, 0] < box.x1) & (points[:, 1] > box.y0) & (points[:, 1] < box.y1)
        assert not covered.any(), f"the legend covers {covered.sum()} points of {line.get_label()!r}"
    for text in (ax.title, legend, ax.xaxis.label, ax.yaxis.label):
        assert _inside(text.get_window_extent(renderer), fig.bbox), f"{text} is cut off"
    assert ax.get_title() and "12.3 min" in ax.get_title()
