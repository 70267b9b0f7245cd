"""The built docs site the tests in this folder read: ``nox -s docs`` passes the one it has just built
(``GEM_DOCS_SITE``); run alone, they build one."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The folder of the built site (``index.html``, ``objects.inv``, ``reference/...``)."""
    if os.environ.get("GEM_DOCS_SITE"):
        return Path(os.environ["GEM_DOCS_SITE"])
    out = tmp_path_factory.mktemp("site")
    subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-q", "-d", str(out)], cwd=ROOT, check=True)
    return out
