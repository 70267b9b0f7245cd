"""`gem replay` bounds the work a trajectory file's env kwargs can ask for (issue 47.8): kwargs that
set how much building an episode costs (a board's scramble, a reasoning-gym dataset's size) are refused
past a bound that replays quickly, naming the field and the flag that sets it instead."""

from __future__ import annotations

import json
import time

import pytest

from gem_core import make
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


@pytest.mark.parametrize(
    ("env_id", "env_kwargs", "field"),
    [
        ("game:Sudoku-v0", {"box_rows": 5, "box_cols": 5}, "box_rows"),  # backtracking a 25x25 grid ran for hours
        ("game:WordSearch-v0", {"words": 100}, "words"),  # redrew for ever: 100 words never fit an 8x8 grid
        ("game:Crosswords-v0", {"words": 1000}, "words"),  # more words than clues: redrew for ever
        ("game:Sokoban-v0", {"height": 15, "width": 15, "inner_walls": 100}, "inner_walls"),  # never a connected floor
        ("game:Sokoban-v0", {"boxes": 50, "height": 20, "width": 20}, "boxes"),  # each pull re-measures every box
    ],
)
def test_settings_that_make_a_board_slowly_are_refused_past_a_bound(tmp_path, capsys, env_id, env_kwargs, field):
    stored = tmp_path / "shared.jsonl"
    stored.write_text(json.dumps({**ONE_TURN, "env_id": env_id, "env_kwargs": env_kwargs, "actions": ["x"]}) + "\n")
    problem = file_env_kwargs_problem(env_id, env_kwargs)
    assert problem is not None and field in problem
    assert main(["replay", str(stored)]) == 2
    err = capsys.readouterr().err
    assert field in err and "--env-kwargs" in err and "Traceback" not in err, err


#: The largest boards a file may choose (measured on a 2-core machine: 0.1 to 1.5 s a reset; the limit below
#: leaves room for a loaded one). Past these bounds a reset ran for minutes, or for ever.
LARGEST = [
    ("game:Sudoku-v0", {"box_rows": 3, "box_cols": 4, "blanks": 100, "max_turns": 100}),
    ("game:Sudoku-v0", {"box_rows": 4, "box_cols": 3, "blanks": 100, "max_turns": 100}),
    ("game:WordSearch-v0", {"size": 20, "words": 64, "max_turns": 100}),
    ("game:Crosswords-v0", {"words": 64, "max_turns": 100}),
    ("game:Sokoban-v0", {"height": 20, "width": 20, "boxes": 6, "inner_walls": 80, "reverse_steps": 30}),
    ("game:Sokoban-v0", {"height": 20, "width": 20, "boxes": 6, "inner_walls": 80, "reverse_steps": 10_000, "max_turns": 10_000}),
    ("game:FifteenPuzzle-v0", {"size": 30, "scramble_moves": 10_000}),
]


@pytest.mark.parametrize(("env_id", "env_kwargs"), LARGEST)
def test_the_largest_boards_a_file_may_choose_reset_within_seconds(env_id, env_kwargs):
    assert file_env_kwargs_problem(env_id, env_kwargs) is None
    env = make(env_id, **env_kwargs)
    started = time.perf_counter()
    env.reset(seed=0)
    assert time.perf_counter() - started < 5.0
