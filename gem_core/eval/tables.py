"""Rich tables of evaluation reports: one report's summary, and two reports side by side (``--compare``)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from rich import box
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from gem_core.eval.report import CI_LEVEL, EnvSummary, EvalReport

__all__ = ["summary_table", "comparison_table", "print_comparison"]

# (column title, value of a summary, how to print it, higher is better?)
Metric = tuple[str, Callable[[EnvSummary], float | None], str, bool | None]
_METRICS: list[Metric] = [
    ("success", lambda s: s.success_rate, "{:.1%}", True),
    ("mean return", lambda s: s.mean_return, "{:.3f}", True),
    ("mean turns", lambda s: s.mean_turns, "{:.2f}", None),
    ("format errors", lambda s: s.format_error_rate, "{:.1%}", False),
    ("tokens", lambda s: s.total_tokens, "{:,}", None),
]


def _metrics(samples: int) -> list[Metric]:
    """The columns for a run with ``samples`` episodes per seed: pass@1 and pass@k, mean@k after success."""
    if samples <= 1:
        return _METRICS
    sampled: list[Metric] = [
        ("pass@1", lambda s: s.pass_at_k.get("1"), "{:.1%}", True),
        (f"pass@{samples}", lambda s: s.pass_at_k.get(str(samples)), "{:.1%}", True),
        (f"mean@{samples}", lambda s: s.mean_at_k, "{:.1%}", True),
    ]
    return [_METRICS[0], *sampled, *_METRICS[1:]]


def _cell(summary: EnvSummary | None, value: float | None, fmt: str, with_ci: bool) -> str:
    if summary is None:
        return "-"
    if value is None:
        return "n/a"
    text = fmt.format(value)
    if with_ci and summary.return_ci is not None:
        text += f" [{summary.return_ci[0]:.2f}, {summary.return_ci[1]:.2f}]"
    return text


def _delta(a: float | None, b: float | None, fmt: str, higher_is_better: bool | None) -> str:
    if a is None or b is None:
        return ""
    diff = b - a
    text = ("+" if diff > 0 else "") + fmt.format(diff)
    if higher_is_better is None or diff == 0:
        return text
    good = (diff > 0) == higher_is_better
    return f"[{'green' if good else 'red'}]{text}[/]"


def summary_table(report: EvalReport) -> Table:
    """One row per env with the numbers of its summary."""
    # Names are any text (a served model's name, an env id): escaped, so '[/v2]' is printed, not read as markup.
    title = escape(f"{report.model} ({report.backend})") + (" - INTERRUPTED, partial" if report.interrupted else "")
    table = Table(title=title, box=box.SIMPLE_HEAD)
    table.add_column("env", style="bold", no_wrap=True)
    table.add_column("ok/failed", justify="right", no_wrap=True)
    metrics = _metrics(report.samples)
    for title, _, _, _ in metrics:
        table.add_column(f"{title} [{CI_LEVEL:.0%} CI]" if title == "mean return" else title, justify="right", no_wrap=True)
    for env_id, s in report.summaries.items():
        failed = f"[red]{s.episodes_failed}[/]" if s.episodes_failed else "0"
        cells = [_cell(s, metric(s), fmt, title == "mean return") for title, metric, fmt, _ in metrics]
        table.add_row(escape(env_id), f"{s.episodes_completed}/{failed}", *cells)
    return table


def comparison_table(a: EvalReport, b: EvalReport, *, label_a: str = "A", label_b: str = "B") -> Table:
    """One section per env (those of ``a``, then the rest of ``b``), one row per metric: A, B and B - A."""
    table = Table(title=escape(f"{label_a}: {a.model} ({a.backend})   vs   {label_b}: {b.model} ({b.backend})"))
    table.add_column("env", style="bold", no_wrap=True)
    table.add_column("metric", no_wrap=True)
    table.add_column(escape(label_a), justify="right", no_wrap=True)
    table.add_column(escape(label_b), justify="right", no_wrap=True)
    table.add_column(escape(f"Δ ({label_b} - {label_a})"), justify="right", no_wrap=True)
    summaries_a, summaries_b = a.summaries, b.summaries
    metrics = _metrics(a.samples if a.samples == b.samples else 1)  # pass@k of different k do not compare
    for env_id in dict.fromkeys([*a.env_ids, *b.env_ids]):
        sa, sb = summaries_a.get(env_id), summaries_b.get(env_id)
        table.add_row(
            escape(env_id),
            "episodes",
            *(f"{s.episodes_completed} ok, {s.episodes_failed} failed" if s is not None else "-" for s in (sa, sb)),
            "",
        )
        for title, metric, fmt, better in metrics:
            va = metric(sa) if sa is not None else None
            vb = metric(sb) if sb is not None else None
            with_ci = title == "mean return"
            table.add_row("", title, _cell(sa, va, fmt, with_ci), _cell(sb, vb, fmt, with_ci), _delta(va, vb, fmt, better))
        table.add_section()
    return table


def print_comparison(path_a: str | Path, path_b: str | Path, *, console: Console | None = None) -> None:
    """Load two reports (``report.json`` files or ``--out`` directories) and print the comparison."""
    a, b = EvalReport.load(path_a), EvalReport.load(path_b)
    console = console or Console()
    console.print(comparison_table(a, b))
    console.print(f"A = {path_a}\nB = {path_b}", markup=False, highlight=False)
    for label, report in (("A", a), ("B", b)):
        if report.interrupted:
            console.print(f"[yellow]{label} is a partial report: its run was interrupted.[/]")
