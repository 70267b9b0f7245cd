"""Asynchronous rollouts: version tags on every token, the staleness bound, interrupt and resume."""

from __future__ import annotations

import asyncio
import itertools

import pytest

from gem_core.rollout import ChatTemplate, Generation, SamplingParams, run_episode
from gem_core.rollout.async_engine import (
    AsyncEpisodeEngine, AsyncRolloutConfig, AsyncRolloutConfigError, AsyncRolloutOrderError, EnvStartError,
)
from gem_core.rollout.policy_version import VersionedPolicy
from gem_core.rollout.trajectory_io import trajectory_from_record, trajectory_to_record
from gem_core.testing import ScriptedPolicy


def turn_versions(trajectory):
    return [trajectory.token_versions[start:end] for start, end in trajectory.turn_spans]


class HeldPolicy:
    """A scripted policy whose weights a test swaps, and whose generation can be held in flight.

    While ``hold`` is True, a generation after the first waits (like a long sample) until it is
    aborted; :meth:`swap` (the "weight load") installs new scripted texts and stops holding.
    """

    def __init__(self, tokenizer, actions):
        self.tokenizer = tokenizer
        self.scripted = ScriptedPolicy(tokenizer, actions)
        self.hold = True
        self.holding = asyncio.Event()
        self.calls = 0

    async def generate(self, prompt_ids, sampling):
        self.calls += 1
        if self.hold and self.calls > 1:
            self.holding.set()
            await asyncio.Event().wait()  # until the update aborts it
        return await self.scripted.generate(prompt_ids, sampling)

    def swap(self, actions):
        self.scripted = ScriptedPolicy(self.tokenizer, actions)
        self.hold = False


async def test_weight_update_mid_episode_shows_two_versions_in_one_trajectory(tiny_tokenizer, scripted_env):
    policy = VersionedPolicy(ScriptedPolicy(tiny_tokenizer, ["one", "two", "three"]))

    class UpdatingEnv(scripted_env):
        async def astep(self, action):
            if self.turn == 0:  # the trainer updates the weights between turn 1 and turn 2
                await policy.update()
            return self.step(action)

    trajectory = await run_episode(UpdatingEnv(rewards=[0.0, 0.0, 1.0]), policy, tiny_tokenizer, seed=3)

    assert trajectory.num_turns == 3
    assert (trajectory.oldest_version, trajectory.newest_version) == (0, 1)
    first, second, third = turn_versions(trajectory)
    assert first and set(first) == {0} and set(second) == {1} and set(third) == {1}
    assert len(trajectory.token_versions) == len(trajectory.response_ids)
    assert all(v == -1 for v, m in zip(trajectory.token_versions, trajectory.loss_mask) if m == 0)
    assert all(v >= 0 for v, m in zip(trajectory.token_versions, trajectory.loss_mask) if m == 1)
    # The behaviour log-probs sit beside the versions, on the same tokens.
    sampled = [t for t, m in zip(trajectory.response_ids, trajectory.loss_mask) if m]
    assert [lp for lp, m in zip(trajectory.logprobs, trajectory.loss_mask) if m] == [ScriptedPolicy.logprob_of(t) for t in sampled]
    # The JSONL record keeps them.
    again = trajectory_from_record(trajectory_to_record(trajectory))
    assert again.token_versions == trajectory.token_versions and again.oldest_version == 0


async def test_an_unversioned_policy_records_no_versions(tiny_tokenizer, scripted_env):
    trajectory = await run_episode(scripted_env(rewards=[1.0]), ScriptedPolicy(tiny_tokenizer, ["x"]), tiny_tokenizer, seed=0)
    assert trajectory.token_versions == [] and trajectory.oldest_version is None


def test_token_versions_must_align_with_the_response(tiny_tokenizer):
    from gem_core.rollout import TokenTrajectory

    with pytest.raises(ValueError, match="token_versions has 1 entries for 2 response ids"):
        TokenTrajectory(prompt_ids=[1], response_ids=[2, 3], loss_mask=[1, 1], logprobs=[0.0, 0.0], turn_spans=[(0, 2)],
                        rewards=[0.0], terminated=True, truncated=False, token_versions=[0])


