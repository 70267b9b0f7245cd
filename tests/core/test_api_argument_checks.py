"""Library calls with a wrong argument fail at the call, naming the argument, instead of with an
AttributeError or a bare AssertionError somewhere later (found by a library user's hostile pass)."""

from __future__ import annotations

import re

import numpy as np
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


def test_make_vec_and_reset_refuse_seeds_whose_per_env_seeds_pass_the_largest_seed_before_any_env_resets():
    """Env i is seeded with seed + i: a base seed in range whose last env's seed is not (MAX_SEED with two envs) was
    accepted, then every reset failed at env 1 with a RuntimeError; reset(seed=-1) got gymnasium's own error, and a
    seed list's bad entry a RuntimeError after the other envs had reset."""
    from gem_core.env import MAX_SEED
    from gem_core.errors import GemError

    with pytest.raises(GemError, match=r"seed=9223372036854775807.*2 envs.*9223372036854775806"):
        make_vec(GUESS, 2, seed=MAX_SEED)
    vec = make_vec(GUESS, 2, seed=MAX_SEED - 1)
    try:
        vec.reset()  # the largest base seed that fits
        for bad, message in [(MAX_SEED, "2 envs"), (-1, "seed=-1"), (2.0, "seed=2.0"), ([0, -5], r"seed\[1\]=-5"),
                             ([0, "7"], r"seed\[1\]='7'")]:
            with pytest.raises(GemError, match=message):
                vec.reset(seed=bad)
        obs, _ = vec.reset(seed=[np.int64(3), None])  # numpy ints are seeds too
        assert len(obs) == 2
    finally:
        vec.close()


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


#: Every env constructor argument that bounds a grader, a scorer or a data program in seconds, and whether None
#: (no limit, in-process) is one of its values.
TIME_LIMITS = [
    ("math:Sample", "grade_timeout", True),
    ("qa:Sample", "score_timeout", True),
    ("rg:ab", "score_timeout", True),
    ("rg:ab", "generate_timeout", False),
    ("code:Sample", "timeout", False),
]


@pytest.mark.parametrize("env_id, key, none_allowed", TIME_LIMITS)
@pytest.mark.parametrize("bad", [0, -1, float("nan"), float("inf"), "5", True, 10**9])
def test_a_time_limit_that_is_not_a_sane_number_of_seconds_is_refused_at_make(env_id, key, none_allowed, bad):
    """A bad limit was accepted, then paid 0 for every correct answer (0, -1, nan) or made step() raise
    OverflowError (inf, a huge number) or TypeError (a text)."""
    from gem_core.errors import InvalidArgument

    with pytest.raises(InvalidArgument, match=f"{key}="):
        make(env_id, **spec(env_id).sample_kwargs, **{key: bad})


@pytest.mark.parametrize("env_id, key, none_allowed", TIME_LIMITS)
def test_a_time_limit_of_none_means_no_limit_only_where_the_env_documents_it(env_id, key, none_allowed):
    from gem_core.errors import InvalidArgument

    if none_allowed:
        env = make(env_id, **spec(env_id).sample_kwargs, **{key: None})
        assert getattr(env.unwrapped, key) is None
    else:
        with pytest.raises(InvalidArgument, match=f"{key}=None"):
            make(env_id, **spec(env_id).sample_kwargs, **{key: None})
    assert getattr(make(env_id, **spec(env_id).sample_kwargs, **{key: 2}).unwrapped, key) == 2.0


ROW_ENVS = ["math:Sample", "qa:Sample", "code:Sample", "judge:Sample", "math:Geometry3K", "rg:ab"]


@pytest.mark.parametrize("env_id", ROW_ENVS)
@pytest.mark.parametrize("bad", ["abc", float("nan"), float("inf"), None, -1, 10**9, 2.7, True, "1"])
def test_a_reset_index_that_names_no_row_is_refused_with_the_row_count(env_id, bad):
    """``options={"index": ...}`` went through ``int(i) % n``: a text or nan raised a bare error, and -1, 10**9
    or 2.7 silently picked another row than the one asked for."""
    from gem_core.errors import InvalidArgument

    env = make(env_id, **spec(env_id).sample_kwargs)
    count = len(env.unwrapped.rows) if hasattr(env.unwrapped, "rows") else env.unwrapped.size
    with pytest.raises(InvalidArgument, match=rf"\['index'\]={re.escape(repr(bad))} .*{count} rows"):
        env.reset(seed=0, options={"index": bad})


