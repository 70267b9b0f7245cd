"""``import gem_core`` loads nothing, yet the package reads as if it had loaded everything.

The package is lazy so that a Ctrl-C during ``gem``'s first imports can be caught (see
tests/core/cli/test_ctrl_c_at_startup.py). Before it was lazy, ``import gem_core`` loaded its submodules, and
users (and GEM's own docstrings: ``except gem_core.registry.UnknownEnvError``) reach them as attributes of the
package; after it, ``gem_core.registry`` raised AttributeError unless something had imported it before, and
``dir(gem_core)`` listed nothing of the API. Each check runs in a fresh interpreter, where nothing has.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest


def _run(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize(("expression", "expected"), [
    ("gem_core.registry.UnknownEnvError.__name__", "UnknownEnvError"),
    ("gem_core.env.Env.__name__", "Env"),
    ("gem_core.errors.GemError.__name__", "GemError"),
    ("gem_core.make.__module__", "gem_core.registry"),
])
def test_a_submodule_or_api_name_is_reachable_after_a_bare_import(expression, expected):
    result = _run(f"""
        import gem_core
        print({expression})
    """)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == expected


def test_the_submodule_reached_is_the_one_in_sys_modules():
    result = _run("""
        import sys, gem_core
        assert gem_core.registry is sys.modules["gem_core.registry"]
        assert gem_core.registry is gem_core.registry
    """)
    assert result.returncode == 0, result.stderr


def test_dir_lists_the_api_and_the_submodules_without_loading_them():
    result = _run("""
        import sys, gem_core
        names = dir(gem_core)
        missing = [n for n in ("make", "Env", "make_vec", "registry", "env", "errors", "cli", "__version__") if n not in names]
        assert not missing, missing
        assert "numpy" not in sys.modules and "gem_core.registry" not in sys.modules, "dir() loaded modules"
    """)
    assert result.returncode == 0, result.stderr


def test_an_unknown_name_still_raises_attribute_error():
    result = _run("""
        import gem_core
        for name in ("no_such_thing", "_HOMES_typo"):
            try:
                getattr(gem_core, name)
            except AttributeError as error:
                assert str(error) == f"module 'gem_core' has no attribute {name!r}", str(error)
            else:
                raise SystemExit(f"{name} did not raise")
        assert not hasattr(gem_core, "no_such_thing")
    """)
    assert result.returncode == 0, result.stderr


def test_a_submodule_whose_own_import_fails_is_not_reported_as_missing():
    # Only "gem_core.<name> does not exist" becomes an AttributeError; a ModuleNotFoundError from inside an
    # existing submodule (a missing dependency) is its own error and must reach the user as such.
    result = _run("""
        import sys, gem_core
        sys.modules["numpy"] = None  # makes "import numpy" raise ModuleNotFoundError
        try:
            gem_core.env
        except ModuleNotFoundError as error:
            assert error.name == "numpy", error.name
        else:
            raise SystemExit("no error")
    """)
    assert result.returncode == 0, result.stderr


def test_a_bare_import_loads_no_numpy_or_gymnasium():
    result = _run("""
        import sys, gem_core
        loaded = [m for m in ("numpy", "gymnasium", "gem_core.env", "gem_core.registry") if m in sys.modules]
        assert not loaded, loaded
    """)
    assert result.returncode == 0, result.stderr
