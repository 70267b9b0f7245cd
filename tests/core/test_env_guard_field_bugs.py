"""Field bugs in the episode-end guard and state snapshots of gem_core.env."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

import gem_core
from gem_core.env import Env, StepResult
from gem_core.errors import GemError, InvalidArgument


def test_refused_reset_leaves_an_ended_episode_over() -> None:
    """Before the fix the guard cleared the episode-over flag before calling reset: a reset that raised (a bad seed)
    still re-opened the ended episode, and the same winning guess was graded and paid 1.0 a second time."""
    env = gem_core.make("game:GuessTheNumber-v0")
    env.reset(seed=0)
    win = f"\\boxed{{{env.unwrapped.target}}}"
    assert env.step(win)[1:3] == (1.0, True)
    with pytest.raises(InvalidArgument):
        env.reset(seed=-1)
    _, reward, terminated, _, info = env.step(win)
    assert (reward, terminated, info.get("episode_over")) == (0.0, True, True)


class _OneShot(Env):
    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
        super().reset(seed=seed)
        return "What is 6*7?", {}

    def step(self, action: str) -> StepResult:
        return "Correct.", 1.0, True, False, {}

    def sample_random_action(self) -> str:
        return "42"


class _FailingAsyncReset(_OneShot):
    async def areset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
        raise GemError("the reset failed")


def test_refused_async_reset_leaves_an_ended_episode_over() -> None:
    """Before the fix an ``areset`` that raised re-opened the ended episode too: the next step was paid again."""
    env = _FailingAsyncReset()
    env.reset(seed=0)
    assert env.step("42")[1] == 1.0

    async def scenario() -> StepResult:
        with pytest.raises(GemError):
            await env.areset(seed=1)
        return await env.astep("42")

    _, reward, terminated, _, info = asyncio.run(asyncio.wait_for(scenario(), 5))
    assert (reward, terminated, info.get("episode_over")) == (0.0, True, True)
    env.reset(seed=2)  # a reset that returns still starts a new episode
    assert env.step("42")[1] == 1.0


class _ScoringMixin:  # not an Env: the grading logic an env class takes from elsewhere
    def step(self, action: str) -> StepResult:
        ok = action.strip() == "42"
        return ("Correct." if ok else "Wrong."), (1.0 if ok else 0.0), True, False, {}

    async def astep(self, action: str) -> StepResult:
        return self.step(action)


class _MixinQuiz(_ScoringMixin, Env):
    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
        super().reset(seed=seed)
        return "What is 6*7?", {}

    def sample_random_action(self) -> str:
        return "42"


def test_step_from_a_plain_mixin_is_guarded() -> None:
    """Before the fix only methods the Env subclass itself defined were guarded: a ``step`` from a mixin that is no
    Env went unguarded, and three steps after one reset paid 1.0, 1.0, 1.0."""
    env = _MixinQuiz()
    env.reset(seed=0)
    assert [env.step("42")[1] for _ in range(3)] == [1.0, 0.0, 0.0]
    env.reset(seed=1)
    rewards = asyncio.run(asyncio.wait_for(_astep_three_times(env), 5))
    assert rewards == [1.0, 0.0, 0.0]
    env.reset(seed=2)
    assert env.step("42")[1] == 1.0


async def _astep_three_times(env: Env) -> list[float]:
    return [float((await env.astep("42"))[1]) for _ in range(3)]


def test_guard_is_not_applied_twice() -> None:
    """Inherited methods already guarded stay as they are (guarding them again would only slow every step)."""
    class Sub(_OneShot):
        pass

    assert Sub.step is _OneShot.step and Sub.reset is _OneShot.reset
    assert "astep" not in vars(Sub) and "areset" not in vars(Sub)
    assert "astep" not in vars(_OneShot)  # Env's own astep only calls the guarded step
    assert _MixinQuiz.step is not _ScoringMixin.step and getattr(_MixinQuiz.step, "_gem_guarded", False)


class _HintGame(Env):
    state_excludes = frozenset({"shared_words"})

    def __init__(self) -> None:
        self.shared_words = ["python"]

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
        super().reset(seed=seed)
        if hasattr(self, "hint"):
            del self.hint
        return "Guess the word; say 'hint' for a hint (halves the reward).", {}

    def step(self, action: str) -> StepResult:
        if action == "hint":
            self.hint = "starts with p"
            return self.hint, 0.0, False, False, {}
        reward = (0.5 if hasattr(self, "hint") else 1.0) if action in self.shared_words else 0.0
        return "done", reward, True, False, {}

    def sample_random_action(self) -> str:
        return "python"


def test_set_state_removes_attributes_created_after_the_snapshot() -> None:
    """Before the fix set_state only overwrote the snapshot's attributes: ``hint``, created after the snapshot, stayed,
    and the restored env paid 0.5 where the env it was taken from (and a fresh one given it) paid 1.0."""
    env = _HintGame()
    env.reset(seed=0)
    snapshot = env.get_state()
    env.step("hint")
    env.shared_words = ["python", "java"]  # a shared resource: set_state leaves it alone
    env.set_state(snapshot)
    assert not hasattr(env, "hint")
    assert env.shared_words == ["python", "java"]
    assert env.step("python")[1] == 1.0


def test_refused_snapshot_removes_nothing() -> None:
    """A snapshot that is refused changes nothing, attributes created after it included."""
    env = _HintGame()
    env.reset(seed=0)
    snapshot = env.get_state()
    env.step("hint")
    bad = {**snapshot, "attributes": {**snapshot["attributes"], "step": None}}
    with pytest.raises(InvalidArgument):
        env.set_state(bad)
    assert env.hint == "starts with p"
