"""examples/train_verl.py refuses bad options with one line naming the option (exit 2, argparse's usage-error
code), before any data is written and before the GPU check (a user met tracebacks: LabelError for an unknown
--env, ValueError for --n_train -1, FileExistsError for a --data_dir that is a file)."""

from __future__ import annotations

import pytest
from example_usage import assert_one_usage_line_and_nothing_written


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
    assert_one_usage_line_and_nothing_written("train_verl.py", argv, message, tmp_path, out_flag="--data_dir")
