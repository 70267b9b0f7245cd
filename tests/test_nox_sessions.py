"""Every test file runs in some nox session: a test folder added beside the ones the noxfile names would
otherwise pass by never running (tests/rows and tests/gem did, once)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _session_paths() -> list[str]:
    """The test paths the noxfile hands to pytest (string literals starting with ``tests/``)."""
    return re.findall(r'"(tests/[^"]*)"', (ROOT / "noxfile.py").read_text())


def test_every_test_file_is_run_by_a_nox_session():
    paths = _session_paths()
    assert "tests/core" in paths and "tests/packaging" in paths, paths  # the parse finds the sessions' paths
    files = sorted(p.relative_to(ROOT).as_posix() for p in (ROOT / "tests").rglob("test_*.py"))
    orphans = [f for f in files if not any(f == p or f.startswith(p.rstrip("/") + "/") for p in paths)]
    assert orphans == [], f"test files no nox session runs (add their folder to a session in noxfile.py): {orphans}"
