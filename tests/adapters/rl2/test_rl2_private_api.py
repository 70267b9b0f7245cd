"""adapters/rl2/private_api.py lists every private name of the framework the adapter uses, and the installed
framework still has each, with the signature and body the adapter relies on."""

from __future__ import annotations

import pytest

from gem_adapters.rl2.private_api import FRAMEWORK_MODULES, PRIVATE_API
from gem_adapters.private_api import private_api_problem, unlisted_private_names


def test_every_private_name_the_adapter_uses_is_listed():
    unlisted = unlisted_private_names("rl2", FRAMEWORK_MODULES, PRIVATE_API)
    assert not unlisted, (
        "List each in adapters/rl2/private_api.py (why, and the framework version it was checked against), "
        "or use a public API instead:\n" + "\n".join(unlisted)
    )


@pytest.mark.parametrize("entry", PRIVATE_API, ids=lambda entry: entry.name)
def test_the_installed_framework_still_has_each_listed_private_name(entry):
    pytest.importorskip(FRAMEWORK_MODULES[0])
    problem = private_api_problem(entry)
    assert problem is None, problem
