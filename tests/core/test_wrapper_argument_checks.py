"""Wrapper arguments checked where they are given: a wrapper without an env, and ``make_vec``'s ``wrappers``."""

from __future__ import annotations

import pytest

from gem_core import make
from gem_core.errors import InvalidArgumentType
from gem_core.vector import make_vec
from gem_core.wrappers import EpisodeStatistics, ObservationFormat, ToolUse, TurnLimit

ENV_ID = "game:GuessTheNumber-v0-easy"


@pytest.mark.parametrize(
    ("name", "build"),
    [
        ("TurnLimit", lambda env: TurnLimit(env, 3)),
        ("ObservationFormat", lambda env: ObservationFormat(env)),
        ("EpisodeStatistics", lambda env: EpisodeStatistics(env)),
        ("ToolUse", lambda env: ToolUse(env, [])),
    ],
)
@pytest.mark.parametrize("env", [None, ENV_ID], ids=["None", "env-id"])
def test_wrapper_without_an_env_names_the_wrapper_and_the_fix(name, build, env):
    """Before the fix, gymnasium's raw ``TypeError: Expected env to be a gymnasium.Env`` came out, naming neither
    the wrapper nor that the env must be built first (``gem_core.make``)."""
    with pytest.raises(InvalidArgumentType, match=name) as caught:
        build(env)
    message = str(caught.value)
    assert "gem_core.make(" in message
    if isinstance(env, str):
        assert "env id" in message and repr(env) in message


def test_wrappers_still_take_a_built_env():
    """The check must not refuse a real env or a wrapped one."""
    env = EpisodeStatistics(TurnLimit(ObservationFormat(make(ENV_ID)), 3))
    env.reset(seed=0)
    env.close()


def test_make_vec_with_one_wrapper_not_in_a_list_says_to_pass_a_list():
    """Before the fix, ``make_vec(..., wrappers=EpisodeStatistics)`` raised a raw ``TypeError: 'type' object is not
    iterable`` from ``tuple(wrappers)``, naming neither ``wrappers`` nor the fix."""
    with pytest.raises(InvalidArgumentType, match=r"wrappers.*\[EpisodeStatistics\]"):
        make_vec(ENV_ID, num_envs=1, wrappers=EpisodeStatistics)


@pytest.mark.parametrize("wrappers", [[EpisodeStatistics, "TurnLimit"], [None], "EpisodeStatistics"])
def test_make_vec_refuses_wrappers_that_are_not_callables(wrappers):
    """A non-callable entry failed only inside each env's build (a worker, for the process backend), as a raw
    ``TypeError: 'str' object is not callable``."""
    with pytest.raises(InvalidArgumentType, match="wrappers"):
        make_vec(ENV_ID, num_envs=1, wrappers=wrappers)


def test_make_vec_still_applies_a_list_of_wrappers():
    """The check must not refuse a list or tuple of wrapper classes or plain callables."""
    for wrappers in ([EpisodeStatistics], (lambda env: TurnLimit(env, 2),)):
        envs = make_vec(ENV_ID, num_envs=1, wrappers=wrappers)
        try:
            envs.reset(seed=0)
        finally:
            envs.close()
