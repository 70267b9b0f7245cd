"""``bench/report.py --quick``: the throughput table has every row, each a positive number, and the JSON
written where asked holds the same table with the machine named (no timing asserted: a smoke test)."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

REPORT = Path(__file__).resolve().parents[2] / "bench" / "report.py"

#: Every row the README's Performance table shows, by section.
EXPECTED = {
    "env steps/s": {"games: game:GuessTheNumber-v0", "games: game:Wordle-v0", "games: game:Minesweeper-v0-hard",
                    "math: math:Sample", "logic: logic:Sample", "code: code:Sample", "terminal: terminal:Tasks-v0",
                    "swe sample: swe:Sample-v0"},
    "episodes/s, scripted policy": {"EpisodeSession (32 in flight)", "vector sync (8 envs)", "vector thread (8 envs)",
                                    "vector async (8 envs)", "vector process (8 envs)"},
    "sandbox, print(1+1)": {"start p50", "start p99", "exec p50", "exec p99"},
    "grades/s": {"math (math-verify, grader worker)", "code (sandboxed tests)"},
    "step latency, game:GuessTheNumber-v0": {"in process p50", "in process p99", "gem serve (HTTP) p50", "gem serve (HTTP) p99"},
}


def test_the_quick_report_prints_and_writes_every_row_with_a_positive_number(tmp_path):
    out = tmp_path / "nested" / "report.json"
    done = subprocess.run([sys.executable, str(REPORT), "--quick", "--out", str(out)], capture_output=True, text=True,
                          timeout=600, cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    report = json.loads(out.read_text())
    found: dict[str, set[str]] = {}
    for row in report["rows"]:
        found.setdefault(row["section"], set()).add(row["name"])
        assert math.isfinite(row["value"]) and row["value"] > 0, row
        assert f"| {row['name']} |" in done.stdout  # the printed table has the row too
    assert found == EXPECTED
    assert report["machine"]["cores"] >= 1 and report["machine"]["cpu"] and report["date"] and report["quick"] is True


def test_the_readme_and_the_performance_guide_show_the_committed_report():
    """Issue 46: the README's Performance section shows the throughput table, with the machine and the date.
    Both copies must be the table rendered from ``bench/results/report.json``: a report measured again and
    committed without them (or a figure edited by hand) fails here."""
    sys.path.insert(0, str(REPORT.parent))
    try:
        from report import Row, render
    finally:
        sys.path.remove(str(REPORT.parent))
    root = REPORT.parents[1]
    report = json.loads((root / "bench" / "results" / "report.json").read_text())
    assert report["quick"] is False  # the published table is a full run, not the smoke test
    table = render([Row(**row) for row in report["rows"]], report)
    heading, rows = table.split("\n\n", 1)
    readme = (root / "README.md").read_text()
    assert rows in readme
    # The machine and the date, as report.py wrote them.
    assert heading in readme
    assert rows in (root / "docs" / "guides" / "performance.md").read_text()
