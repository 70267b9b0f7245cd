"""examples/train_openrlhf.py refuses bad options with one line naming the option (exit 2, argparse's usage-error
code), before the dataset is written and before the GPU check (a user met a LabelError traceback for an
unknown --env, a FileExistsError for an --out that is a file, and --n-samples -1 / --gpus 0 printed as given)."""

from __future__ import annotations

import pytest
from example_usage import assert_one_usage_line_and_nothing_written


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--env", "game:Nope-v0", "--dry-run"], "--env: No env registered as 'game:Nope-v0'. Did you mean"),
        (["--env", "game:Nope-v0"], "--env: No env registered as 'game:Nope-v0'"),  # before the GPU check
        (["--n-samples", "-1", "--model", "m", "--dry-run"], "--n-samples must be at least 1, got -1"),
        (["--gpus", "0", "--dry-run"], "--gpus must be at least 1, got 0"),
        (["--episodes", "0", "--dry-run"], "--episodes must be at least 1, got 0"),
        (["--max-len", "0", "--dry-run"], "--max-len must be at least 1, got 0"),
        (["--vllm-memory", "1.5", "--dry-run"], "--vllm-memory must be above 0 and at most 1 (a share of GPU memory), got 1.5"),
        (["--out", "{a_file}", "--dry-run"], "--out {a_file} is a file, not a folder: give a folder path"),
        (["--out", "{a_file}/sub", "--dry-run"], "--out {a_file}/sub: {a_file} is a file, not a folder"),
    ],
)
def test_bad_option_is_one_usage_line_and_nothing_is_written(argv, message, tmp_path):
    assert_one_usage_line_and_nothing_written("train_openrlhf.py", argv, message, tmp_path, out_flag="--out")
