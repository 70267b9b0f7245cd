"""Every ``examples/*.py`` is one file a reader takes in at once (cleanrl's rule): it imports the standard
library, this project's packages and the frameworks, never a helper module beside it in ``examples/``
(``train_openrlhf.py`` once needed ``examples/prerequisites.py``)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def imported_modules(path: Path) -> set[str]:
    """The top-level names of every module the file imports, at any depth (lazy imports in functions too)."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module.split(".")[0])
        elif isinstance(node, ast.ImportFrom):  # a relative import: only a sibling file can answer it
            names.add("." + (node.module or ""))
    return names


@pytest.mark.parametrize("example", sorted(EXAMPLES.glob("*.py")), ids=lambda path: path.name)
def test_an_example_imports_no_file_beside_it(example):
    siblings = {path.stem for path in EXAMPLES.glob("*.py")} | {path.name for path in EXAMPLES.iterdir() if path.is_dir()}
    local = sorted(name for name in imported_modules(example) if name in siblings or name.startswith("."))
    assert not local, f"{example.name} imports {local} from examples/: move what it needs into the package or the example"


def test_there_are_examples_to_check():
    assert len(list(EXAMPLES.glob("train_*.py"))) >= 5


@pytest.mark.parametrize("example", sorted(EXAMPLES.glob("*.py")), ids=lambda path: path.name)
def test_an_example_is_at_most_250_lines(example):
    """Read in one sitting (issue 44): what a reader need not see goes into the package (``gem_adapters.trl.recipe``)."""
    lines = len(example.read_text(encoding="utf-8").splitlines())
    assert lines <= 250, f"{example.name} has {lines} lines"