def held_env_class(scripted_env, hold_seed: int, release: asyncio.Event):
    """One-turn envs; the first env that resets with ``hold_seed`` waits in its step until ``release``."""

    class HeldEnv(scripted_env):
        held_once = False

        def reset(self, *, seed=None, options=None):
            self.seed_ = seed
            return super().reset(seed=seed, options=options)

        async def astep(self, action):
            if self.seed_ == hold_seed and not HeldEnv.held_once:
                HeldEnv.held_once = True
                await release.wait()
            return self.step(action)

    return HeldEnv


@pytest.mark.parametrize("on_stale", ["drop", "regenerate"])
async def test_an_episode_held_back_past_max_staleness_is_never_handed_to_the_trainer(tiny_tokenizer, scripted_env, on_stale):
    release = asyncio.Event()
    env_class = held_env_class(scripted_env, hold_seed=0, release=release)
    config = AsyncRolloutConfig(batch_size=2, max_staleness=1, max_in_flight=8, on_stale=on_stale)
    policy = VersionedPolicy(ScriptedPolicy(tiny_tokenizer, ["go"]))
    handed = []
    async with AsyncEpisodeEngine(lambda: env_class(rewards=[1.0]), policy, tiny_tokenizer, range(10), config) as engine:
        for _ in range(2):  # two training steps while seed 0 is held (its token is version 0)
            batch = await engine.next_batch()
            handed += batch
            assert all(engine.staleness(t) <= 1 for t in batch)
            await engine.update_policy()
        release.set()  # seed 0 finishes now, 2 versions behind
        while True:
            batch = await engine.next_batch()
            if not batch:
                break
            handed += batch
            assert all(engine.staleness(t) <= 1 for t in batch)
            await engine.update_policy()
        metrics = engine.metrics()

    seeds = [t.seed for t in handed]
    if on_stale == "drop":
        assert 0 not in seeds and sorted(seeds) == list(range(1, 10))
        assert metrics["gem/async/dropped_stale"] == 1 and metrics["gem/async/regenerated_stale"] == 0
    else:
        assert sorted(seeds) == list(range(10))
        replayed = next(t for t in handed if t.seed == 0)
        assert replayed.oldest_version >= 2  # played again with the new weights
        assert metrics["gem/async/regenerated_stale"] == 1 and metrics["gem/async/dropped_stale"] == 0


async def test_the_oldest_finished_episode_is_handed_first_instead_of_going_stale(tiny_tokenizer, scripted_env):
    release = asyncio.Event()
    env_class = held_env_class(scripted_env, hold_seed=0, release=release)
    config = AsyncRolloutConfig(batch_size=1, max_staleness=1, max_in_flight=4)
    policy = VersionedPolicy(ScriptedPolicy(tiny_tokenizer, ["go"]))
    async with AsyncEpisodeEngine(lambda: env_class(rewards=[1.0]), policy, tiny_tokenizer, range(4), config) as engine:
        assert [t.seed for t in await engine.next_batch()] == [1]  # seed 0 is held in its env step
        await engine.update_policy()
        while engine.counts["episodes_finished"] < 2:  # seed 2 (version 1) finishes first
            await asyncio.sleep(0)
        release.set()
        while engine.counts["episodes_finished"] < 3:  # then seed 0 (version 0)
            await asyncio.sleep(0)
        handed = await engine.next_batch()
        metrics = engine.metrics()
    assert [(t.seed, t.oldest_version) for t in handed] == [(0, 0)]  # one version behind: still within the bound
    assert metrics["gem/async/dropped_stale"] == 0


async def test_max_staleness_zero_starts_no_episode_of_the_next_batch_before_the_update(tiny_tokenizer, scripted_env):
    config = AsyncRolloutConfig(batch_size=3, max_staleness=0, max_in_flight=16)
    policy = VersionedPolicy(ScriptedPolicy(tiny_tokenizer, ["go"]))
    async with AsyncEpisodeEngine(lambda: scripted_env(rewards=[1.0]), policy, tiny_tokenizer, range(100), config) as engine:
        batch = await engine.next_batch()
        for _ in range(5):
            await asyncio.sleep(0)
        assert engine.counts["episodes_started"] == 3  # the trainer has not updated: nothing more may start
        with pytest.raises(AsyncRolloutOrderError, match="Call update_policy"):
            await engine.next_batch()
        await engine.update_policy()
        batch = await engine.next_batch()
        assert [t.oldest_version for t in batch] == [1, 1, 1]


