"""run_episodes, run_labels and run_branched_episode, cancelled while an env's step runs in a pool thread, close that
env only after the step returns: they closed it as soon as the cancel arrived, under the running step (which then
finished on a closed env), and returned with the thread still busy."""

from __future__ import annotations

import asyncio
import threading

import pytest

from gem_core import placement
from gem_core.env import Env
from gem_core.rollout import SamplingParams, run_branched_episode, run_episodes, run_labels
from gem_core.rows import EpisodeLabel
from gem_core.testing import ScriptedPolicy

RUNNERS = ["run_episodes", "run_labels", "run_branched_episode"]
BRANCHES = 2
WAIT = 20  # seconds: the bound of every wait below (none is expected to come near it)


class BlockingStepEnv(Env):
    """A blocking env (its step runs in an EnvThreadPool thread) whose step waits until the test releases it."""

    max_step_seconds = 5.0

    def __init__(self, events: list[str], started: threading.Event, release: threading.Event, closed: threading.Event):
        self.events, self.started, self.release, self.closed = events, started, release, closed
        self.stepping = False

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        return "start", {}

    def step(self, action):
        self.stepping = True
        self.events.append("step start")
        self.started.set()
        self.release.wait(WAIT)
        self.events.append("step end")
        self.stepping = False
        return "next", 0.0, False, False, {}

    def close(self):
        self.events.append("close while stepping" if self.stepping else "close")
        self.closed.set()

    def sample_random_action(self):
        return "a"


class Countdown:
    """A threading.Event for ``n`` envs: set once each has called ``set``."""

    def __init__(self, n: int):
        self.left, self.lock, self.event = n, threading.Lock(), threading.Event()

    def set(self):
        with self.lock:
            self.left -= 1
            if self.left == 0:
                self.event.set()

    def wait(self, timeout):
        return self.event.wait(timeout)


class Tagged:
    """The events list of one env: each entry goes to the shared log with the env's number."""

    def __init__(self, log: list, tag: int):
        self.log, self.tag = log, tag

    def append(self, event: str):
        self.log.append((self.tag, event))


class Forkable(BlockingStepEnv):
    """The episode's own env: its reset and close are the caller's; each branch gets a new blocking env."""

    def __init__(self, log, started, release, closed, max_step_seconds):
        super().__init__(Tagged(log, -1), started, release, closed)
        self.log, self.spawned, self.max_step_seconds = log, 0, max_step_seconds

    def spawn(self, same_state=True, *, seed=None):
        branch = BlockingStepEnv(Tagged(self.log, self.spawned), self.started, self.release, self.closed)
        branch.max_step_seconds = self.max_step_seconds
        self.spawned += 1
        return branch


def start(runner: str, tokenizer, monkeypatch, max_step_seconds: float = 5.0):
    """Start ``runner`` on envs whose steps block until released; the log gets ``(env number, event)`` and
    ``("task", "returned")``. Each episode is one turn (the env never ends it)."""
    log: list = []
    n = BRANCHES if runner == "run_branched_episode" else 1
    started, release, closed = Countdown(n), threading.Event(), Countdown(n)
    policy, sampling = ScriptedPolicy(tokenizer, ["a"]), SamplingParams(max_new_tokens=8)
    if runner == "run_episodes":

        def make():
            env = BlockingStepEnv(Tagged(log, 0), started, release, closed)
            env.max_step_seconds = max_step_seconds
            return env

        coroutine = run_episodes(make, policy, tokenizer, [0], sampling=sampling, max_turns=1)
    elif runner == "run_labels":

        def make_env(env_id, **kwargs):
            env = BlockingStepEnv(Tagged(log, 0), started, release, closed)
            env.max_step_seconds = max_step_seconds
            return env

        monkeypatch.setattr(placement, "make_env", make_env)
        coroutine = run_labels([EpisodeLabel("game:GuessTheNumber-v0", 0, {})], policy, tokenizer, sampling=sampling, max_turns=1)
    else:
        root = Forkable(log, started, release, closed, max_step_seconds)
        coroutine = run_branched_episode(root, policy, tokenizer, branch_turn=0, num_branches=BRANCHES, sampling=sampling, max_turns=1)
    task = asyncio.ensure_future(coroutine)
    task.add_done_callback(lambda _: log.append(("task", "returned")))
    return task, log, n, started, release, closed


