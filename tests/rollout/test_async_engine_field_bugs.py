"""Bugs found in the field in :class:`AsyncEpisodeEngine` and the episode loop it shares with the runner.

Each test names what went wrong before its fix. Every wait is bounded (``asyncio.wait_for``), and a policy that
could spin without yielding to the loop stops itself after a fixed number of calls, so a regression fails
rather than hangs.
"""

from __future__ import annotations

import asyncio

import pytest

from gem_core.errors import InvalidArgument
from gem_core.rollout import run_episode
from gem_core.rollout.async_engine import AsyncEpisodeEngine, AsyncRolloutConfig, AsyncRolloutOrderError
from gem_core.rollout.policy_version import GenerationInterrupted, VersionedPolicy
from gem_core.testing import ScriptedPolicy

BOUND = 30  # seconds any wait here may take before the test fails


async def _until(predicate) -> None:
    """Yield to the loop until ``predicate()`` holds (bounded by the caller's ``wait_for``)."""
    while not predicate():
        await asyncio.sleep(0)


class _SeedEnvMixin:
    """Remembers the seed of its reset (ScriptedEnv does not)."""

    def reset(self, *, seed=None, options=None):
        self.seed_ = seed
        return super().reset(seed=seed, options=options)


# -- 1. the staleness bound holds for episodes taken before an update that came while next_batch filled --------


async def test_an_update_while_next_batch_fills_drops_the_episodes_it_made_too_old(tiny_tokenizer, scripted_env):
    """next_batch checked each episode against the version when it took it into the batch: an update while the
    batch still filled (a trainer that prefetches) let an episode one version past max_staleness=0 through, and
    metrics() reported staleness_max 0 for it."""
    release = asyncio.Event()

    class Env(_SeedEnvMixin, scripted_env):
        async def astep(self, action):
            if self.seed_ == 1:
                await release.wait()
            return self.step(action)

    config = AsyncRolloutConfig(batch_size=2, max_staleness=0, max_in_flight=8)
    policy = VersionedPolicy(ScriptedPolicy(tiny_tokenizer, ["go"]))
    async with AsyncEpisodeEngine(lambda: Env(rewards=[1.0]), policy, tiny_tokenizer, range(10), config) as engine:
        pending = asyncio.create_task(engine.next_batch())
        await asyncio.wait_for(_until(lambda: engine.counts["episodes_finished"] >= 1), BOUND)  # seed 0, version 0
        for _ in range(5):  # next_batch takes it into the batch and waits for the second episode
            await asyncio.sleep(0)
        await engine.update_policy()
        release.set()
        batch = await asyncio.wait_for(pending, BOUND)
        staleness = [engine.staleness(t) for t in batch]
        metrics = engine.metrics()

    assert len(batch) == 2 and all(s <= 0 for s in staleness), [(t.seed, t.oldest_version) for t in batch]
    assert 0 not in [t.seed for t in batch]
    assert metrics["gem/async/dropped_stale"] >= 1
    assert metrics["gem/async/staleness_max"] == max(staleness)  # measured at hand-over


# -- 2. aclose closes the env of an episode still starting ----------------------------------------------------------


async def test_aclose_closes_the_env_of_an_episode_still_resetting(tiny_tokenizer, scripted_env):
    """A cancel during the env's reset skipped `except Exception`: the env (a sandbox booting) was never closed."""
    made, closed = [], []

    class SlowReset(scripted_env):
        def __init__(self, **kwargs):
            super().__init__(**kwargs)
            made.append(self)

        async def areset(self, *, seed=None, options=None):
            await asyncio.Event().wait()  # a reset that outlasts the run

        def close(self):
            closed.append(self)

    config = AsyncRolloutConfig(batch_size=2, max_staleness=0, max_in_flight=2)
    engine = AsyncEpisodeEngine(lambda: SlowReset(rewards=[1.0]), VersionedPolicy(ScriptedPolicy(tiny_tokenizer, ["go"])),
                                tiny_tokenizer, range(10), config)
    await engine.start()
    await asyncio.wait_for(_until(lambda: len(made) == 2), BOUND)
    await asyncio.wait_for(engine.aclose(), BOUND)
    assert len(made) == 2 and sorted(map(id, closed)) == sorted(map(id, made))


