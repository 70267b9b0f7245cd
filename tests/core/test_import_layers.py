"""The import graph of ``gem_core`` keeps its layers: a lower part never imports a higher one, not even
lazily inside a function (a lazy import is still a dependency, and it closes a circle the moment it runs)."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "gem_core"


def _imports(path: Path) -> set[str]:
    """Every module a file imports, at the top or inside a function, relative imports resolved."""
    module = ".".join(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    if path.name == "__init__.py":
        module = package
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                base = ".".join(parts[: len(parts) - node.level + 1] + ([base] if base else []))
            found.add(base)
            found.update(f"{base}.{alias.name}" for alias in node.names)
    return found


def _importers_of(target: str, under: str) -> dict[str, list[str]]:
    """Files under ``gem_core/<under>`` that import anything under the ``target`` package."""
    hits: dict[str, list[str]] = {}
    for path in sorted((PACKAGE / under).rglob("*.py")):
        names = sorted(name for name in _imports(path) if name == target or name.startswith(target + "."))
        if names:
            hits[str(path.relative_to(PACKAGE.parent))] = names
    return hits


def test_nothing_under_tools_imports_envs():
    """The sandbox runs any ``module:function`` call; graders pass their own (tools sit below envs)."""
    assert _importers_of("gem_core.envs", "tools") == {}


def test_the_rollout_package_does_not_import_the_vector_package():
    """Where an episode's env lives is gem_core.placement's decision, not the rollout engine's."""
    assert _importers_of("gem_core.vector", "rollout") == {}


def test_the_eval_backends_do_not_import_the_runner_that_imports_them():
    """EvalConfig lives in gem_core.eval.config, so the runner and its two backends form no circle."""
    backends = {path: names for path, names in _importers_of("gem_core.eval.runner", "eval").items() if path.endswith("_backend.py")}
    assert backends == {}


def test_the_episode_engine_and_the_dataset_rows_parse_no_command_line():
    """Argument parsing lives beside the CLI (gem_core/cli/): rollout/ and rows/ import neither argparse
    nor the CLI's helpers, so an adapter's hook that reads a row's label pulls in no command line."""
    for under in ("rollout", "rows"):
        assert _importers_of("argparse", under) == {}, under
        assert _importers_of("gem_core.cli", under) == {}, under


def test_the_episode_engine_does_not_build_dataset_rows():
    """rollout/ reads a row's label (EpisodeSession.from_label) but never builds rows or writes dataset files."""
    assert _importers_of("gem_core.rows.rows", "rollout") == {}
    assert _importers_of("gem_core.rows.jsonl", "rollout") == {}


def _module_graph() -> dict[str, set[str]]:
    """Each ``gem_core`` module and the ``gem_core`` modules it imports (a package is its ``__init__``). A
    module's own parent packages are not edges: Python runs them before the module whatever it imports."""
    modules = {}
    for path in PACKAGE.rglob("*.py"):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        modules[".".join(parts[:-1] if path.name == "__init__.py" else parts)] = path
    return {
        name: {m for m in _imports(path) if m in modules and m != name and not name.startswith(m + ".")}
        for name, path in modules.items()
    }


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for successor in graph[node]:
            if successor not in index:
                visit(successor)
                low[node] = min(low[node], low[successor])
            elif successor in stack:
                low[node] = min(low[node], index[successor])
        if low[node] == index[node]:
            component = []
            while not component or component[-1] != node:
                component.append(stack.pop())
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_no_module_imports_one_that_imports_it_back():
    """No circle in the import graph, lazy imports included. The registry's plugins are not edges: it names
    each env's module as an entry-point string, and a remote id's grammar lives in the registry itself."""
    assert _cycles(_module_graph()) == []


def test_the_cycle_check_sees_a_lazy_circle():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
