"""examples/train_oat.py on a machine without its GPU stack: the one line says what is missing and does not
point at a --dry-run the script does not have (a user followed the old line's "Use --dry-run" and met oat's
own "unrecognized" error)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "train_oat.py"


def test_the_missing_stack_line_offers_no_dry_run(tmp_path):
    done = subprocess.run([sys.executable, str(EXAMPLE), "--env_id", "game:GuessTheNumber-v0"], capture_output=True,
                          text=True, cwd=tmp_path, timeout=300)
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr[-3000:]
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith("train_oat.py cannot launch here, missing: ") and "a CUDA GPU" in line, line
    assert 'pip install -e ".[oat]" on Python 3.10' in line, line
    assert "dry-run" not in line and "dry_run" not in line, line
    assert line.endswith(")."), line
    assert list(tmp_path.iterdir()) == []


def test_help_offers_no_dry_run(tmp_path):
    done = subprocess.run([sys.executable, str(EXAMPLE), "--help"], capture_output=True, text=True, cwd=tmp_path, timeout=300)
    assert done.returncode == 0 and "--env_id" in done.stdout
    assert "dry-run" not in done.stdout and "dry_run" not in done.stdout
