"""The README's CLI examples run as written, in a shell where the venv is active (as the quickstart
says: `. .venv/bin/activate`), so a newcomer meets no "command not found"."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[2] / "README.md"


def cli_examples() -> list[str]:
    """The lines of the quickstart's `gem` block (the one after "In the same shell")."""
    text = README.read_text(encoding="utf-8")
    section = text[text.index("In the same shell") :]
    start = section.index("```bash\n") + len("```bash\n")
    return [line for line in section[start : section.index("```", start)].splitlines() if line.strip()]


def test_the_readme_has_cli_examples_and_activates_the_venv_before_them():
    text = README.read_text(encoding="utf-8")
    assert len(cli_examples()) >= 2 and all(line.split("|")[-1].strip().startswith("gem ") for line in cli_examples())
    assert text.index(". .venv/bin/activate") < text.index("In the same shell")


@pytest.mark.parametrize("line", cli_examples())
def test_readme_cli_example_runs_as_written(line, tmp_path):
    bin_dir = Path(sys.executable).parent  # what `. .venv/bin/activate` puts first on PATH
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}", "VIRTUAL_ENV": str(bin_dir.parent)}
    done = subprocess.run(["bash", "-c", line], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "command not found" not in done.stderr and "Traceback" not in done.stderr
    assert done.stdout.strip()
