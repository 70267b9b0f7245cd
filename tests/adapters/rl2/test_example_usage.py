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