async def test_an_episode_session_that_cannot_be_built_closes_the_env_made_for_it(tiny_tokenizer, scripted_env):
    """EpisodeSession(...) refusing the options (the run's error) left the env just made for it open."""
    made, closed = [], []

    class Env(scripted_env):
        get_state = None  # an env whose state cannot be kept: the session refuses record_env_states

        def __init__(self, **kwargs):
            super().__init__(**kwargs)
            made.append(self)

        def close(self):
            closed.append(self)

    config = AsyncRolloutConfig(batch_size=1, max_staleness=0, max_in_flight=1)
    policy = VersionedPolicy(ScriptedPolicy(tiny_tokenizer, ["go"]))
    async with AsyncEpisodeEngine(lambda: Env(rewards=[1.0]), policy, tiny_tokenizer, range(3), config,
                                  record_env_states=True) as engine:
        with pytest.raises(InvalidArgument, match="record_env_states"):
            await asyncio.wait_for(engine.next_batch(), BOUND)
    assert made and sorted(map(id, closed)) == sorted(map(id, made))


# -- 3. next_batch on a closed engine ---------------------------------------------------------------------------------


async def test_next_batch_after_aclose_raises_instead_of_waiting_for_ever(tiny_tokenizer, scripted_env):
    config = AsyncRolloutConfig(batch_size=2, max_staleness=0, max_in_flight=2)
    engine = AsyncEpisodeEngine(lambda: scripted_env(rewards=[1.0], step_delay=0.05),
                                VersionedPolicy(ScriptedPolicy(tiny_tokenizer, ["go"])), tiny_tokenizer, range(10), config)
    await engine.start()
    await engine.aclose()
    with pytest.raises(AsyncRolloutOrderError, match="closed"):
        await asyncio.wait_for(engine.next_batch(), BOUND)


async def test_a_next_batch_waiting_when_aclose_runs_raises(tiny_tokenizer, scripted_env):
    release = asyncio.Event()

    class Held(scripted_env):
        async def astep(self, action):
            await release.wait()
            return self.step(action)

    config = AsyncRolloutConfig(batch_size=2, max_staleness=0, max_in_flight=2)
    engine = AsyncEpisodeEngine(lambda: Held(rewards=[1.0]), VersionedPolicy(ScriptedPolicy(tiny_tokenizer, ["go"])),
                                tiny_tokenizer, range(10), config)
    await engine.start()
    waiting = asyncio.create_task(engine.next_batch())
    await asyncio.wait_for(_until(lambda: engine.counts["episodes_started"] == 2), BOUND)
    await asyncio.sleep(0)
    await engine.aclose()
    with pytest.raises(AsyncRolloutOrderError, match="closed"):
        await asyncio.wait_for(waiting, BOUND)


# -- 4. a backend's kept states are released when the engine stops or cancels an episode -------------------------


class _Releasing(ScriptedPolicy):
    """Records the ids of each ``release_context`` call (a KV-keeping backend frees the episode's states there)."""

    def __init__(self, tokenizer, actions):
        super().__init__(tokenizer, actions)
        self.released: list[list[int]] = []

    def release_context(self, ids):
        self.released.append(list(ids))

    def released_seeds(self) -> list[str]:
        return [self.tokenizer.decode(ids).split("start ")[1][:1] for ids in self.released]


async def test_an_episode_stopped_as_stale_releases_its_kept_states(tiny_tokenizer, scripted_env):
    """The engine plays one turn per _play call, so the states' key (the last prompt and sampled id) was lost
    between turns: an episode stopped as too old never called release_context, and its KV states were held."""
    release = asyncio.Event()

    class Env(_SeedEnvMixin, scripted_env):
        async def astep(self, action):
            if self.seed_ == 0 and self.turn == 0:
                await release.wait()
            return self.step(action)

    backend = _Releasing(tiny_tokenizer, ["go"])
    config = AsyncRolloutConfig(batch_size=1, max_staleness=1, max_in_flight=8)
    async with AsyncEpisodeEngine(lambda: Env(rewards=[0.0, 1.0]), VersionedPolicy(backend), tiny_tokenizer, range(4),
                                  config) as engine:
        for _ in range(2):  # seed 0 is held after its first turn (version 0) while two batches go
            await asyncio.wait_for(engine.next_batch(), BOUND)
            await engine.update_policy()
        release.set()
        await asyncio.wait_for(_until(lambda: engine.counts["stopped_stale_in_flight"] == 1), BOUND)
        released = backend.released_seeds()
    assert "0" in released


