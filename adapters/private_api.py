"""Where an adapter reaches into its framework's private API, and a check that the installed framework still has it.

A framework may rename or reshape a private method in any release without notice, and a hook that
overrides or patches one then fails mid-training, or worse, silently trains another way. So each
adapter lists every private name it uses in ``gem_adapters.<fw>.private_api.PRIVATE_API`` (one
:class:`PrivateName` each: the dotted name, why, and the version it was checked against), and its
tests call :func:`private_api_problem` on each: a missing name, a changed signature or a changed body
fails with a message naming the name, the version checked and what to do.
"""

from __future__ import annotations

import ast
import importlib
import inspect
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any

__all__ = ["PrivateName", "private_api_problem", "private_names_used", "resolve", "unlisted_private_names"]


@dataclass(frozen=True)
class PrivateName:
    """One private name of a framework an adapter uses.

    Args:
        name: dotted path, module then attributes: ``"trl.GRPOTrainer._generate_and_score_completions"``.
        used_in: the adapter file that uses it (``"adapters/trl/credit.py"``).
        use: how the adapter uses it: ``"overrides"``, ``"calls"``, ``"patches"`` or ``"relies on"`` (its
            behaviour, described in ``why``, without calling it).
        why: what the adapter does with it and what breaks if it changes.
        distribution: the framework's name on PyPI (whose installed version the message reports).
        checked: the framework version the entry was last checked against.
        params: the parameter names the adapter relies on, in order (a prefix of the signature); None: not checked.
        source_has: texts the name's source must contain (the keys it returns, a call it makes): a body that
            no longer does so has changed what the adapter relies on.
        set_in: for an instance attribute (``GRPOTrainer._logs``), the method whose source assigns it.
    """

    name: str
    used_in: str
    use: str
    why: str
    distribution: str
    checked: str
    params: tuple[str, ...] | None = None
    source_has: tuple[str, ...] = ()
    set_in: str | None = None


def resolve(name: str) -> Any:
    """The object a dotted ``name`` names: the longest importable module prefix, then attributes.

    Raises:
        ImportError: no prefix of ``name`` is an importable module.
        AttributeError: the module lacks one of the attributes.
    """
    parts = name.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            target = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            if cut == 1:
                raise
            continue
        for attribute in parts[cut:]:
            target = getattr(target, attribute)
        return target
    raise ImportError(name)  # pragma: no cover  (the loop returns or raises)


def _installed(distribution: str) -> str:
    try:
        return metadata.version(distribution)
    except metadata.PackageNotFoundError:
        return "not installed"


def _source(target: Any) -> str:
    try:
        return inspect.getsource(target)
    except (OSError, TypeError):
        return ""


def _parameters(names: Iterable[str]) -> tuple[str, ...]:
    """Parameter names as compared: without ``self`` (a Ray actor's method shows none) and Ray's tracing ones."""
    return tuple(name for name in names if name != "self" and not name.startswith("_ray_"))


def _what_changed(entry: PrivateName) -> str | None:
    """Why ``entry`` no longer matches the installed framework, or None when it still does."""
    attribute = entry.name.rpartition(".")[2]
    if entry.set_in is not None:  # an instance attribute: the method that sets it must still set it
        try:
            setter = resolve(entry.set_in)
        except (ImportError, AttributeError) as exc:
            return f"{entry.set_in}, which sets it, is gone ({type(exc).__name__}: {exc})"
        if f"self.{attribute}" not in _source(setter):
            return f"{entry.set_in} no longer sets self.{attribute}"
        target = setter
    else:
        try:
            target = resolve(entry.name)
        except (ImportError, AttributeError) as exc:
            return f"it is gone ({type(exc).__name__}: {exc})"
    if entry.params is not None:
        try:
            found = _parameters(inspect.signature(inspect.unwrap(target)).parameters)
        except (TypeError, ValueError):
            return "its signature cannot be read"
        expected = _parameters(entry.params)
        if found[: len(expected)] != expected:
            return f"its parameters are now {found}, the adapter relies on {expected}"
    missing = [text for text in entry.source_has if text not in _source(target)]
    if missing:
        return f"its source no longer contains {', '.join(repr(t) for t in missing)}"
    return None


def private_api_problem(entry: PrivateName) -> str | None:
    """A message saying how the installed framework broke ``entry`` and what to do; None when it did not."""
    change = _what_changed(entry)
    if change is None:
        return None
    return (
        f"{entry.name} ({entry.used_in} {entry.use} it; checked against {entry.distribution} {entry.checked}, installed "
        f"{_installed(entry.distribution)}): {change}. The adapter needs it because {entry.why} To fix: install "
        f"{entry.distribution}=={entry.checked}, or port {entry.used_in} to the new version and update this entry's "
        f"checked version in its PRIVATE_API."
    )


def _aliases(tree: ast.AST, frameworks: frozenset[str]) -> tuple[dict[str, str], set[str]]:
    """Names bound to the framework's modules or objects (name -> dotted origin), and names bound to other imports."""
    framework: dict[str, str] = {}
    other: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                bound = alias.asname or alias.name.split(".")[0]
                origin = alias.name if alias.asname else alias.name.split(".")[0]
                (framework.__setitem__(bound, origin) if alias.name.split(".")[0] in frameworks else other.add(bound))
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for alias in node.names:
                bound = alias.asname or alias.name
                if node.module.split(".")[0] in frameworks:
                    framework[bound] = f"{node.module}.{alias.name}"
                else:
                    other.add(bound)
    return framework, other