async def test_interrupted_turn_resumes_under_the_new_version_stepping_the_env_once(tiny_tokenizer, scripted_env):
    env = scripted_env(rewards=[0.0, 1.0])
    backend = HeldPolicy(tiny_tokenizer, ["old one", "old two"])
    config = AsyncRolloutConfig(batch_size=1, max_staleness=1)
    async with AsyncEpisodeEngine(lambda: env, backend, tiny_tokenizer, [7], config) as engine:
        await backend.holding.wait()  # turn 2 is being sampled with version 0's weights
        assert engine.policy.in_flight == 1 and env.actions_seen == ["old one"]
        await engine.update_policy(lambda: backend.swap(["new one", "new two"]))
        (trajectory,) = await engine.next_batch()
        metrics = engine.metrics()

    # The env was stepped once per action: the aborted turn never reached it.
    assert env.actions_seen == ["old one", "new two"] and env.turn == 2
    assert trajectory.actions == ["old one", "new two"]
    # The resumed turn holds exactly what the new weights sampled, with their version and log-probs.
    eot = ChatTemplate.for_tokenizer(tiny_tokenizer).end_of_turn_ids
    (s1, e1), (s2, e2) = trajectory.turn_spans
    assert trajectory.response_ids[s2:e2] == tiny_tokenizer.encode("new two", add_special_tokens=False) + eot
    assert trajectory.logprobs[s2:e2] == [ScriptedPolicy.logprob_of(t) for t in trajectory.response_ids[s2:e2]]
    assert turn_versions(trajectory) == [[0] * (e1 - s1), [1] * (e2 - s2)]
    # Token for token what a policy that had sampled those two actions gives in one synchronous run.
    plain = await run_episode(scripted_env(rewards=[0.0, 1.0]), ScriptedPolicy(tiny_tokenizer, ["old one", "new two"]), tiny_tokenizer, seed=7)
    assert (trajectory.prompt_ids, trajectory.response_ids) == (plain.prompt_ids, plain.response_ids)
    assert metrics["gem/async/generations_interrupted"] == 1 and metrics["gem/async/version"] == 1


async def test_drain_update_waits_for_the_generation_in_flight_and_keeps_its_version(tiny_tokenizer):
    release = asyncio.Event()

    class Slow:
        async def generate(self, prompt_ids, sampling):
            await release.wait()
            return await ScriptedPolicy(tiny_tokenizer, ["x"]).generate(prompt_ids, sampling)

    policy = VersionedPolicy(Slow())
    generation = asyncio.create_task(policy.generate([1, 2], SamplingParams()))
    await asyncio.sleep(0)
    update = asyncio.create_task(policy.update(interrupt=False))
    await asyncio.sleep(0)
    assert not update.done()  # waiting for the sample in flight
    release.set()
    assert await update == 1
    assert set((await generation).versions) == {0} and policy.interrupted == 0


def test_a_versioned_policy_serves_one_event_loop_after_another():
    class Slow:
        async def generate(self, prompt_ids, sampling):
            await asyncio.sleep(0.001)
            return Generation(token_ids=[5], logprobs=None, finish_reason="stop")

    policy = VersionedPolicy(Slow())

    async def update_while_sampling():
        first = asyncio.create_task(policy.generate([1], SamplingParams()))
        await asyncio.sleep(0)
        update = asyncio.create_task(policy.update())
        await asyncio.sleep(0)
        second = asyncio.create_task(policy.generate([1], SamplingParams()))  # waits at the closed gate
        await asyncio.gather(first, update, second)
        return (await first).versions + (await second).versions

    assert asyncio.run(update_while_sampling()) == [0, 1]
    assert asyncio.run(update_while_sampling()) == [1, 2]  # a new loop: was "bound to a different event loop"


async def test_a_second_update_while_one_runs_is_refused(tiny_tokenizer):
    from gem_core.rollout.policy_version import UpdateInProgress

    release = asyncio.Event()
    policy = VersionedPolicy(ScriptedPolicy(tiny_tokenizer, ["x"]))
    first = asyncio.create_task(policy.update(release.wait))
    await asyncio.sleep(0)
    with pytest.raises(UpdateInProgress, match="already running"):
        await policy.update()
    release.set()
    assert await first == 1


def test_config_errors_name_the_field():
    with pytest.raises(AsyncRolloutConfigError, match="max_staleness"):
        AsyncRolloutConfig(max_staleness=-1)
    with pytest.raises(AsyncRolloutConfigError, match="on_stale"):
        AsyncRolloutConfig(on_stale="keep")


