"""examples/train_trl.py refuses an --out it cannot write to and --env_kwargs the env rejects: one line naming
the option, exit 2, before torch loads and before anything is written (issues found by a user: both ended in
a traceback, --out only after the warm start)."""

from __future__ import annotations

import subprocess
import sys

import pytest
from example_usage import RUN_AND_REPORT_TORCH
from test_learning import EXAMPLE

#: Keeps a run that wrongly gets past the checks short (no warm start, one step).
_SHORT = ("--warm_start_steps", "0", "--steps", "1", "--prompts_per_step", "1")


def run_example(*argv: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", RUN_AND_REPORT_TORCH, str(EXAMPLE), *_SHORT, *argv],
                          capture_output=True, text=True, timeout=300)


def assert_usage_error(done: subprocess.CompletedProcess, *fragments: str) -> str:
    assert done.returncode == 2, done.stderr[-3000:]
    assert "Traceback" not in done.stderr, done.stderr[-3000:]
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith("train_trl.py: error: ")
    for fragment in fragments:
        assert fragment in line, line
    assert done.stdout.strip() == "torch not imported", done.stdout[-2000:]
    return line


def test_out_that_is_a_file_is_refused_before_torch_loads(tmp_path):
    a_file = tmp_path / "a_file"
    a_file.write_text("mine")
    line = assert_usage_error(run_example("--out", str(a_file)), f"--out {a_file} is a file, not a folder")
    assert "give a folder path" in line
    assert a_file.read_text() == "mine"


def test_out_below_a_file_is_refused_before_torch_loads(tmp_path):
    a_file = tmp_path / "a_file"
    a_file.write_text("mine")
    assert_usage_error(run_example("--out", str(a_file / "sub")), f"--out {a_file / 'sub'}: {a_file} is a file, not a folder")
    assert a_file.read_text() == "mine"


@pytest.mark.parametrize(
    ("argv", "fragments"),
    [
        (["--env_kwargs", '{"max_number":-3}'],
         ['--env_kwargs {"max_number": -3} are not valid for game:GuessTheNumber-v0: min_number (1) must be below max_number (-3).']),
        (["--env", "game:GuessTheNumber-v0-easy", "--env_kwargs", '{"min_number": 9, "max_number": 2}'],
         ["--env_kwargs", "game:GuessTheNumber-v0-easy", "must be below max_number (2)"]),
    ],
)
def test_env_kwargs_the_env_rejects_are_refused_in_one_line(argv, fragments, tmp_path):
    out = tmp_path / "run"
    assert_usage_error(run_example(*argv, "--out", str(out)), *fragments)
    assert not out.exists()
