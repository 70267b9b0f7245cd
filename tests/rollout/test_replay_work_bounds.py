"""`gem replay` bounds the work a trajectory file's env kwargs can ask for (issue 47.8): kwargs that
set how much building an episode costs (a board's scramble, a reasoning-gym dataset's size) are refused
past a bound that replays quickly, naming the field and the flag that sets it instead."""

from __future__ import annotations

import json

import pytest

from gem_core.cli import main
from gem_core.rollout.replay import file_env_kwargs_problem

ONE_TURN = {
    "format": "gem.trajectory/1", "prompt_ids": [1], "response_ids": [2], "loss_mask": [1], "logprobs": [0.0],
    "turn_spans": [[0, 1]], "rewards": [0.0], "terminated": True, "truncated": False, "seed": 0,
}


@pytest.mark.parametrize(
    ("env_id", "env_kwargs", "field"),
    [
        ("game:FifteenPuzzle-v0", {"scramble_moves": 10**7}, "scramble_moves"),  # ran past 60 s
        ("game:Sokoban-v0", {"reverse_steps": 10**7, "max_turns": 10**7}, "reverse_steps"),
        ("game:Minesweeper-v0", {"placement_attempts": 10**7}, "placement_attempts"),
        ("rg:acre", {"size": 10**7}, "size"),  # acre builds every item when the dataset is made
        ("rg:composite", {"config": {"datasets": [{"name": "acre", "weight": 1, "size": 10**7}]}}, "config"),  # a nested size
    ],
)
def test_kwargs_that_size_the_work_are_refused_past_a_quick_bound(tmp_path, capsys, env_id, env_kwargs, field):
    stored = tmp_path / "shared.jsonl"
    stored.write_text(json.dumps({**ONE_TURN, "env_id": env_id, "env_kwargs": env_kwargs, "actions": ["x"]}) + "\n")
    assert file_env_kwargs_problem(env_id, env_kwargs) is not None  # never replayed here: it would run for minutes
    assert main(["replay", str(stored)]) == 2
    err = capsys.readouterr().err
    assert field in err and "--env-kwargs" in err and "10000" in err and "Traceback" not in err, err


def test_work_kwargs_within_the_bound_are_accepted():
    assert file_env_kwargs_problem("game:FifteenPuzzle-v0", {"scramble_moves": 10_000}) is None
    assert file_env_kwargs_problem("rg:acre", {"size": 10_000, "seed": 10**7}) is None
    assert file_env_kwargs_problem("game:GuessTheNumber-v0", {"max_number": 10**7}) is None