async def test_engine_drives_a_transformers_policy_through_weight_updates(tiny_tokenizer, tiny_model):
    import copy

    import torch

    from gem_core.rollout import TransformersPolicy

    torch.manual_seed(0)
    model = copy.deepcopy(tiny_model)
    backend = TransformersPolicy(model, tiny_tokenizer, max_batch_size=8)

    def load_new_weights():
        with backend._lock, torch.no_grad():  # the aborted batch may still be sampling in its thread
            model.lm_head.weight.mul_(1.01)

    config = AsyncRolloutConfig(batch_size=3, max_staleness=1, max_in_flight=4)
    async with AsyncEpisodeEngine("game:GuessTheNumber-v0", backend, tiny_tokenizer, range(100), config,
                                  sampling=SamplingParams(max_new_tokens=8), max_turns=3) as engine:
        batches = []
        for _ in range(3):
            batches.append(await engine.next_batch())
            await engine.update_policy(load_new_weights)
    for step, batch in enumerate(batches):
        assert len(batch) == 3
        for trajectory in batch:
            assert step - 1 <= trajectory.oldest_version <= trajectory.newest_version <= step
            sampled = [lp for lp, m in zip(trajectory.logprobs, trajectory.loss_mask) if m]
            assert sampled and all(lp < 0.0 for lp in sampled)  # the backend's behaviour log-probs


def _seeds_then_error(count):
    """A seed source (a dataset reader) that fails after ``count`` seeds."""
    yield from range(count)
    raise ValueError("the dataset shard is unreadable")


async def test_a_seed_source_that_raises_is_raised_by_next_batch(tiny_tokenizer, scripted_env):
    """The producer task died with the error and nothing woke the trainer: next_batch waited for ever."""
    config = AsyncRolloutConfig(batch_size=4, max_in_flight=4)
    policy = VersionedPolicy(ScriptedPolicy(tiny_tokenizer, ["go"]))
    async with AsyncEpisodeEngine(lambda: scripted_env(rewards=[1.0]), policy, tiny_tokenizer, _seeds_then_error(2), config) as engine:
        with pytest.raises(ValueError, match="unreadable"):
            await asyncio.wait_for(engine.next_batch(), timeout=30)


def _env_failing_at_reset(scripted_env, bad_seeds):
    class FailingAtReset(scripted_env):
        def reset(self, *, seed=None, options=None):
            if bad_seeds is all or seed in bad_seeds:
                raise RuntimeError(f"row {seed} names a file that is gone")
            return super().reset(seed=seed, options=options)

    return FailingAtReset


async def test_an_env_that_cannot_start_loses_its_episode_not_the_run(tiny_tokenizer, scripted_env):
    """One bad row (its env raises at reset) was stored as the engine's error: every later next_batch raised it and
    no episode started again, for a run of thousands of rows."""
    env_class = _env_failing_at_reset(scripted_env, {3})
    config = AsyncRolloutConfig(batch_size=4, max_staleness=0, max_in_flight=4)
    policy = VersionedPolicy(ScriptedPolicy(tiny_tokenizer, ["go"]))
    handed = []
    async with AsyncEpisodeEngine(lambda: env_class(rewards=[1.0]), policy, tiny_tokenizer, range(9), config) as engine:
        for _ in range(2):
            handed += [t.seed for t in await asyncio.wait_for(engine.next_batch(), timeout=30)]
            await engine.update_policy()
        metrics = engine.metrics()
    assert sorted(handed) == [0, 1, 2, 4, 5, 6, 7, 8]
    assert metrics["gem/async/env_start_errors"] == 1


async def test_an_env_that_never_starts_ends_the_run_with_its_error(tiny_tokenizer, scripted_env):
    """An env that fails every reset (a broken config, not a bad row) stops the run with its error rather than
    dropping episodes for ever."""
    env_class = _env_failing_at_reset(scripted_env, all)
    config = AsyncRolloutConfig(batch_size=4, max_in_flight=2)
    policy = VersionedPolicy(ScriptedPolicy(tiny_tokenizer, ["go"]))
    async with AsyncEpisodeEngine(lambda: env_class(rewards=[1.0]), policy, tiny_tokenizer, itertools.count(), config) as engine:
        with pytest.raises(EnvStartError, match="8 episodes in a row") as raised:  # a batch of 4, but at least 8
            await asyncio.wait_for(engine.next_batch(), timeout=30)
    assert "names a file that is gone" in str(raised.value)
