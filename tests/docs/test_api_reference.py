"""The docs site documents the whole public API: every name in every ``__all__`` of ``gem_core`` and
``gem_adapters`` is in the built site's inventory (``objects.inv``, what mkdocstrings rendered), and the env
catalogue lists every registered id.

Run by ``nox -s docs`` on the site it has just built (``GEM_DOCS_SITE``); run alone, it builds one.
A name mkdocstrings cannot find statically (e.g. one served by a module ``__getattr__``) is skipped by the
renderer without a warning; this test is what catches it.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
#: Source folder -> import name (setup.py's PACKAGE_ROOTS; ``gem/`` is upstream GEM's API, documented upstream).
PACKAGES = {"gem_core": "gem_core", "adapters": "gem_adapters"}


def public_names() -> dict[str, list[str]]:
    """Module import name -> its literal ``__all__``, for every public module of the documented packages."""
    found = {}
    for folder, name in PACKAGES.items():
        for path in (ROOT / folder).rglob("*.py"):
            parts = path.relative_to(ROOT / folder).with_suffix("").parts
            if "data" in parts or any(p.startswith("_") and p != "__init__" for p in parts):
                continue
            for node in ast.parse(path.read_text(encoding="utf-8")).body:
                targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(node, ast.AnnAssign) else []
                if any(isinstance(t, ast.Name) and t.id == "__all__" for t in targets):
                    module = ".".join([name, *(parts[:-1] if parts[-1] == "__init__" else parts)])
                    found[module] = list(ast.literal_eval(node.value))
    return found


def test_the_walk_finds_the_packages_public_modules():
    names = public_names()
    assert "make" in names["gem_core"] and "EpisodeSession" in names["gem_core.rollout"], sorted(names)[:5]
    assert any(module.startswith("gem_adapters.trl") for module in names)


def test_the_api_reference_lists_every_public_name(site):
    from mkdocstrings import Inventory

    with open(site / "objects.inv", "rb") as file:
        inventory = Inventory.parse_sphinx(file)
    missing = [f"{module}.{name}" for module, names in sorted(public_names().items()) for name in names
               if f"{module}.{name}" not in inventory]
    assert missing == [], f"public names the API reference does not document ({len(missing)}): {missing}"


def test_the_env_catalogue_lists_every_registered_id(site):
    import gem_core

    page = (site / "envs" / "catalogue" / "index.html").read_text(encoding="utf-8")
    missing = [env_id for env_id in gem_core.list_envs() if f"<code>{env_id}</code>" not in page]
    assert missing == []
