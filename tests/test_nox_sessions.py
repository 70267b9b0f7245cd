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


def test_the_lint_session_type_checks_every_package_the_wheel_installs():
    """``nox -s lint`` runs mypy over ``[tool.mypy] packages``: a package setup.py installs but mypy is not
    given would pass the lint by never being read, and so would one mypy cannot find under its import name
    (``adapters/`` installs as ``gem_adapters``: the session links it under that name)."""
    import ast
    import tomllib

    setup = ast.parse((ROOT / "setup.py").read_text())
    roots = next(ast.literal_eval(node.value) for node in setup.body
                 if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "PACKAGE_ROOTS" for t in node.targets))
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["mypy"]
    assert sorted(config["packages"]) == sorted(roots.values())
    lint = re.search(r"def lint\(.*?(?=\n@nox\.session|\Z)", (ROOT / "noxfile.py").read_text(), re.S)
    assert lint is not None and '"mypy"' in lint.group(0), "the lint session no longer runs mypy"
    renamed = {folder: name for folder, name in roots.items() if folder != name}
    for folder, name in renamed.items():
        assert f'"{name}"' in lint.group(0) and f'"{folder}"' in lint.group(0), f"the lint session must link {folder}/ as {name}"
