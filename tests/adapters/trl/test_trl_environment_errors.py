"""The environment_factory route under a failing env, and the classes it pickles.

An env step that raises, or answers with a reward that is not a finite number or an observation that is not text,
ends the episode as an env error, as on the rollout_func route (the core's rule): the episode is truncated, that
turn scores 0, the error is counted (``env_error_turns``), and the tool's answer tells the model the game is over.
"""

from __future__ import annotations

import math
import pickle

import pytest

from gem_adapters.trl import GemToolEnvironment, environment_factory
from gem_core import registry
from gem_core.env import Env
from gem_core.errors import ResetNeeded

ENV_ID = "game:GuessTheNumber-v0-easy"


class Scripted(Env):
    """Two turns; the first step answers with ``self.first`` (a step result, or an exception to raise)."""

    blocking = False
    first: object = None

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.turn = 0
        return "Say something.", {}

    def step(self, action):
        self.turn += 1
        if self.turn == 1 and isinstance(self.first, Exception):
            raise self.first
        if self.turn == 1:
            return self.first
        return "fine", 1.0, True, False, {}

    def sample_random_action(self):
        return "x"


FAILURES = {
    "raises": RuntimeError("boom"),
    "nan_reward": ("obs", float("nan"), False, False, {}),
    "infinite_reward": ("obs", float("inf"), False, False, {}),
    "text_reward": ("obs", "1.0", False, False, {}),
    "observation_not_text": ({"not": "text"}, 1.0, False, False, {}),
}


@pytest.fixture
def failing_env(monkeypatch, request):
    monkeypatch.setattr(registry, "_REGISTRY", dict(registry._REGISTRY))
    env_id = "test:TrlFailingStep-v0"
    registry.register(env_id, type("FailingStep", (Scripted,), {"first": FAILURES[request.param]}))
    return env_id


@pytest.mark.parametrize("failing_env", list(FAILURES), indirect=True)
def test_a_failing_env_step_ends_the_episode_as_an_env_error_the_answer_says_so(failing_env):
    env = environment_factory(failing_env)()
    env.reset(seed=0)
    answer = env.act("hello")
    assert env.done and env.truncated
    assert env.rewards == [0.0] and env.get_reward() == 0.0 and math.isfinite(env.get_reward())
    assert env.env_error_turns == 1 and "error" in env.infos[-1]
    assert "error" in answer and "The game is over." in answer
    with pytest.raises(ResetNeeded, match="over"):  # the game does not go on from a broken state
        env.act("again")
    env.reset(seed=1)  # the next episode starts clean
    assert not env.done and not env.truncated and env.env_error_turns == 0 and env.infos == []


def test_a_game_that_works_counts_no_error():
    env = environment_factory(ENV_ID)()
    env.reset(seed=4)
    env.act(f"\\boxed{{{env.env.target}}}")
    assert env.done and not env.truncated and env.env_error_turns == 0 and env.get_reward() == 1.0


class HintEnv(GemToolEnvironment):
    """A user's environment with its own env id and an extra tool."""

    env_id = ENV_ID
    env_kwargs = {"max_turns": 3}

    def hint(self) -> str:
        """Ask for a hint.

        Returns:
            A hint.
        """
        return "the number is small"


class HintOnMade(environment_factory(ENV_ID)):
    """A user's subclass of a class environment_factory made."""

    env_kwargs = {"max_turns": 2}

    def hint(self) -> str:
        """Ask for a hint.

        Returns:
            A hint.
        """
        return "small"


@pytest.mark.parametrize("cls", [HintEnv, HintOnMade])
def test_a_users_subclass_pickles_as_itself_with_its_tools(cls):
    assert pickle.loads(pickle.dumps(cls)) is cls


def test_a_class_environment_factory_made_pickles_as_the_call_that_made_it():
    made = environment_factory(ENV_ID, max_turns=3)
    back = pickle.loads(pickle.dumps(made))
    assert back is not made and back.__name__ == made.__name__
    assert (back.env_id, back.env_kwargs) == (ENV_ID, {"max_turns": 3})
    assert pickle.loads(pickle.dumps(GemToolEnvironment)) is GemToolEnvironment
