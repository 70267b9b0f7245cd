"""gem_core.curriculum.ladder: a game's registered levels, or a numeric kwarg, as ordered tasks."""

from __future__ import annotations

import pytest

import gem_core
from gem_core.curriculum import TaskError, difficulty_ladder, numeric_ladder


@pytest.mark.parametrize("any_id", ["game:GuessTheNumber-v0", "game:GuessTheNumber-v0-hard", "game:GuessTheNumber-v0-random"])
def test_a_games_registered_levels_come_easiest_first_from_any_of_its_ids(any_id):
    ladder = difficulty_ladder(any_id, env_kwargs={"max_turns": 4})
    assert [t.env_id for t in ladder] == ["game:GuessTheNumber-v0-easy", "game:GuessTheNumber-v0", "game:GuessTheNumber-v0-hard"]
    assert all(t.env_kwargs == {"max_turns": 4} for t in ladder)
    assert [t.name for t in ladder][0] == "game:GuessTheNumber-v0-easy[max_turns=4]"


def test_every_game_with_levels_gets_a_ladder_of_ids_that_build():
    bases = {env_id.removesuffix("-easy") for env_id in gem_core.list_envs("game:*-easy")}
    assert bases
    for base in bases:
        ladder = difficulty_ladder(base)
        assert ladder[0].env_id == base + "-easy" and len(ladder) >= 3
    assert [t.env_id for t in difficulty_ladder("game:2048-v0")][-1] == "game:2048-v0-extreme-hard"


def test_an_id_without_levels_is_refused_with_the_numeric_ladder_as_the_fix():
    with pytest.raises(TaskError, match="numeric_ladder"):
        difficulty_ladder("agent:Retail-v0")


def test_a_numeric_ladder_sets_one_kwarg_per_rung_and_checks_the_env_takes_it():
    ladder = numeric_ladder("game:GuessTheNumber-v0", "max_number", [4, 8, 16], env_kwargs={"max_turns": 4})
    assert [dict(t.env_kwargs) for t in ladder] == [{"max_turns": 4, "max_number": n} for n in (4, 8, 16)]
    env = gem_core.make(ladder[2].env_id, **ladder[2].env_kwargs)
    assert env.unwrapped.max_number == 16
    with pytest.raises(TaskError, match="do not fit game:GuessTheNumber-v0 .*its registered kwargs are"):
        numeric_ladder("game:GuessTheNumber-v0", "max_numbr", [4, 8])
    with pytest.raises(TaskError, match="two or more distinct values"):
        numeric_ladder("game:GuessTheNumber-v0", "max_number", [4, 4])
