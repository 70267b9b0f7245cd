"""Library calls with a wrong argument fail at the call, naming the argument, instead of with an
AttributeError or a bare AssertionError somewhere later (found by a library user's hostile pass)."""

from __future__ import annotations

import pytest

import gem_core
from gem_core import list_envs, make, register, spec
from gem_core.vector import make_vec
from gem_core.wrappers import EpisodeStatistics, TurnLimit

GUESS = "game:GuessTheNumber-v0"


@pytest.mark.parametrize("bad", [None, 3, b"game:Wordle-v0"])
def test_an_env_id_that_is_not_a_str_is_a_type_error_naming_the_id(bad):
    for call in (make, spec):
        with pytest.raises(TypeError, match="env id is a str"):
            call(bad)
    if bad is not None:  # list_envs(None) lists every id
        with pytest.raises(TypeError, match="pattern"):
            list_envs(bad)


@pytest.mark.parametrize("bad", [2.5, True, "3", 0, -1])
def test_turn_limit_takes_the_same_max_turns_as_make(bad):
    env = make(GUESS)
    with pytest.raises(ValueError, match=r"max_turns=.* must be a positive whole number"):
        TurnLimit(env, bad)
    with pytest.raises(ValueError, match=r"max_turns=.* must be a positive whole number"):
        make("math:Sample", max_turns=bad)


def test_episode_statistics_twice_on_one_env_is_refused_when_wrapping():
    once = EpisodeStatistics(make(GUESS, max_turns=1))
    with pytest.raises(ValueError, match="already records episode statistics"):
        EpisodeStatistics(once)


def test_registering_an_upstream_alias_would_shadow_it_and_is_refused():
    with pytest.raises(ValueError, match="game:TowerofHanoi-v0.*alias of 'game:TowerOfHanoi-v0'"):
        register("game:TowerofHanoi-v0", gem_core.Env)


@pytest.mark.parametrize("entry_point, message", [(42, "entry point"), ({"a": 1}, "entry point"), ("no_colon_here", "package.module:Class")])
def test_a_bad_entry_point_is_refused_at_register_not_at_make(entry_point, message):
    with pytest.raises((TypeError, ValueError), match=message):
        register("custom:BadEntry-v0", entry_point)
    assert "custom:BadEntry-v0" not in list_envs()


def test_an_entry_point_whose_module_is_missing_names_the_env_at_make():
    register("custom:MissingModule-v0", "no_such_module_anywhere.envs:Thing")
    with pytest.raises(ImportError, match="custom:MissingModule-v0.*no_such_module_anywhere"):
        make("custom:MissingModule-v0")


@pytest.mark.parametrize("bad", [2.5, "2", True])
def test_make_vec_num_envs_must_be_a_whole_number(bad):
    with pytest.raises(ValueError, match="num_envs must be a whole number"):
        make_vec(GUESS, bad)


def test_make_vec_refuses_a_negative_seed_before_building_anything():
    with pytest.raises(ValueError, match="seed=-1"):
        make_vec(GUESS, 2, seed=-1)


def test_a_true_false_env_asks_for_true_or_false_when_no_answer_is_found():
    env = make("logic:Sample")
    env.reset(seed=0)
    observation, *_ = env.step("I am not sure.")
    assert "True or False" in observation and "short phrase" not in observation


def test_multi_agent_messages_read_as_english():
    env = make("multi:TicTacToe-v0")
    with pytest.raises(RuntimeError) as before_reset:
        env.step({"x": "\\boxed{1}"})
    assert "the game is over" not in str(before_reset.value) and "reset()" in str(before_reset.value)
    env.reset(seed=0)
    (mover,) = env.acting_agents()
    waiting = "x" if mover == "o" else "o"
    with pytest.raises(ValueError) as out_of_turn:
        env.step({waiting: "\\boxed{1}"})
    assert f"'{mover}''s" not in str(out_of_turn.value) and f"move of '{mover}'" in str(out_of_turn.value)