@pytest.mark.parametrize("env_id", ROW_ENVS)
def test_a_reset_index_of_any_integer_type_picks_that_row(env_id):
    import numpy as np

    env = make(env_id, **spec(env_id).sample_kwargs)
    last = (len(env.unwrapped.rows) if hasattr(env.unwrapped, "rows") else env.unwrapped.size) - 1
    for index in (0, np.int64(1), last):
        assert env.reset(seed=0, options={"index": index})[1]["index"] == index


SEEDED = ["game:Wordle-v0", "math:Sample", "multi:TicTacToe-v0"]


@pytest.mark.parametrize("env_id", SEEDED)
def test_a_numpy_integer_seed_is_the_same_seed(env_id):
    """gymnasium refused numpy's integers (a seed drawn with numpy, a column of seeds) with its own error."""
    import numpy as np

    env = make(env_id, **spec(env_id).sample_kwargs)
    expected = env.reset(seed=3)[0]
    for seed in (np.int64(3), np.uint32(3), np.int8(3)):
        assert env.reset(seed=seed)[0] == expected


@pytest.mark.parametrize("env_id", SEEDED)
@pytest.mark.parametrize("bad", [-1, 2**63, 3.0, "3", True])
def test_a_seed_that_is_not_a_whole_number_in_range_is_refused_naming_it(env_id, bad):
    from gem_core.errors import InvalidArgument

    env = make(env_id, **spec(env_id).sample_kwargs)
    with pytest.raises(InvalidArgument, match=rf"seed={re.escape(repr(bad))} "):
        env.reset(seed=bad)


@pytest.mark.parametrize(
    "env_id, kwargs, key",
    [
        ("math:Sample", {"prompt_suffix": None}, "prompt_suffix"),
        ("qa:Sample", {"prompt_suffix": 3}, "prompt_suffix"),
        ("judge:Sample", {"prompt_suffix": None}, "prompt_suffix"),
        ("math:Sample", {"data_files": 123}, "data_files"),
        ("math:Sample", {"data_files": [123]}, "data_files"),
        ("qa:Sample", {"data_files": {"train": None}}, "data_files"),
    ],
)
def test_a_constructor_argument_of_the_wrong_type_is_refused_at_make_naming_it(env_id, kwargs, key):
    """These failed later, or deep inside: a None prompt_suffix at the first reset (str + None), data_files=123
    in the dataset loader (``next(iter(123))``)."""
    from gem_core.errors import GemError

    with pytest.raises(GemError, match=key):
        make(env_id, **{**spec(env_id).sample_kwargs, **kwargs})


@pytest.mark.parametrize("bad", [-1, 0, "x", 2.5, True])
def test_episode_statistics_buffer_length_is_a_positive_whole_number(bad):
    from gem_core.errors import InvalidArgument

    with pytest.raises(InvalidArgument, match="buffer_length"):
        EpisodeStatistics(make(GUESS), buffer_length=bad)


@pytest.mark.parametrize(
    "name, size, config",
    [("ab", -1, None), ("ab", 0, None), ("basic_arithmetic", 10, {"min_terms": 5, "max_terms": 1}), ("basic_arithmetic", 10, {"colour": 1}),
     ("ab", "10", None), ("ab", 10, "min_terms=2")],
)
def test_a_reasoning_gym_config_the_library_refuses_is_refused_at_make_naming_the_dataset(name, size, config):
    """reasoning-gym checks its config with ``assert``: the AssertionError came from inside the library."""
    pytest.importorskip("reasoning_gym")
    from gem_core.errors import GemError

    with pytest.raises(GemError, match=f"rg:{name}"):
        make(f"rg:{name}", size=size, config=config)


@pytest.mark.parametrize("seed", ["x", None, 1.5])
def test_a_reasoning_gym_seed_that_is_not_a_whole_number_is_refused_at_make(seed):
    """reasoning-gym took seed="x" and failed at the first reset, adding it to an int deep inside."""
    pytest.importorskip("reasoning_gym")
    from gem_core.errors import GemError

    with pytest.raises(GemError, match=f"rg:ab: seed={re.escape(repr(seed))}"):
        make("rg:ab", seed=seed)
