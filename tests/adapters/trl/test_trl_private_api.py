"""adapters/trl/private_api.py lists every private name of the framework the adapter uses, and the installed
framework still has each, with the signature and body the adapter relies on."""

from __future__ import annotations

import pytest

from gem_adapters.trl.private_api import FRAMEWORK_MODULES, PRIVATE_API
from gem_adapters.private_api import private_api_problem, unlisted_private_names


def test_every_private_name_the_adapter_uses_is_listed():
    unlisted = unlisted_private_names("trl", FRAMEWORK_MODULES, PRIVATE_API)
    assert not unlisted, (
        "List each in adapters/trl/private_api.py (why, and the framework version it was checked against), "
        "or use a public API instead:\n" + "\n".join(unlisted)
    )


@pytest.mark.parametrize("entry", PRIVATE_API, ids=lambda entry: entry.name)
def test_the_installed_framework_still_has_each_listed_private_name(entry):
    pytest.importorskip(FRAMEWORK_MODULES[0])
    problem = private_api_problem(entry)
    assert problem is None, problem


def test_the_scan_finds_the_hooks_private_uses_when_none_are_listed():
    # Without the list the scan must name the overridden method and the patched function (a scan that
    # finds nothing would let the listing test pass vacuously).
    unlisted = "\n".join(unlisted_private_names("trl", FRAMEWORK_MODULES, ()))
    for name in ("_generate_and_score_completions", "trl.GRPOTrainer._logs", "trl.trainer.utils._use_triton"):
        assert name in unlisted


@pytest.mark.parametrize("change, expected", [
    ({"name": "trl.GRPOTrainer._generate_and_score_completions_v2"}, "it is gone"),
    ({"params": ("self", "inputs", "mode")}, "its parameters are now ('inputs',)"),
    ({"source_has": ('"gem_no_such_key"',)}, "its source no longer contains '\"gem_no_such_key\"'"),
])
def test_a_changed_private_name_fails_naming_it_the_version_checked_and_the_fix(change, expected):
    import dataclasses

    pytest.importorskip("trl")
    entry = dataclasses.replace(PRIVATE_API[0], **change)
    problem = private_api_problem(entry)
    assert problem is not None
    assert entry.name in problem and expected in problem
    assert "checked against trl 1.16.0" in problem and "installed 1.16.0" in problem
    assert "To fix: install trl==1.16.0, or port adapters/trl/credit.py" in problem
