"""tests/ci_guard.py: a missing capability skips a test on a developer's machine and fails it in CI; the
suite writes that rule once, and never turns an import error of the project's own modules into a skip."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from ci_guard import skip_unless_ci

TESTS = Path(__file__).resolve().parent


def test_outside_ci_a_missing_capability_skips(monkeypatch):
    monkeypatch.delenv("CI", raising=False)
    with pytest.raises(pytest.skip.Exception, match="no bubblewrap"):
        skip_unless_ci("no bubblewrap")


@pytest.mark.parametrize("value", ["true", "1", "YES"])
def test_in_ci_a_missing_capability_fails(monkeypatch, value):
    monkeypatch.setenv("CI", value)
    with pytest.raises(pytest.fail.Exception, match="no bubblewrap"):
        skip_unless_ci("no bubblewrap")


def _test_sources():
    return [(path, path.read_text(encoding="utf-8")) for path in TESTS.rglob("*.py") if path.name not in ("ci_guard.py", "test_ci_guard.py")]


def test_the_ci_rule_is_written_once():
    by_hand = [str(path.relative_to(TESTS)) for path, text in _test_sources() if re.search(r"environ\.get\(\s*[\"']CI[\"']", text)]
    assert by_hand == []


def test_no_test_skips_on_an_import_error_of_the_project():
    found = [str(path.relative_to(TESTS)) for path, text in _test_sources() if re.search(r"importorskip\(\s*[\"']gem_(core|adapters)\b", text)]
    assert found == []
