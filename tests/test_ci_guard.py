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


def _needs_outcome(monkeypatch, ci: str | None, available: bool) -> str:
    from ci_guard import needs

    if ci is None:
        monkeypatch.delenv("CI", raising=False)
    else:
        monkeypatch.setenv("CI", ci)
    ran = []
    test = needs(available, "no bubblewrap")(lambda: ran.append(True))
    try:
        test()
    except pytest.skip.Exception:
        return "skipped"
    except pytest.fail.Exception:
        return "failed"
    return "ran" if ran else "nothing"


def test_needs_runs_where_available_skips_elsewhere_and_fails_in_ci(monkeypatch):
    assert _needs_outcome(monkeypatch, None, True) == "ran"
    assert _needs_outcome(monkeypatch, "true", True) == "ran"
    assert _needs_outcome(monkeypatch, None, False) == "skipped"
    assert _needs_outcome(monkeypatch, "true", False) == "failed"


def test_no_test_skips_for_a_missing_sandbox_by_hand():
    """A missing bubblewrap or sandbox goes through ci_guard (needs / skip_unless_ci), never a plain skip."""
    pattern = re.compile(r"(skipif\(|pytest\.skip\()[^\n]*(bubblewrap|bwrap|sandbox)", re.IGNORECASE)
    found = [str(path.relative_to(TESTS)) for path, text in _test_sources() if pattern.search(text)]
    assert found == []
