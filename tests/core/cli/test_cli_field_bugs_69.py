"""Field bugs of the command lines around dataset rows: --env-kwargs repeating a key, --out naming a folder that does not
exist yet, --seed-start past the largest seed reported without the option's name, and gem replay's --env-id unchecked."""

from __future__ import annotations

import os

import pytest

from gem_core.cli import main
from gem_core.cli.dataset import run_dataset_cli
from gem_core.cli.options import env_kwargs_option
from gem_core.env import MAX_SEED
from gem_core.errors import GemError, InvalidArgument
from gem_core.transport.atomic_file import atomic_path

ENV = ["--env", "game:GuessTheNumber-v0"]


def _never(rows, args):
    raise AssertionError("the writer ran")


def _usage_error(capsys, argv) -> str:
    with pytest.raises(SystemExit) as caught:
        run_dataset_cli("python -m fw", "Rows.", _never, argv, with_messages=False)
    assert caught.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1, err
    return err


def test_env_kwargs_repeating_a_key_is_refused_naming_the_option_and_the_key(tmp_path, capsys):
    """``--env-kwargs '{"max_turns": 3, "max_turns": 9}'`` was read as max_turns 9 without a word (the last one wins)."""
    with pytest.raises(InvalidArgument, match=r"--env-kwargs .*'max_turns'.*twice"):
        env_kwargs_option('{"max_turns": 3, "max_turns": 9}')
    err = _usage_error(capsys, [*ENV, "--n", "1", "--out", str(tmp_path / "d.jsonl"), "--env-kwargs", '{"max_turns": 3, "max_turns": 9}'])
    assert "--env-kwargs" in err and "'max_turns'" in err


def test_out_ending_in_a_separator_is_refused_not_written_as_a_file(tmp_path, capsys):
    """``--out newdir/`` (a folder that does not exist yet) wrote a FILE named newdir and exited 0."""
    out = str(tmp_path / "newdir") + os.sep
    err = _usage_error(capsys, [*ENV, "--n", "1", "--out", out])
    assert "--out" in err and "newdir" in err
    assert not (tmp_path / "newdir").exists()


def test_atomic_path_refuses_a_target_ending_in_a_separator(tmp_path):
    """atomic_path(\"newdir/\") wrote a file named newdir: pathlib drops the trailing separator that says 'a folder'."""
    target = str(tmp_path / "newdir") + "/"
    with pytest.raises(GemError, match="newdir/"):
        with atomic_path(target) as partial:
            partial.write_text("x")
    assert not (tmp_path / "newdir").exists()


def test_seed_start_past_the_largest_seed_is_named_as_the_option(tmp_path, capsys):
    """``--seed-start 2**63-1 --n 2`` ended with the API's message ('seed_start must be 0 or more ...'), naming neither
    --seed-start nor the largest start that --n allows."""
    err = _usage_error(capsys, [*ENV, "--n", "2", "--out", str(tmp_path / "d.jsonl"), "--seed-start", str(MAX_SEED)])
    assert "--seed-start" in err and "--n" in err and str(MAX_SEED - 1) in err


def test_replay_with_an_unknown_env_id_exits_2_even_for_a_file_without_episodes(tmp_path, capsys):
    """``gem replay EMPTY.jsonl --env-id no:SuchEnv-v0`` exited 0 ('0 episodes replayed'): the option was never checked."""
    empty = tmp_path / "t.jsonl"
    empty.write_text("")
    assert main(["replay", str(empty), "--env-id", "game:Wordel-v0"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--env-id" in err and "game:Wordle-v0" in err, err
