"""examples/train_rl2.py refuses bad options with one line naming the option (exit 2, argparse's usage-error
code), before the dataset is written, the RL2 check and the GPU check (a user met a LabelError traceback for an
unknown --env; --episodes -1 ended in a ValueError traceback and --gpus 0 was printed as given)."""

from __future__ import annotations

import pytest
from example_usage import assert_one_usage_line_and_nothing_written


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
    assert_one_usage_line_and_nothing_written("train_rl2.py", argv, message, tmp_path, out_flag="--out")


#: Runs the example as ``__main__`` with RL2 hidden: ``importlib.util.find_spec("RL2")`` answers None for a name
#: whose ``sys.modules`` entry is None, which is what a machine without RL2 answers.
WITHOUT_RL2 = (
    "import os, runpy, sys\n"
    "sys.modules['RL2'] = None\n"
    "sys.argv = sys.argv[1:]\n"
    "sys.path.insert(0, os.path.dirname(sys.argv[0]))  # as `python examples/train_rl2.py` has it\n"
    "runpy.run_path(sys.argv[0], run_name='__main__')\n"
)


def run_without_rl2(tmp_path, *argv):
    import subprocess
    import sys

    from example_usage import EXAMPLES

    return subprocess.run([sys.executable, "-c", WITHOUT_RL2, str(EXAMPLES / "train_rl2.py"), *argv], capture_output=True,
                          text=True, cwd=tmp_path, timeout=300)


@pytest.mark.parametrize(("api", "env_file"), [(None, "gem_env.py"), ("reset_step", "gem_env_pypi.py")])
def test_dry_run_without_rl2_writes_the_dataset_and_prints_the_command(api, env_file, tmp_path):
    """--dry-run launches nothing, so it needs no RL2: RL2 main's command by default, --api picks the other."""
    done = run_without_rl2(tmp_path, "--dry-run", "--episodes", "8", "--out", str(tmp_path / "out"), *(["--api", api] if api else []))
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    assert len((tmp_path / "out" / "train.jsonl").read_text().splitlines()) == 8
    command = done.stdout.strip().splitlines()[-1]
    assert "torchrun" in command and f"/{env_file}" in command
    if api is None:  # says which RL2 the command is for, and how to get the other
        assert "RL2 is not installed" in done.stderr and "--api reset_step" in done.stderr


def test_a_launch_without_rl2_is_one_line_that_names_the_install_and_dry_run_api(tmp_path):
    done = run_without_rl2(tmp_path, "--out", str(tmp_path / "out"))
    assert done.returncode == 1 and "Traceback" not in done.stderr
    (line,) = done.stderr.strip().splitlines()
    assert "pip install rl-square==0.0.2" in line and "--dry-run --api generate|reset_step" in line
    assert not (tmp_path / "out").exists()
