"""gem_core/settings.py: the one module that reads environment variables, and the list of them."""

import re
from pathlib import Path

import pytest

from gem_core.settings import VARIABLES, environment_value

ROOT = Path(__file__).resolve().parents[2]
READS = re.compile(r"os\.environ\.get\(|os\.environ\[|os\.getenv\(|environ\.get\(")


def test_no_module_but_settings_reads_the_environment():
    """Library code takes arguments; a job-wide default comes from gem_core.settings, which lists them all."""
    readers = [
        str(path.relative_to(ROOT))
        for folder in ("gem_core", "adapters")
        for path in sorted((ROOT / folder).rglob("*.py"))
        if path.name != "settings.py" and READS.search(path.read_text(encoding="utf-8"))
    ]
    assert readers == []


def test_every_variable_read_is_listed_with_what_it_sets():
    named = {
        name
        for folder in ("gem_core", "adapters")
        for path in (ROOT / folder).rglob("*.py")
        for name in re.findall(r'environment_value\("([A-Z_]+)"\)', path.read_text(encoding="utf-8"))
    }
    assert named and named <= set(VARIABLES) and all(VARIABLES.values())


def test_a_variable_not_in_the_list_is_refused_and_an_empty_one_is_unset(monkeypatch):
    with pytest.raises(KeyError, match="VARIABLES"):
        environment_value("GEM_NOT_A_SETTING")
    monkeypatch.setenv("GEM_SEARCH_URL", "")
    assert environment_value("GEM_SEARCH_URL") is None
    monkeypatch.setenv("GEM_SEARCH_URL", "http://127.0.0.1:1/retrieve")
    assert environment_value("GEM_SEARCH_URL") == "http://127.0.0.1:1/retrieve"