def of_env(log: list, tag: int) -> list[str]:
    return [event for who, event in log if who == tag]


async def wait_in_thread(event) -> bool:
    return await asyncio.get_running_loop().run_in_executor(None, event.wait, WAIT)


@pytest.mark.parametrize("runner", RUNNERS)
async def test_a_cancel_closes_each_env_only_after_its_step_thread_returns(tiny_tokenizer, monkeypatch, runner):
    task, log, n, started, release, closed = start(runner, tiny_tokenizer, monkeypatch)
    try:
        assert await wait_in_thread(started), "the steps never started"
        task.cancel()
        for _ in range(20):  # the cancel is delivered and the runner's cleanup runs within a few loop ticks
            await asyncio.sleep(0)
        assert ("task", "returned") not in log  # waiting for the steps, which have not returned
    finally:
        release.set()
    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(task, WAIT)
    for env in range(n):
        assert of_env(log, env) == ["step start", "step end", "close"]
    assert log[-1] == ("task", "returned") and of_env(log, -1) == []  # run_branched_episode's own env is the caller's


async def assert_each_env_closed_after_its_step_and_the_runner_returned_first(log: list, n: int, closed) -> None:
    """The cancel went through before the steps ended, and each env was closed only once its step returned."""
    assert await wait_in_thread(closed), "the envs were never closed"
    for env in range(n):
        assert of_env(log, env) == ["step start", "step end", "close"]
    assert log.index(("task", "returned")) < min(log.index((env, "step end")) for env in range(n))


@pytest.mark.parametrize("runner", RUNNERS)
async def test_a_step_past_its_bound_does_not_hold_the_cancel_and_its_env_is_closed_when_it_returns(tiny_tokenizer, monkeypatch, runner):
    task, log, n, started, release, closed = start(runner, tiny_tokenizer, monkeypatch, max_step_seconds=0.05)
    try:
        assert await wait_in_thread(started), "the steps never started"
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await asyncio.wait_for(task, WAIT)
    finally:
        release.set()
    await assert_each_env_closed_after_its_step_and_the_runner_returned_first(log, n, closed)


@pytest.mark.parametrize("runner", RUNNERS)
async def test_a_second_cancel_ends_the_wait_and_each_env_is_still_closed_only_when_its_step_returns(tiny_tokenizer, monkeypatch, runner):
    task, log, n, started, release, closed = start(runner, tiny_tokenizer, monkeypatch)
    try:
        assert await wait_in_thread(started), "the steps never started"
        task.cancel()
        for _ in range(20):
            await asyncio.sleep(0)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await asyncio.wait_for(task, WAIT)
    finally:
        release.set()
    await assert_each_env_closed_after_its_step_and_the_runner_returned_first(log, n, closed)


async def test_branches_cancelled_before_their_first_step_still_close_their_envs(tiny_tokenizer):
    """A cancel that reaches the branches' tasks before they run ends them before their first line: their envs,
    spawned at the fork, are closed all the same."""
    log: list = []
    release = threading.Event()
    release.set()
    closed = Countdown(BRANCHES)

    class CancelAtFork(Forkable):
        def spawn(self, same_state=True, *, seed=None):
            asyncio.get_running_loop().call_soon(task.cancel)  # runs before the branches' tasks take their first step
            return super().spawn(same_state, seed=seed)

    root = CancelAtFork(log, Countdown(BRANCHES), release, closed, 5.0)
    task = asyncio.ensure_future(
        run_branched_episode(root, ScriptedPolicy(tiny_tokenizer, ["a"]), tiny_tokenizer, branch_turn=0, num_branches=BRANCHES)
    )
    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(task, WAIT)
    assert sorted(log) == [(env, "close") for env in range(BRANCHES)]


async def test_episodes_that_end_normally_close_their_envs_at_once(tiny_tokenizer, monkeypatch):
    for runner in RUNNERS:
        task, log, n, started, release, closed = start(runner, tiny_tokenizer, monkeypatch)
        release.set()
        trajectories = await asyncio.wait_for(task, WAIT)
        assert len(trajectories) == n and all(t.num_turns >= 1 for t in trajectories)
        for env in range(n):
            assert of_env(log, env)[-1] == "close"
        assert of_env(log, -1) == []
