"""The README is the landing page that points into docs/; mkdocs checks the links between pages, not the
README's (it is not part of the site), so its relative links are checked here."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def relative_links(text: str) -> list[str]:
    """Targets of Markdown links and images that point into the repository (no scheme, not a bare anchor)."""
    targets = re.findall(r"\]\(([^)\s]+)\)", text)
    return [t.split("#", 1)[0] for t in targets if not re.match(r"[a-z]+:", t) and not t.startswith("#")]


def test_the_parser_finds_links():
    assert relative_links("[a](docs/x.md#y) [b](https://e.org) ![c](img.png) [d](#top)") == ["docs/x.md", "img.png"]


def test_every_relative_link_in_the_readme_exists():
    links = relative_links((ROOT / "README.md").read_text(encoding="utf-8"))
    missing = [link for link in links if not (ROOT / link).exists()]
    assert missing == [], f"README links to files that do not exist: {missing}"
