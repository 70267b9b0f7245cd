"""examples/train_rl2.py refuses bad options with one line naming the option (exit 2, argparse's usage-error
code), before the dataset is written, the RL2 check and the GPU check (a user met a LabelError traceback for an
unknown --env; --episodes -1 ended in a ValueError traceback and --gpus 0 was printed as given)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "train_rl2.py"


def run_example(*argv: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(EXAMPLE), *argv], capture_output=True, text=True, cwd=cwd, timeout=300)


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--env", "game:Nope-v0", "--dry-run"], "--env: No env registered as 'game:Nope-v0'. Did you mean"),
        (["--env", "game:Nope-v0"], "--env: No env registered as 'game:Nope-v0'"),  # before the GPU check
        (["--episodes", "-1", "--dry-run"], "--episodes must be at least 1, got -1"),
        (["--gpus", "0", "--dry-run"], "--gpus must be at least 1, got 0"),
        (["--responses-per-prompt", "0", "--dry-run"], "--responses-per-prompt must be at least 1, got 0"),
        (["--prompts-per-rollout", "0", "--dry-run"], "--prompts-per-rollout must be at least 1, got 0"),
        (["--max-new-tokens", "0", "--dry-run"], "--max-new-tokens must be at least 1, got 0"),
        (["--max-length", "-5", "--dry-run"], "--max-length must be at least 1, got -5"),
        (["--total-steps", "0", "--dry-run"], "--total-steps must be at least 1, got 0"),
        (["--out", "{a_file}", "--dry-run"], "--out {a_file} is a file, not a folder: give a folder path"),
        (["--out", "{a_file}/sub", "--dry-run"], "--out {a_file}/sub: {a_file} is a file, not a folder"),
    ],
)
def test_bad_option_is_one_usage_line_and_nothing_is_written(argv, message, tmp_path):
    a_file = tmp_path / "a_file"
    a_file.write_text("mine")
    argv = [word.format(a_file=a_file) for word in argv]
    if "--out" not in argv:
        argv += ["--out", str(tmp_path / "out")]
    done = run_example(*argv, cwd=tmp_path)
    assert done.returncode == 2, done.stderr[-3000:]
    assert "Traceback" not in done.stderr, done.stderr[-3000:]
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith("train_rl2.py: error: ") and message.format(a_file=a_file) in line, line
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a_file"] and a_file.read_text() == "mine"
    assert done.stdout == ""
