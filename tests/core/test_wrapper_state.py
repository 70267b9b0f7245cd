"""Wrapper.set_state restores the wrapper exactly as snapshotted: attributes the wrapper created later are removed."""

from __future__ import annotations

import pytest

from gem_core import spec
from gem_core.errors import InvalidArgument
from gem_core.wrappers.core import Wrapper


def guess_the_number():
    env_spec = spec("game:GuessTheNumber-v0")
    return env_spec.make(**env_spec.sample_kwargs)


class HintOnSecondTurn(Wrapper):
    """Creates ``hint`` on its first step (not in __init__), and prefixes every later observation with it."""

    state_excludes = frozenset({"client"})  # a shared resource: never snapshotted, never removed

    def __init__(self, env):
        super().__init__(env)
        self.turns = 0

    def step(self, action):
        observation, reward, terminated, truncated, info = self.env.step(action)
        self.turns += 1
        if hasattr(self, "hint"):
            observation = f"[{self.hint}] {observation}"
        else:
            self.hint = f"hint from turn {self.turns}"
        return observation, reward, terminated, truncated, info


def test_an_attribute_created_after_the_snapshot_is_removed_on_restore():
    """Before the fix Wrapper.set_state only set the snapshot's attributes: ``hint``, created by a step after
    get_state(), survived the restore, so the restored wrapper's next observation carried the hint
    ("[hint from turn 1] ...") where the snapshotted one's had none."""
    env = HintOnSecondTurn(guess_the_number())
    env.reset(seed=4)
    state = env.get_state()
    first = env.step("\\boxed{1}")[0]  # creates `hint`
    assert "hint" in vars(env) and not first.startswith("[")
    env.step("\\boxed{2}")
    env.set_state(state)
    assert "hint" not in vars(env)
    assert env.turns == 0
    assert env.step("\\boxed{1}")[0] == first


def test_excluded_and_gymnasium_attributes_survive_the_restore():
    """A resource in state_excludes and gymnasium's own attributes (env, spaces) are no episode state: kept."""
    env = HintOnSecondTurn(guess_the_number())
    env.reset(seed=4)
    state = env.get_state()
    inner = env.env
    client = env.client = object()
    space = env.action_space = env.env.action_space  # sets gymnasium's own _action_space
    env.step("\\boxed{1}")
    env.set_state(state)
    assert env.env is inner and env.client is client
    assert vars(env)["_action_space"] is space and env.observation_space is inner.observation_space
    assert "hint" not in vars(env)


def test_a_refused_snapshot_removes_nothing():
    """Nothing changes when the inner env refuses the snapshot: the later attribute is still there."""
    env = HintOnSecondTurn(guess_the_number())
    env.reset(seed=4)
    state = env.get_state()
    env.step("\\boxed{1}")
    state["inner"] = {**state["inner"], "env": "another.Env"}
    with pytest.raises(InvalidArgument, match="restore it into an env of that class"):
        env.set_state(state)
    assert "hint" in vars(env) and env.turns == 1
