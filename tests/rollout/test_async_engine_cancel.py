"""A cancelled ``next_batch`` (``asyncio.wait_for``, a task group) gives back the episodes it had taken."""

from __future__ import annotations

import asyncio

import pytest

from gem_core.rollout.async_engine import AsyncEpisodeEngine, AsyncRolloutConfig
from gem_core.rollout.policy_version import VersionedPolicy
from gem_core.testing import ScriptedPolicy


async def test_a_cancelled_next_batch_loses_no_episode_and_the_next_call_hands_them(tiny_tokenizer, scripted_env):
    """Seeds 0 and 1 finished and were taken into the batch, then the call was cancelled while 2 and 3 played: the two
    were lost, their count kept admission closed, and the next next_batch waited for ever."""
    release = asyncio.Event()

    class HeldEnv(scripted_env):
        def reset(self, *, seed=None, options=None):
            self.seed_played = seed
            return super().reset(seed=seed, options=options)

        async def astep(self, action):
            if self.seed_played >= 2:
                await release.wait()
            return self.step(action)

    config = AsyncRolloutConfig(batch_size=4, max_staleness=0, max_in_flight=8)
    policy = VersionedPolicy(ScriptedPolicy(tiny_tokenizer, ["go"]))
    async with AsyncEpisodeEngine(lambda: HeldEnv(rewards=[1.0]), policy, tiny_tokenizer, range(4), config) as engine:
        waiting = asyncio.create_task(engine.next_batch())
        while engine.counts["episodes_finished"] < 2:
            await asyncio.sleep(0)
        for _ in range(5):  # the call takes seeds 0 and 1 and waits for two more
            await asyncio.sleep(0)
        waiting.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiting
        release.set()
        batch = await asyncio.wait_for(engine.next_batch(), timeout=5)
        metrics = engine.metrics()

    assert sorted(t.seed for t in batch) == [0, 1, 2, 3]
    assert metrics["gem/async/episodes_handed"] == 4 and metrics["gem/async/episodes_finished"] == 4
