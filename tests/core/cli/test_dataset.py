"""gem_core.cli.dataset: the command line every adapter's make_dataset shares."""

from __future__ import annotations

import argparse

import pytest

from gem_core.cli.dataset import add_dataset_arguments, rows_from_arguments


def test_the_shared_command_line_reports_bad_options_in_one_line():
    parser = add_dataset_arguments(argparse.ArgumentParser())
    args = parser.parse_args(["--env", "game:GuessTheNumber-v0", "--n", "2", "--out", "x", "--env-kwargs", "[1]"])
    with pytest.raises(SystemExit, match="--env-kwargs must be a JSON object"):
        rows_from_arguments(args)
    args = parser.parse_args(["--env", "game:Nope-v0", "--n", "2", "--out", "x"])
    with pytest.raises(SystemExit, match="Nope"):
        rows_from_arguments(args)
    args = parser.parse_args(["--env", "game:GuessTheNumber-v0", "--env", "game:Wordle-v0", "--n", "1", "--out", "x", "--seed-start", "9"])
    assert [(r.label.env_id, r.label.seed) for r in rows_from_arguments(args, with_messages=False)] == [
        ("game:GuessTheNumber-v0", 9),
        ("game:Wordle-v0", 9),
    ]