async def test_an_episode_cancelled_by_aclose_mid_turn_releases_its_kept_states(tiny_tokenizer, scripted_env):
    """run_episode released a cancelled episode's states; the engine, whose turn-1 key was gone by turn 2, did not."""
    hold = asyncio.Event()

    class Backend(_Releasing):
        waiting = False

        async def generate(self, prompt_ids, sampling):
            if self._turn_index(prompt_ids) == 1:
                self.waiting = True
                await hold.wait()
            return await super().generate(prompt_ids, sampling)

    backend = Backend(tiny_tokenizer, ["go"])
    config = AsyncRolloutConfig(batch_size=1, max_staleness=0, max_in_flight=1)
    engine = AsyncEpisodeEngine(lambda: scripted_env(rewards=[0.0, 1.0]), VersionedPolicy(backend), tiny_tokenizer, [0], config)
    await engine.start()
    await asyncio.wait_for(_until(lambda: backend.waiting), BOUND)
    await asyncio.wait_for(engine.aclose(), BOUND)
    assert backend.released_seeds() == ["0"]


async def test_a_finished_episode_releases_its_states_once(tiny_tokenizer, scripted_env):
    backend = _Releasing(tiny_tokenizer, ["go"])
    config = AsyncRolloutConfig(batch_size=2, max_staleness=0, max_in_flight=2)
    async with AsyncEpisodeEngine(lambda: scripted_env(rewards=[0.0, 0.0, 1.0]), VersionedPolicy(backend), tiny_tokenizer,
                                  range(2), config) as engine:
        batch = await asyncio.wait_for(engine.next_batch(), BOUND)
    assert len(batch) == 2 and sorted(backend.released_seeds()) == ["0", "1"]
    # The key is the last turn's prompt and first sampled id, as run_episode gives it.
    plain = _Releasing(tiny_tokenizer, ["go"])
    await run_episode(scripted_env(rewards=[0.0, 0.0, 1.0]), plain, tiny_tokenizer, seed=0)
    assert plain.released[0] in backend.released


# -- 5. an interrupted turn of an episode past the bound is not sampled again ----------------------------------


async def test_an_update_that_makes_an_episode_too_old_stops_it_before_its_interrupted_turn_is_resampled(tiny_tokenizer, scripted_env):
    """_play resampled an interrupted turn itself, so the engine's staleness check never ran: the env was stepped for
    a turn of an episode already past the bound (a tool call's side effects), and the episode was dropped after."""
    hold = asyncio.Event()
    steps = []

    class Backend(ScriptedPolicy):
        waiting = False

        async def generate(self, prompt_ids, sampling):
            if self._turn_index(prompt_ids) == 1 and not hold.is_set():
                self.waiting = True
                await hold.wait()
            return await super().generate(prompt_ids, sampling)

    class Env(_SeedEnvMixin, scripted_env):
        def step(self, action):
            steps.append((self.seed_, self.turn + 1))
            return super().step(action)

    backend = Backend(tiny_tokenizer, ["go"])
    config = AsyncRolloutConfig(batch_size=1, max_staleness=0, max_in_flight=1)
    async with AsyncEpisodeEngine(lambda: Env(rewards=[0.0, 1.0]), VersionedPolicy(backend), tiny_tokenizer, [0, 1],
                                  config) as engine:
        await asyncio.wait_for(_until(lambda: backend.waiting), BOUND)  # seed 0 samples turn 2; turn 1 is version 0
        hold.set()
        await engine.update_policy()  # version 1: seed 0 is past max_staleness=0
        batch = await asyncio.wait_for(engine.next_batch(), BOUND)
        counts = dict(engine.counts)
    assert [(t.seed, t.oldest_version) for t in batch] == [(1, 1)]
    assert steps == [(0, 1), (1, 1), (1, 2)]  # seed 0's env never stepped for its second turn
    assert counts["stopped_stale_in_flight"] == 1 and counts["dropped_stale"] == 1


# -- 6. a GenerationInterrupted that no update caused is the policy's error ----------------------------------


class _AlwaysInterrupted:
    """Raises GenerationInterrupted on every call, with no weight update; stops itself after ``LIMIT`` calls so a
    loop that retries it for ever (without yielding, so no ``wait_for`` can fire) fails instead of hanging."""

    LIMIT = 50

    def __init__(self, pause: bool = False):
        self.calls = 0
        self.pause = pause

    async def generate(self, prompt_ids, sampling):
        self.calls += 1
        if self.pause:
            await asyncio.sleep(0)
        if self.calls > self.LIMIT:
            raise AssertionError(f"retried {self.calls} times with no weight update")
        raise GenerationInterrupted(0)


async def test_run_episode_raises_a_generation_interrupted_that_no_update_caused(tiny_tokenizer, scripted_env):
    """The turn was asked again for ever, without an await: the event loop was blocked (wait_for could not fire)."""
    policy = _AlwaysInterrupted()
    with pytest.raises(GenerationInterrupted):
        await asyncio.wait_for(run_episode(scripted_env(rewards=[1.0]), policy, tiny_tokenizer, seed=0), BOUND)
    assert policy.calls <= 2


