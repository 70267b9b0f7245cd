"""More bugs found in the field in :class:`AsyncEpisodeEngine`: closing envs, a restart after ``aclose``, and a
policy updated without the engine.

Each test names what went wrong before its fix. Every wait is bounded (``asyncio.wait_for``), so a regression fails
rather than hangs.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time

import pytest

from gem_core.env import Env
from gem_core.rollout.async_engine import MIN_FAILED_STARTS, AsyncEpisodeEngine, AsyncRolloutConfig, EnvStartError
from gem_core.rollout.policy_version import VersionedPolicy
from gem_core.testing import ScriptedPolicy

BOUND = 10  # seconds any wait here may take before the test fails


async def _until(predicate) -> None:
    """Yield to the loop until ``predicate()`` holds (bounded by the caller's ``wait_for``)."""
    while not predicate():
        await asyncio.sleep(0.001)


class _SeedEnvMixin:
    """Remembers the seed of its reset (ScriptedEnv does not)."""

    seed_ = None

    def reset(self, *, seed=None, options=None):
        self.seed_ = seed
        return super().reset(seed=seed, options=options)


def _accounted(engine: AsyncEpisodeEngine) -> int:
    """Every episode started ends one way: finished, stopped as stale, failed to start, cancelled, or still running."""
    counts = engine.counts
    return (counts["episodes_finished"] + counts["stopped_stale_in_flight"] + counts["env_start_errors"]
            + counts.get("episodes_cancelled", 0) + int(engine.metrics()["gem/async/in_flight"]))


# -- 1. aclose waits for an env's step still running in a pool thread before closing the env ----------------------


async def test_aclose_does_not_close_an_env_under_a_step_still_running_in_its_thread(tiny_tokenizer, scripted_env):
    """aclose() cancelled the episode and closed its env at once, while the env's step still ran in an env pool
    thread: at aclose()'s return the events were ['step-start', 'close'], and the step then ran on a closed env
    ('step-end' after the close). run_episodes waits for the step (runner._closed_when_idle)."""
    events: list[str] = []
    in_step = threading.Event()

    class Blocking(scripted_env):
        blocking = True
        max_step_seconds = 5
        astep = Env.astep  # the default: the sync step in an env pool thread

        def step(self, action):
            events.append("step-start")
            in_step.set()
            time.sleep(0.3)  # a slow tool call
            events.append("step-end")
            return super().step(action)

        def close(self):
            events.append("close")

    config = AsyncRolloutConfig(batch_size=1, max_staleness=0, max_in_flight=1)
    engine = AsyncEpisodeEngine(lambda: Blocking(rewards=[1.0]), VersionedPolicy(ScriptedPolicy(tiny_tokenizer, ["go"])),
                                tiny_tokenizer, [0], config)
    await engine.start()
    await asyncio.wait_for(_until(in_step.is_set), BOUND)
    await asyncio.wait_for(engine.aclose(), BOUND)
    assert events == ["step-start", "step-end", "close"]


# -- 2. an env whose close() raises ends neither the run nor its episode ------------------------------------------


async def test_an_env_whose_close_raises_does_not_end_the_run(tiny_tokenizer, scripted_env, caplog):
    """The error of one env's close() was stored as the run's error: every next_batch() raised it (here the first,
    with all four episodes not yet handed) and no episode started again."""

    class BadClose(_SeedEnvMixin, scripted_env):
        def close(self):
            if self.seed_ == 1:
                raise RuntimeError("sandbox teardown failed")

    config = AsyncRolloutConfig(batch_size=4, max_staleness=0, max_in_flight=2)
    policy = VersionedPolicy(ScriptedPolicy(tiny_tokenizer, ["go"]))
    with caplog.at_level(logging.WARNING, logger="gem.rollout"):
        async with AsyncEpisodeEngine(lambda: BadClose(rewards=[1.0]), policy, tiny_tokenizer, range(100), config) as engine:
            batch = await asyncio.wait_for(engine.next_batch(), BOUND)
            await engine.update_policy()
            second = await asyncio.wait_for(engine.next_batch(), BOUND)
    assert sorted(t.seed for t in batch) == [0, 1, 2, 3]  # seed 1's episode is kept
    assert len(second) == 4
    assert engine.counts["env_close_errors"] == 1
    assert engine.metrics()["gem/async/env_close_errors"] == 1.0
    assert "sandbox teardown failed" in caplog.text


async def test_a_close_error_after_a_failed_start_leaves_the_start_error_counted(tiny_tokenizer, scripted_env):
    """An env that failed to reset and then failed to close: the close error replaced the start error, became the
    run's error (next_batch raised the close's RuntimeError) and env_start_errors was not counted."""

    class Broken(_SeedEnvMixin, scripted_env):
        def reset(self, *, seed=None, options=None):
            if seed == 0:
                raise FileNotFoundError("row 0's file is gone")
            return super().reset(seed=seed, options=options)

        def close(self):
            if self.seed_ is None:  # never reset
                raise RuntimeError("close after a failed start")

    config = AsyncRolloutConfig(batch_size=2, max_staleness=0, max_in_flight=1)
    policy = VersionedPolicy(ScriptedPolicy(tiny_tokenizer, ["go"]))
    async with AsyncEpisodeEngine(lambda: Broken(rewards=[1.0]), policy, tiny_tokenizer, range(100), config) as engine:
        batch = await asyncio.wait_for(engine.next_batch(), BOUND)
    assert [t.seed for t in batch] == [1, 2]
    assert engine.counts["env_start_errors"] == 1 and engine.counts["env_close_errors"] == 1


async def test_envs_that_never_start_end_the_run_with_their_start_error_not_their_close_error(tiny_tokenizer, scripted_env):
    """With every env failing to reset and to close, the run ended with the first close's RuntimeError instead of
    EnvStartError caused by the reset's error."""

    class Broken(scripted_env):
        def reset(self, *, seed=None, options=None):
            raise FileNotFoundError("the data file is gone")

        def close(self):
            raise RuntimeError("close after a failed start")

    config = AsyncRolloutConfig(batch_size=1, max_staleness=0, max_in_flight=1)
    policy = VersionedPolicy(ScriptedPolicy(tiny_tokenizer, ["go"]))
    async with AsyncEpisodeEngine(lambda: Broken(rewards=[1.0]), policy, tiny_tokenizer, range(100), config) as engine:
        with pytest.raises(EnvStartError) as raised:
            await asyncio.wait_for(engine.next_batch(), BOUND)
    assert isinstance(raised.value.__cause__, FileNotFoundError)
    assert engine.counts["env_start_errors"] == MIN_FAILED_STARTS
    assert engine.counts["env_close_errors"] == MIN_FAILED_STARTS


# -- 3. aclose() then start(): the episodes aclose cancelled are played first ------------------------------------


async def _restarted_batch(engine: AsyncEpisodeEngine) -> list:
    """Start the closed engine again and take its first batch (closing it after)."""
    await engine.start()
    try:
        return await asyncio.wait_for(engine.next_batch(), BOUND)
    finally:
        await engine.aclose()


async def test_a_restart_plays_the_seeds_of_the_episodes_aclose_cancelled_mid_turn(tiny_tokenizer, scripted_env):
    """aclose() then start() (what the closed engine's error suggests) lost the seeds of the episodes cancelled
    mid-turn: the first batch after the restart was seeds [2, 3], 0 and 1 were never played, and the counts stopped
    adding up (started=4, but finished + stopped + start errors + in flight = 2)."""
    hold = asyncio.Event()

    class Held(scripted_env):
        async def astep(self, action):
            await hold.wait()
            return self.step(action)

    config = AsyncRolloutConfig(batch_size=2, max_staleness=0, max_in_flight=2)
    engine = AsyncEpisodeEngine(lambda: Held(rewards=[1.0]), VersionedPolicy(ScriptedPolicy(tiny_tokenizer, ["go"])),
                                tiny_tokenizer, range(100), config)
    await engine.start()
    await asyncio.wait_for(_until(lambda: engine.counts["episodes_started"] == 2), BOUND)
    await asyncio.sleep(0.02)  # both mid-turn
    await asyncio.wait_for(engine.aclose(), BOUND)
    hold.set()
    batch = await _restarted_batch(engine)
    assert [t.seed for t in batch] == [0, 1]
    assert engine.counts.get("episodes_cancelled") == 2 and _accounted(engine) == engine.counts["episodes_started"]


async def test_episodes_cancelled_before_their_first_step_are_accounted_and_played_after_a_restart(tiny_tokenizer, scripted_env):
    """An episode task that aclose() cancelled before it first ran never ran its `finally`: it stayed counted in
    flight for good (admission shut after a restart) and its seed was lost."""
    closing: list[asyncio.Future] = []

    def seeds():
        # aclose() is scheduled as the producer asks for the first seed: it runs right after the producer has made
        # both episode tasks (max_in_flight=2), before either of them first runs.
        closing.append(asyncio.ensure_future(engine.aclose()))
        yield from range(100)

    config = AsyncRolloutConfig(batch_size=2, max_staleness=0, max_in_flight=2)
    engine = AsyncEpisodeEngine(lambda: scripted_env(rewards=[1.0]), VersionedPolicy(ScriptedPolicy(tiny_tokenizer, ["go"])),
                                tiny_tokenizer, seeds(), config)
    await engine.start()
    await asyncio.wait_for(_until(lambda: bool(closing)), BOUND)
    await asyncio.wait_for(closing[0], BOUND)
    assert engine.counts["episodes_started"] == 2
    assert engine.metrics()["gem/async/in_flight"] == 0.0
    assert _accounted(engine) == engine.counts["episodes_started"]
    batch = await _restarted_batch(engine)
    assert [t.seed for t in batch] == [0, 1]


# -- 4. a policy updated directly (VersionedPolicy.update) wakes the engine --------------------------------------


async def test_next_batch_returns_after_the_policy_is_updated_directly(tiny_tokenizer, scripted_env):
    """policy.update() (VersionedPolicy's documented way) instead of engine.update_policy(): admission read the new
    version, but nothing woke the producer, so next_batch() waited for ever (max_staleness=0, one episode a batch)."""
    config = AsyncRolloutConfig(batch_size=1, max_staleness=0, max_in_flight=1)
    policy = VersionedPolicy(ScriptedPolicy(tiny_tokenizer, ["go"]))
    async with AsyncEpisodeEngine(lambda: scripted_env(rewards=[1.0]), policy, tiny_tokenizer, range(100), config) as engine:
        batches = [await asyncio.wait_for(engine.next_batch(), BOUND)]
        for _ in range(2):
            await asyncio.sleep(0.02)  # the producer waits for the update (admission, max_staleness=0)
            await policy.update()
            batches.append(await asyncio.wait_for(engine.next_batch(), BOUND))
    assert [[t.oldest_version for t in batch] for batch in batches] == [[0], [1], [2]]


async def test_an_engine_closed_stops_listening_to_its_policy(tiny_tokenizer, scripted_env):
    """The engine's wake-up on a policy update ends with the engine: the policy outlives it."""
    policy = VersionedPolicy(ScriptedPolicy(tiny_tokenizer, ["go"]))
    async with AsyncEpisodeEngine(lambda: scripted_env(rewards=[1.0]), policy, tiny_tokenizer, range(3)):
        assert len(policy._listeners) == 1
    assert policy._listeners == []
    assert await policy.update() == 1
