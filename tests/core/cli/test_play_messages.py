"""`gem play` messages a user hit: a negative --seed, and a remote: id whose connection fails inside a task
group (the cause, not "unhandled errors in a TaskGroup")."""

from __future__ import annotations

import subprocess
import sys

import pytest

from gem_core.cli import main


def test_a_negative_seed_is_refused_by_the_parser_naming_seed():
    done = subprocess.run([sys.executable, "-m", "gem_core.cli", "play", "game:Wordle-v0", "--seed", "-1"],
                          capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    assert done.stderr == "gem play: error: argument --seed: must be a whole number from 0 to 9223372036854775807, got '-1' (--help lists the options)\n"


@pytest.mark.parametrize("seed", ["x", "1.5"])
def test_a_seed_that_is_no_integer_names_seed(seed, capsys):
    with pytest.raises(SystemExit) as stop:
        main(["play", "game:Wordle-v0", "--seed", seed])
    assert stop.value.code == 2
    expected = f"gem play: error: argument --seed: must be a whole number from 0 to 9223372036854775807, got {seed!r} (--help lists the options)"
    assert capsys.readouterr().err.splitlines() == [expected]


def test_a_remote_id_with_a_port_out_of_range_says_the_cause_in_one_line(capsys):
    pytest.importorskip("httpx")
    env_id = "remote:http://127.0.0.1:99999/game:Wordle-v0"
    assert main(["play", env_id]) == 1
    err = capsys.readouterr().err
    assert err == f"gem play: cannot start {env_id}: RemoteEnv: the port of 'http://127.0.0.1:99999' is out of range: expected 1 to 65535.\n"


def test_a_seat_for_a_single_agent_game_is_refused_not_ignored(capsys, monkeypatch):
    monkeypatch.setattr("sys.stdin", __import__("io").StringIO(""))
    assert main(["play", "game:Wordle-v0", "--seat", "x"]) == 2
    assert capsys.readouterr().err == "gem play: --seat applies to multi-agent games (multi:*); game:Wordle-v0 has one player: leave --seat out.\n"
