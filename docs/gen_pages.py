"""Pages written at build time (mkdocs-gen-files runs this): the API reference and the env catalogue.

Both come from the code, so they cannot drift from it: the reference has one page per package with a
``::: module`` block for every module that declares ``__all__`` (found by reading the source, no import),
and the catalogue lists the registry's specs (``import gem_core`` needs only gymnasium and numpy; no env is
built, so no env's own dependencies are needed).
"""

from __future__ import annotations

import ast
import shutil
from pathlib import Path

import mkdocs_gen_files

ROOT = Path(__file__).resolve().parent.parent
#: Source folder -> the import name it installs as (setup.py's PACKAGE_ROOTS; ``gem/`` is upstream GEM's API).
PACKAGE_ROOTS = {"gem_core": "gem_core", "adapters": "gem_adapters"}
#: Files the hand-written pages show that live outside docs/ (copied, so the site is whole on its own).
ASSETS = {"bench/learning/results/main_job_seed0.png": "assets/main_job_seed0.png"}


def public_names(path: Path) -> list[str] | None:
    """The literal ``__all__`` of a module's source, or None when it declares none."""
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets):
            return list(ast.literal_eval(node.value))
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.target.id == "__all__":
            return list(ast.literal_eval(node.value))
    return None


def documented_modules() -> dict[str, list[tuple[str, list[str]]]]:
    """Package name -> its modules with an ``__all__`` (the package's own ``__init__`` first), by import name."""
    packages: dict[str, list[tuple[str, list[str]]]] = {}
    for folder, name in PACKAGE_ROOTS.items():
        for path in sorted((ROOT / folder).rglob("*.py")):
            relative = path.relative_to(ROOT / folder)
            if "data" in relative.parts or any(part.startswith("_") and part != "__init__.py" for part in relative.parts):
                continue  # shipped sample data (a package used as a task), private modules
            names = public_names(path)
            if names is None:
                continue
            parts = [name, *relative.with_suffix("").parts]
            is_init = parts[-1] == "__init__"
            module = ".".join(parts[:-1] if is_init else parts)
            package = module if is_init else ".".join(parts[:-1])
            packages.setdefault(package, []).append((module, names))
    for modules in packages.values():
        modules.sort(key=lambda item: (item[0].count("."), item[0]))
    return packages


def write_reference() -> None:
    packages = documented_modules()
    summary = ["* [Overview](index.md)"]
    index = ["# API reference", "",
             "Generated from the docstrings: one page per package, every name in a module's `__all__`.", "",
             "| package | modules |", "|---|---|"]
    for package in sorted(packages):
        page = f"{package}.md"
        modules = packages[package]
        summary.append(f"* [{package}]({page})")
        index.append(f"| [`{package}`]({page}) | {', '.join(f'`{m}`' for m, _ in modules)} |")
        lines = [f"# `{package}`", ""]
        for module, names in modules:
            lines += [f"::: {module}", "    options:", f"      members: {names!r}", ""]
        with mkdocs_gen_files.open(f"reference/{page}", "w") as out:
            out.write("\n".join(lines))
    with mkdocs_gen_files.open("reference/index.md", "w") as out:
        out.write("\n".join(index) + "\n")
    with mkdocs_gen_files.open("reference/SUMMARY.md", "w") as out:
        out.write("\n".join(summary) + "\n")


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def write_catalogue() -> None:
    import gem_core
    from gem_core.cli.env_table import data_source
    from gem_core.registry import aliases

    lines = ["# Env catalogue", "",
             "Every id the registry holds, written from it when the site is built (`gem list` prints the same).",
             "*data*: shipped with the package, or downloaded from the hub on first use (a small sample ships "
             "for tests and demos); *extras*: `pip install -e \".[EXTRA]\"` before `make`; *max turns*: the "
             "spec's turn limit (`make(id, max_turns=N)` changes it).", ""]
    ids = gem_core.list_envs()
    families = sorted({env_id.split(":", 1)[0] for env_id in ids})
    lines += [f"{len(ids)} ids in {len(families)} families: " + ", ".join(f"[`{f}`](#{f})" for f in families) + ".", ""]
    for family in families:
        lines += [f"## {family}", "", "| id | data | extras | max turns | class |", "|---|---|---|---:|---|"]
        for env_id in (i for i in ids if i.split(":", 1)[0] == family):
            spec = gem_core.spec(env_id)
            entry = spec.entry_point if isinstance(spec.entry_point, str) else getattr(spec.entry_point, "__qualname__", "?")
            data = data_source(spec)
            data = "-" if data == "-" else data.replace("hub data: ", "hub: ")
            extras = ", ".join(spec.extras) or "-"
            turns = "-" if spec.max_turns is None else str(spec.max_turns)
            lines.append(f"| `{env_id}` | {_cell(data)} | {extras} | {turns} | `{_cell(entry.rsplit(':', 1)[-1])}` |")
        lines.append("")
    names = aliases()
    lines += ["## Aliases", "", "Upstream GEM's ids and other names that resolve to an id above (`gem list --aliases`).", "",
              "| alias | id |", "|---|---|"]
    lines += [f"| `{alias}` | `{target}` |" for alias, target in names.items()]
    with mkdocs_gen_files.open("envs/catalogue.md", "w") as out:
        out.write("\n".join(lines) + "\n")


def copy_assets() -> None:
    for source, target in ASSETS.items():
        with open(ROOT / source, "rb") as src, mkdocs_gen_files.open(target, "wb") as out:
            shutil.copyfileobj(src, out)


write_reference()
write_catalogue()
copy_assets()