async def test_the_engine_raises_a_generation_interrupted_that_no_update_caused(tiny_tokenizer, scripted_env):
    backend = _AlwaysInterrupted(pause=True)
    config = AsyncRolloutConfig(batch_size=1, max_staleness=0, max_in_flight=1)
    async with AsyncEpisodeEngine(lambda: scripted_env(rewards=[1.0]), VersionedPolicy(backend), tiny_tokenizer, [0],
                                  config) as engine:
        with pytest.raises(GenerationInterrupted):
            await asyncio.wait_for(engine.next_batch(), BOUND)
        assert engine.version == 0
    assert backend.calls <= 2


class _HeldUntilAborted(ScriptedPolicy):
    """Holds its first ``holds`` generations until an update aborts them (a long sample), then answers."""

    def __init__(self, tokenizer, actions, holds):
        super().__init__(tokenizer, actions)
        self.holds = holds
        self.held = asyncio.Event()

    async def generate(self, prompt_ids, sampling):
        if self.holds:
            self.holds -= 1
            self.held.set()
            await asyncio.Event().wait()  # until the update aborts it
        return await super().generate(prompt_ids, sampling)


async def _abort_twice(policy: VersionedPolicy, backend: _HeldUntilAborted) -> None:
    for _ in range(2):
        await backend.held.wait()
        backend.held.clear()
        await policy.update(interrupt=True)


async def test_a_turn_that_two_updates_interrupt_is_asked_for_again_each_time(tiny_tokenizer, scripted_env):
    """The retry rule must not mistake a second real interrupt of the same turn for a policy's own."""
    backend = _HeldUntilAborted(tiny_tokenizer, ["go"], holds=2)
    policy = VersionedPolicy(backend)
    env = scripted_env(rewards=[1.0])
    updates = asyncio.create_task(_abort_twice(policy, backend))
    trajectory = await asyncio.wait_for(run_episode(env, policy, tiny_tokenizer, seed=0), BOUND)
    await asyncio.wait_for(updates, BOUND)
    assert env.actions_seen == ["go"] and policy.interrupted == 2
    assert set(trajectory.token_versions) - {-1} == {2}


async def test_the_engine_asks_again_for_a_turn_that_two_updates_interrupt(tiny_tokenizer, scripted_env):
    backend = _HeldUntilAborted(tiny_tokenizer, ["go"], holds=2)
    policy = VersionedPolicy(backend)
    env = scripted_env(rewards=[1.0])
    config = AsyncRolloutConfig(batch_size=1, max_staleness=2, max_in_flight=1)
    async with AsyncEpisodeEngine(lambda: env, policy, tiny_tokenizer, [0], config) as engine:
        updates = asyncio.create_task(_abort_twice(policy, backend))
        (trajectory,) = await asyncio.wait_for(engine.next_batch(), BOUND)
        await asyncio.wait_for(updates, BOUND)
    assert env.actions_seen == ["go"] and trajectory.oldest_version == 2


# -- a batching policy counting a fixed set of episodes under an engine that streams them -----------------------


@pytest.mark.parametrize("versioned", [False, True])
async def test_a_batching_policy_built_with_num_episodes_is_refused_by_the_engine(tiny_tokenizer, scripted_env, versioned):
    """The engine streams episodes and never says one ended (BatchingPolicy.episode_finished), so a policy counting
    ``num_episodes`` waited in its first round for episodes that were never coming: next_batch hung for ever."""
    from gem_core.rollout.policy import BatchingPolicy

    class Scripted(BatchingPolicy):
        def sample_batch(self, prompts, sampling, max_new_tokens):
            return [(tiny_tokenizer.encode("go", add_special_tokens=False) + [tiny_tokenizer.eos_token_id], None) for _ in prompts]

    backend = Scripted(tiny_tokenizer, num_episodes=4, sample_in_thread=False)
    policy = VersionedPolicy(backend) if versioned else backend
    with pytest.raises(InvalidArgument, match="num_episodes=4") as err:
        engine = AsyncEpisodeEngine(lambda: scripted_env(rewards=[1.0]), policy, tiny_tokenizer, range(100),
                                    AsyncRolloutConfig(batch_size=2, max_in_flight=2))
        async with engine:  # before the fix: the first round waited for 4 episodes, 2 ever ran
            await asyncio.wait_for(engine.next_batch(), BOUND)
    assert "num_episodes=None" in str(err.value)
