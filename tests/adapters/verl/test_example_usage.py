"""examples/train_verl.py refuses bad options with one line naming the option (exit 2, argparse's usage-error
code), before any data is written and before the GPU check (a user met tracebacks: LabelError for an unknown
--env, ValueError for --n_train -1, FileExistsError for a --data_dir that is a file)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "train_verl.py"


def run_example(*argv: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(EXAMPLE), *argv], capture_output=True, text=True, cwd=cwd, timeout=300)


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--env", "game:Nope-v0", "--dry-run"], "--env: No env registered as 'game:Nope-v0'. Did you mean"),
        (["--n_train", "-1", "--dry-run"], "--n_train must be at least 1, got -1"),
        (["--n-val", "0", "--dry-run"], "--n_val must be at least 1, got 0"),
        (["--rollout_n", "0", "--dry-run"], "--rollout_n must be at least 1, got 0"),
        (["--n_gpus", "0"], "--n_gpus must be at least 1, got 0"),  # a usage error, not the missing-GPU line
        (["--data_dir", "{a_file}", "--dry-run"], "--data_dir {a_file} is a file, not a folder: give a folder path"),
        (["--data_dir", "{a_file}/sub", "--dry-run"], "--data_dir {a_file}/sub: {a_file} is a file, not a folder"),
    ],
)
def test_bad_option_is_one_usage_line_and_nothing_is_written(argv, message, tmp_path):
    a_file = tmp_path / "a_file"
    a_file.write_text("mine")
    argv = [word.format(a_file=a_file) for word in argv]
    if "--data_dir" not in argv:
        argv += ["--data_dir", str(tmp_path / "data")]
    done = run_example(*argv, cwd=tmp_path)
    assert done.returncode == 2, done.stderr[-3000:]
    assert "Traceback" not in done.stderr, done.stderr[-3000:]
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith("train_verl.py: error: ") and message.format(a_file=a_file) in line, line
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a_file"] and a_file.read_text() == "mine"
