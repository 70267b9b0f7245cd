"""PNG plots of an :class:`~gem_core.eval.report.EvalReport`.

Figures are built with matplotlib's object API and rendered by the Agg canvas, never through
``pyplot``: no display is needed and the caller's pyplot backend and state are left alone.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from gem_core.eval.report import CI_LEVEL, EvalReport

__all__ = ["plot_report", "SUMMARY_PLOT", "DISTRIBUTION_PLOT"]

SUMMARY_PLOT = "success_and_return.png"
"""The file name of the success-rate and mean-return plot :func:`plot_report` writes."""
DISTRIBUTION_PLOT = "return_distribution.png"
"""The file name of the per-env return histogram :func:`plot_report` writes."""


def plot_report(report: EvalReport, out_dir: str | Path) -> list[Path]:
    """Write the summary plot (success rate and mean return per env; with ``samples`` > 1, pass@k and mean@k
    too) and the return distribution."""
    from matplotlib.figure import Figure  # Figure.savefig renders with Agg for .png

    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    summaries = report.summaries
    env_ids = list(report.env_ids)
    positions = np.arange(len(env_ids))
    width = max(6.0, 1.6 * len(env_ids) + 2.5)
    title = f"{report.model} ({report.backend})" + (" - interrupted" if report.interrupted else "")

    sampled = report.samples > 1
    fig = Figure(figsize=((3 if sampled else 2) * width, 4.5), layout="constrained")
    axes = fig.subplots(1, 3 if sampled else 2)
    ax_success, ax_return = axes[0], axes[1]
    success = [summaries[e].success_rate for e in env_ids]
    bars = ax_success.bar(positions, [s if s is not None else 0.0 for s in success], width=0.6, color="tab:green")
    for bar, value, env_id in zip(bars, success, env_ids, strict=True):
        n = summaries[env_id].episodes_completed
        label = f"{value:.0%}\nn={n}" if value is not None else "n/a"
        ax_success.annotate(label, (bar.get_x() + bar.get_width() / 2, bar.get_height()), ha="center", va="bottom", fontsize=8)
    ax_success.set_ylim(0, 1.15)
    ax_success.set_ylabel("success rate")
    ax_success.set_title("Success rate per env")

    means = [summaries[e].mean_return for e in env_ids]
    cis = [summaries[e].return_ci for e in env_ids]
    scale, unit = _return_scale([*(m for m in means if m is not None), *(x for ci in cis if ci is not None for x in ci)])
    labels = [_format_return(m) if m is not None else "n/a" for m in means]
    means = [m / scale if m is not None else None for m in means]
    cis = [(ci[0] / scale, ci[1] / scale) if ci is not None else None for ci in cis]
    heights = np.array([m if m is not None else 0.0 for m in means])
    # Clipped at 0: a constant sample's mean can differ from its CI bounds by a rounding error.
    lower = np.array([max(m - ci[0], 0.0) if ci is not None and m is not None else 0.0 for m, ci in zip(means, cis, strict=True)])
    upper = np.array([max(ci[1] - m, 0.0) if ci is not None and m is not None else 0.0 for m, ci in zip(means, cis, strict=True)])
    return_bars = ax_return.bar(positions, heights, yerr=np.vstack([lower, upper]), width=0.6, capsize=6, color="tab:blue")
    for bar, label, high in zip(return_bars, labels, heights + upper, strict=True):
        ax_return.annotate(label, (bar.get_x() + bar.get_width() / 2, max(high, 0.0)), ha="center", va="bottom", fontsize=8)
    ax_return.axhline(0.0, color="black", linewidth=0.8)
    ax_return.set_ylim(*_padded_limits([*(heights - lower), *(heights + upper)]))
    ax_return.set_ylabel("mean return" + unit)
    ax_return.set_title(f"Mean return per env ({CI_LEVEL:.0%} bootstrap CI)")
    if sampled:
        _plot_pass_at_k(axes[2], report, env_ids, positions)
    for ax in axes:
        ax.set_xticks(positions, env_ids, rotation=15, ha="right")
    fig.suptitle(title)
    summary_path = out_dir / SUMMARY_PLOT
    fig.savefig(summary_path, dpi=100)

    fig = Figure(figsize=(width, 4.5), layout="constrained")
    ax = fig.subplots()
    returns = [[r.episode_return for r in report.episodes.get(e, []) if not r.failed] for e in env_ids]
    scale, unit = _return_scale([v for values in returns for v in values])
    returns = [[v / scale for v in values] for values in returns]
    filled = [i for i, values in enumerate(returns) if values]
    if filled:
        ax.boxplot([returns[i] for i in filled], positions=positions[filled], widths=0.5, showmeans=True, showfliers=False)
        jitter = np.random.default_rng(0)  # fixed: the same report gives the same picture
        for i in filled:
            xs = positions[i] + jitter.uniform(-0.12, 0.12, size=len(returns[i]))
            ax.scatter(xs, returns[i], s=14, alpha=0.6, color="tab:blue", zorder=3)
        ax.set_ylim(*_padded_limits([v for i in filled for v in returns[i]]))
    for i, values in enumerate(returns):
        if not values:
            ax.annotate("no finished\nepisodes", (positions[i], 0.0), ha="center", va="bottom", fontsize=8)
    ax.set_xticks(positions, env_ids, rotation=15, ha="right")
    ax.set_xlim(-0.7, len(env_ids) - 0.3)
    ax.axhline(0.0, color="black", linewidth=0.8, alpha=0.4)
    ax.set_ylabel("episode return" + unit)
    ax.set_title("Episode returns per env")
    ax.set_xlabel("box: quartiles, line: median, triangle: mean, dots: episodes", fontsize=8)
    fig.suptitle(title)
    distribution_path = out_dir / DISTRIBUTION_PLOT
    fig.savefig(distribution_path, dpi=100)
    return [summary_path, distribution_path]


def _plot_pass_at_k(ax, report: EvalReport, env_ids: list[str], positions: np.ndarray) -> None:
    """Grouped bars per env: pass@1, pass@2, ..., pass@k, and mean@k hatched."""
    summaries = report.summaries
    ks = list(summaries[env_ids[0]].pass_at_k) if env_ids else []
    series = [(f"pass@{k}", [summaries[e].pass_at_k.get(k) for e in env_ids]) for k in ks]
    series.append((f"mean@{report.samples}", [summaries[e].mean_at_k for e in env_ids]))
    width = 0.8 / len(series)
    for i, (label, values) in enumerate(series):
        offsets = positions - 0.4 + width * (i + 0.5)
        heights = [v if v is not None else 0.0 for v in values]
        ax.bar(offsets, heights, width=width, label=label, hatch="//" if label.startswith("mean") else None)
    ax.set_ylim(0, 1.15)
    ax.set_ylabel("rate")
    # Two lines: on one, the title ran past the figure's right edge (the panel is as wide as the others).
    ax.set_title(f"pass@k (unbiased estimator) and mean@k\n{report.samples} samples per seed")
    # Beside the panel, not on it: inside, the legend lay over the bars that reach 1.
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0.0)


def _padded_limits(values: list[float]) -> tuple[float, float]:
    """y limits that show 0 and every value with a margin, even when all values are equal."""
    low, high = min([0.0, *values]), max([0.0, *values])
    margin = max(0.1 * (high - low), 0.1)
    return low - margin, high + 1.5 * margin


#: Returns up to this size are plotted as they are. The plots' arithmetic (a range ``high - low``, its margins, tick
#: steps up to 100 times the range's power of ten, the box plot's mean of the returns) stays finite up to it, but
#: not near the largest float (1.8e308): -1e308 and 1e308 span an infinite range, and the axis limits were refused.
_LARGEST_PLAIN_RETURN = 1e300


def _return_scale(values: list[float]) -> tuple[float, str]:
    """The power of ten the returns are plotted in units of, and the axis label's note of it.

    1 (no note) for returns matplotlib and numpy handle as they are; past :data:`_LARGEST_PLAIN_RETURN`, the power
    of ten of the largest, so every plotted value is at most 10 in size and no sum or difference can overflow.
    """
    largest = max((abs(v) for v in values if math.isfinite(v)), default=0.0)
    if largest <= _LARGEST_PLAIN_RETURN:
        return 1.0, ""
    exponent = math.floor(math.log10(largest))
    return 10.0**exponent, f" ($\\times 10^{{{exponent}}}$)"


def _format_return(value: float) -> str:
    """Two decimals, or three significant digits for a large return (1e308 with two decimals is 312 characters,
    a label that collapsed the figure's layout)."""
    return f"{value:.2f}" if abs(value) < 1e6 else f"{value:.3g}"
