"""`gem` on a bare `pip install -e .`: the eval command's parser is built by every `gem` command, so nothing an
extra installs (tqdm, rich, matplotlib, openai) may be imported at module level on that path."""

from __future__ import annotations

import subprocess
import sys

import pytest

EXTRAS_ONLY = ("tqdm", "rich", "matplotlib", "openai")


@pytest.mark.parametrize("argv", [["list", "game:GuessTheNumber*"], ["eval", "--help"]])
def test_gem_runs_without_the_packages_extras_bring(argv):
    blocked = "; ".join(f"sys.modules[{name!r}] = None" for name in EXTRAS_ONLY)
    code = f"import sys; {blocked}; from gem_core.cli import main; sys.exit(main({argv!r}))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "Traceback" not in done.stderr
