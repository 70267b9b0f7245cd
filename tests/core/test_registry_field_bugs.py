"""register() refuses ids no make() could build."""

from __future__ import annotations

import pytest

import gem_core
from gem_core.envs.game.wordle import Wordle
from gem_core.errors import InvalidArgument


def test_register_refuses_the_remote_category():
    """Before the fix register('remote:Mine-v0', ...) succeeded and was listed, but make() reads every remote: id
    as a server address, so the registered env could never be built ("Remote env id ... is malformed")."""
    with pytest.raises(InvalidArgument, match="'remote'"):
        gem_core.register("remote:Mine-v0", Wordle)
    assert "remote:Mine-v0" not in gem_core.list_envs()



def test_an_id_ending_in_a_newline_is_malformed():
    """Before the fix ENV_ID_PATTERN ended in '$', which .match lets match before a final newline: register()
    accepted 'mine:Echo-v0\\n' (listed with the newline) and parse_remote_id accepted 'remote:http://h:1/game:Wordle-v0\\n'."""
    from gem_core.registry import ENV_ID_PATTERN, parse_remote_id

    with pytest.raises(InvalidArgument, match="malformed"):
        gem_core.register("mine:Echo-v0\n", Wordle)
    assert "mine:Echo-v0\n" not in gem_core.list_envs()
    with pytest.raises(InvalidArgument, match="malformed"):
        parse_remote_id("remote:http://127.0.0.1:1/game:Wordle-v0\n")
    assert ENV_ID_PATTERN.match("game:Wordle-v0\n") is None


@pytest.mark.parametrize("factory", [lambda **kwargs: None, dict], ids=["returns None", "dict"])
def test_an_entry_point_that_builds_no_env_is_refused_by_name(factory):
    """Before the fix make() of an id whose factory returned None (or a class that is no env, dict) raised a raw
    AttributeError: 'NoneType' object has no attribute 'unwrapped', naming neither the id nor the entry point."""
    from gem_core.errors import InvalidArgumentType

    gem_core.register("mine:Broken-v0", factory)
    with pytest.raises(InvalidArgumentType, match="mine:Broken-v0") as raised:
        gem_core.make("mine:Broken-v0")
    assert repr(factory) in str(raised.value) and "gem_core.Env" in str(raised.value)


def test_an_entry_point_may_return_a_wrapped_or_multi_agent_env():
    """What make() legitimately builds passes the check above: a wrapped env and a multi-agent env."""
    from gem_core.envs.multi_agent.tic_tac_toe import TicTacToe
    from gem_core.wrappers.turn_limit import TurnLimit

    gem_core.register("mine:Wrapped-v0", lambda: TurnLimit(Wordle(), 3))
    gem_core.register("mine:Multi-v0", TicTacToe)
    assert gem_core.make("mine:Wrapped-v0").unwrapped.env_id == "mine:Wrapped-v0"
    assert gem_core.make("mine:Multi-v0").unwrapped.env_id == "mine:Multi-v0"


def test_a_relative_entry_point_module_is_refused_at_register():
    """Before the fix register('mine:Rel-v0', '.mymodule:MyEnv') succeeded and make() then raised a raw TypeError
    from importlib (a relative import needs a package)."""
    with pytest.raises(InvalidArgument, match="mine:Rel-v0.*absolute"):
        gem_core.register("mine:Rel-v0", ".mymodule:MyEnv")
    assert "mine:Rel-v0" not in gem_core.list_envs()


@pytest.mark.parametrize("backend", [["ray"], {"ray": 1}, 3])
def test_make_env_refuses_a_backend_that_is_not_a_name(backend):
    """Before the fix make_env(..., env_backend=['ray']) (or a dict) raised a raw TypeError: unhashable type: 'list'."""
    from gem_core.placement import make_env

    with pytest.raises(InvalidArgument, match=r"env_backend=.*choose one of \('local', 'ray'\)"):
        make_env("game:GuessTheNumber-v0", env_backend=backend)
