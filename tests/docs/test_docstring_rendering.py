"""The API reference renders the docstrings as written: Sphinx roles as code, a Returns: section as one value.

The docstrings name objects with Sphinx roles (``:class:`~gem_core.Env```); mkdocstrings renders Markdown, so
without ``docs/griffe_sphinx_roles.py`` every role showed as literal ``:class:`` text (1,412 of them). And
griffe reads each line of a ``Returns:`` section as another returned value unless told otherwise, so a
description over two lines became two rows, each with the return type.
"""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("griffe_sphinx_roles", ROOT / "docs" / "griffe_sphinx_roles.py")
assert _spec is not None and _spec.loader is not None
sphinx_roles = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(sphinx_roles)
shown_name = sphinx_roles.shown_name

ROLE_TEXT = re.compile(r":(?:py:)?(?:class|func|meth|attr|mod|data|exc|obj):")


def _section_rows(page: str, anchor: str, section: str) -> int:
    """Rows of ``section``'s table (e.g. ``Returns:``) under the object whose heading has id ``anchor``."""
    start = page.index(f'id="{anchor}"')
    end = page.find("doc-heading", page.index("</h", start))  # the next object's heading
    block = page[start:end if end != -1 else len(page)]
    table = block[block.index(section):]
    return table[: table.index("</tbody>")].count('class="doc-section-item"')


def test_no_sphinx_role_shows_as_text_in_the_api_reference(site: Path):
    pages = sorted((site / "reference").rglob("index.html"))
    assert pages, f"no API reference pages under {site / 'reference'}"
    shown = {str(p.relative_to(site)): len(ROLE_TEXT.findall(p.read_text(encoding="utf-8"))) for p in pages}
    assert not any(shown.values()), f"Sphinx roles rendered as text: { {k: v for k, v in shown.items() if v} }"


def test_a_role_reads_as_the_name_sphinx_shows():
    assert shown_name("~gem_core.rollout.EpisodeSession") == "EpisodeSession"
    assert shown_name("gem_core.make") == "gem_core.make"
    assert shown_name("the registry <gem_core.registry>") == "the registry"


def test_a_returns_section_over_several_lines_is_one_returned_value(site: Path):
    # gem_core.Env.step's Returns: description runs over two lines
    page = (site / "reference" / "gem_core" / "index.html").read_text(encoding="utf-8")
    assert _section_rows(page, "gem_core.Env.step", "Returns:") == 1