def _is_private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def _defined_names(trees: list[ast.AST], frameworks: frozenset[str]) -> set[str]:
    """Private names the project itself defines: functions, class attributes, attributes it assigns (except on the framework's modules)."""
    names: set[str] = set()
    for tree in trees:
        framework, _ = _aliases(tree, frameworks)
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                names.add(node.name)
            elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                names.add(node.id)
            elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
                if not (isinstance(node.value, ast.Name) and node.value.id in framework):
                    names.add(node.attr)
            elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "setattr" and len(node.args) >= 2:
                target, attribute = node.args[0], node.args[1]
                if isinstance(attribute, ast.Constant) and not (isinstance(target, ast.Name) and target.id in framework):
                    names.add(str(attribute.value))
    return {name for name in names if _is_private(name)}


def private_names_used(paths: Sequence[Path], frameworks: Sequence[str], project: Sequence[Path] = ()) -> list[tuple[str, int, str]]:
    """``(path, line, name)`` of each private attribute of the framework the adapter files ``paths`` touch.

    A use is an attribute (or ``getattr``/``setattr``/``hasattr`` of a string) starting with one underscore on
    the framework's imported modules and classes; on ``self`` or ``super()`` in a subclass of a framework
    class, unless the subclass defines it; or on any other object when neither the adapter nor the files in
    ``project`` (the core) define that name. An import of ``_name`` from the
    framework counts too. A heuristic for the tests: it finds the uses a hook makes, not every dynamic one.
    """
    frozen = frozenset(frameworks)
    trees = {path: ast.parse(path.read_text(encoding="utf-8")) for path in paths}
    ours = _defined_names([*trees.values(), *(ast.parse(p.read_text(encoding="utf-8")) for p in project)], frozen)
    found: list[tuple[str, int, str]] = []
    for path, tree in trees.items():
        framework, other = _aliases(tree, frozen)
        for node in ast.walk(tree):
            owner, attribute = None, None
            if isinstance(node, ast.Attribute) and _is_private(node.attr):
                owner, attribute = node.value, node.attr
            elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("getattr", "setattr", "hasattr")
                  and len(node.args) >= 2 and isinstance(node.args[1], ast.Constant) and isinstance(node.args[1].value, str)
                  and _is_private(node.args[1].value)):
                owner, attribute = node.args[0], node.args[1].value
            elif isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] in frozen:
                found.extend((str(path), node.lineno, f"{node.module}.{a.name}") for a in node.names if _is_private(a.name))
                continue
            if attribute is None or not isinstance(node, (ast.Attribute, ast.Call)):  # only those two set it
                continue
            if isinstance(owner, ast.Name) and owner.id in framework:
                found.append((str(path), node.lineno, f"{framework[owner.id]}.{attribute}"))
            elif isinstance(owner, ast.Call) and isinstance(owner.func, ast.Name) and owner.func.id == "super":
                continue  # a base's private method: the framework's only if the base is (see _inherited_uses)
            elif attribute not in ours and not (isinstance(owner, ast.Name) and owner.id in other):
                found.append((str(path), node.lineno, attribute))
        found.extend(_inherited_uses(path, tree, framework))
    return sorted(set(found))


def _inherited_uses(path: Path, tree: ast.AST, framework: dict[str, str]) -> list[tuple[str, int, str]]:
    """``self._x`` in a subclass of a framework class that the subclass itself does not define: the base's private ``_x``."""
    found = []
    for cls in (node for node in ast.walk(tree) if isinstance(node, ast.ClassDef)):
        bases = [framework[b.id] for b in cls.bases if isinstance(b, ast.Name) and b.id in framework]
        if not bases:
            continue
        own = {n.name for n in ast.walk(cls) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}
        own |= {n.attr for n in ast.walk(cls) if isinstance(n, ast.Attribute) and isinstance(n.ctx, ast.Store)}
        for node in ast.walk(cls):
            if not (isinstance(node, ast.Attribute) and _is_private(node.attr)):
                continue
            on_super = isinstance(node.value, ast.Call) and isinstance(node.value.func, ast.Name) and node.value.func.id == "super"
            on_self = isinstance(node.value, ast.Name) and node.value.id == "self" and node.attr not in own
            if on_super or on_self:
                found.append((str(path), node.lineno, f"{bases[0]}.{node.attr}"))
    return found


def unlisted_private_names(adapter: str, frameworks: Sequence[str], listed: Sequence[PrivateName]) -> list[str]:
    """Each private name of ``frameworks`` that ``adapters/<adapter>/`` uses but ``listed`` does not name, as
    ``"path:line: name"`` (an entry names it when its dotted name ends with it)."""
    root = Path(__file__).resolve().parent
    paths = sorted((root / adapter).rglob("*.py"))
    project = [p for p in [*root.rglob("*.py"), *(root.parent / "gem_core").rglob("*.py")] if p not in paths]
    names = {entry.name for entry in listed}
    return [
        f"{Path(path).relative_to(root.parent)}:{line}: {name}"
        for path, line, name in private_names_used(paths, frameworks, project)
        if not any(listed_name == name or listed_name.endswith("." + name) for listed_name in names)
    ]
