"""BatchingPolicy rounds: what a request gets does not depend on its batch, and no round waits for an episode that
something outside the policy holds back (a runner's concurrency bound, a weight update's closed gate, a closed loop)."""

from __future__ import annotations

import asyncio

import numpy as np
import pytest
import torch

from gem_core.rollout.policy import BatchingPolicy, Generation, SamplingParams
from gem_core.rollout.policy_version import VersionedPolicy
from gem_core.rollout.runner import run_episodes

#: Longest a test waits for a round: a regression fails in seconds instead of hanging the suite.
BOUND = 5.0


class Scripted(BatchingPolicy):
    """Samples ``row`` (made by ``make_row``, a list by default) for every prompt; counts its calls' batch sizes."""

    def __init__(self, tokenizer=None, row=(5, 6), make_row=list, **kwargs):
        super().__init__(tokenizer, **kwargs)
        self.row, self.make_row, self.calls = list(row), make_row, []

    def sample_batch(self, prompts, sampling, max_new_tokens):
        self.calls.append(len(prompts))
        return [(self.make_row(self.row), None) for _ in prompts]


async def test_default_stop_ids_and_no_stop_ids_are_cut_alike_alone_and_batched(tiny_tokenizer):
    eos = tiny_tokenizer.eos_token_id
    defaults, none = SamplingParams(max_new_tokens=4, stop_token_ids=None), SamplingParams(max_new_tokens=4, stop_token_ids=[])
    alone = [await Scripted(tiny_tokenizer, row=[5, eos, 6, 7]).generate([1, 2], s) for s in (defaults, none)]
    assert [g.token_ids for g in alone] == [[5, eos], [5, eos, 6, 7]]
    for order in ([defaults, none], [none, defaults]):
        policy = Scripted(tiny_tokenizer, row=[5, eos, 6, 7])
        batched = await asyncio.wait_for(asyncio.gather(*(policy.generate([1, 2], s) for s in order)), BOUND)
        expected = alone if order[0] is defaults else alone[::-1]
        assert [(g.token_ids, g.finish_reason) for g in batched] == [(g.token_ids, g.finish_reason) for g in expected]


@pytest.mark.parametrize("make_row", [list, np.array, torch.tensor, lambda row: [torch.tensor(t) for t in row]],
                         ids=["list", "numpy", "torch", "list-of-tensors"])
async def test_a_sample_given_as_an_array_is_cut_at_its_stop_id(make_row):
    policy = Scripted(row=[5, 9, 6, 7], make_row=make_row)
    generation = await asyncio.wait_for(policy.generate([1, 2], SamplingParams(max_new_tokens=4, stop_token_ids=[9])), BOUND)
    assert generation.token_ids == [5, 9] and generation.finish_reason == "stop"
    assert all(type(t) is int for t in generation.token_ids)


async def test_a_drain_update_completes_while_an_episode_waits_at_its_closed_gate():
    """Episode A waits for its round, which counted on B; B waits at the gate the update closed; the update waits for
    A: each waited on the next. The gate now tells the batcher it holds B back, so A's round goes out alone."""
    backend = Scripted(num_episodes=2, row=[5, 9])
    policy = VersionedPolicy(backend)
    sampling = SamplingParams(max_new_tokens=2, stop_token_ids=[9])
    gate_closed = asyncio.Event()

    async def episode(prompt: list[int], turns: int, late: bool) -> list[Generation]:
        if late:
            await gate_closed.wait()
        out = [await policy.generate(prompt, sampling) for _ in range(turns)]
        policy.episode_finished()
        return out

    async def update() -> int:
        await asyncio.sleep(0.01)  # A has asked and waits for B
        task = asyncio.ensure_future(policy.update(lambda: None, interrupt=False))
        await asyncio.sleep(0)
        gate_closed.set()
        return await task

    a, b, version = await asyncio.wait_for(asyncio.gather(episode([1, 2], 2, False), episode([1, 3], 2, True), update()), BOUND)
    assert version == 1
    assert [g.versions for g in a] == [[0, 0], [1, 1]] and [g.versions for g in b] == [[1, 1], [1, 1]]
    assert backend.calls == [1, 2, 1]  # A alone before the update; then A and B together; B's last turn alone


async def test_a_drain_update_during_run_episodes_completes(tiny_tokenizer, scripted_env):
    """The same through the episode loop: the episodes that ask while the update drains wait at the gate."""
    answer = tiny_tokenizer.encode("ok") + [tiny_tokenizer.eos_token_id]
    backend = Scripted(tiny_tokenizer, row=answer, num_episodes=3)
    policy = VersionedPolicy(backend)

    async def update_midway() -> int:
        # After the first round two episodes ask again at once; the third's env step sleeps: their round waits for it.
        while not (backend.calls and policy.in_flight == 2):
            await asyncio.sleep(0.001)
        return await policy.update(lambda: None, interrupt=False)

    def env_of_seed():
        delays = iter([0.0, 0.0, 0.05])
        return lambda: scripted_env(rewards=[0.0, 0.0, 1.0], step_delay=next(delays))

    run = run_episodes(env_of_seed(), policy, tiny_tokenizer, range(3))
    trajectories, version = await asyncio.wait_for(asyncio.gather(run, update_midway()), BOUND)
    assert version == 1 and all(t.num_turns == 3 for t in trajectories)
    assert sum(backend.calls) == 9


def test_a_policy_left_serving_by_a_closed_loop_serves_the_next_loop():
    """The first loop ends while its round's server task was made but never ran (cancelled before its first step, so
    its ``finally`` never cleared the serving state): every later generate waited for a server that would never run."""
    policy = Scripted(sample_in_thread=False)
    sampling = SamplingParams(max_new_tokens=2, stop_token_ids=[])

    async def first() -> None:
        asyncio.ensure_future(policy.generate([1, 2], sampling))  # runs in the loop's last iteration
        raise RuntimeError("the run fails")

    with pytest.raises(RuntimeError, match="the run fails"):
        asyncio.run(first())

    async def second() -> Generation:
        return await asyncio.wait_for(policy.generate([1, 2], sampling), BOUND)

    assert asyncio.run(second()).token_ids == [5, 6]
    assert policy.calls == [1]  # the closed loop's request was dropped, not sampled for nobody


def test_a_policy_with_num_episodes_left_by_a_closed_loop_waits_only_for_the_new_loops_episodes():
    policy = Scripted(num_episodes=2, sample_in_thread=False)
    sampling = SamplingParams(max_new_tokens=2, stop_token_ids=[])

    async def first() -> None:
        asyncio.ensure_future(policy.generate([1, 2], sampling))
        raise RuntimeError("the run fails")

    with pytest.raises(RuntimeError):
        asyncio.run(first())

    async def second() -> list[Generation]:
        one = asyncio.ensure_future(policy.generate([1, 2], sampling))
        await asyncio.sleep(0.01)
        assert not one.done()  # the dead loop's request does not stand in for the second episode
        return await asyncio.wait_for(asyncio.gather(one, policy.generate([1, 3], sampling)), BOUND)

    assert [g.token_ids for g in asyncio.run(second())] == [[5, 6], [5, 6]]
    assert policy.calls == [2]


@pytest.mark.parametrize(("seeds", "concurrency"), [(4, 2), (5, 2), (70, 64)])
async def test_run_episodes_with_num_episodes_past_its_concurrency_runs_every_episode(tiny_tokenizer, scripted_env, seeds, concurrency):
    """The runner's concurrency bound held back episodes whose turns every round waited for."""
    answer = tiny_tokenizer.encode("ok") + [tiny_tokenizer.eos_token_id]
    policy = Scripted(tiny_tokenizer, row=answer, num_episodes=seeds)
    run = run_episodes(lambda: scripted_env(rewards=[0.0, 1.0]), policy, tiny_tokenizer, range(seeds), concurrency=concurrency)
    trajectories = await asyncio.wait_for(run, BOUND * 2)
    assert [t.seed for t in trajectories] == list(range(seeds)) and all(t.num_turns == 2 for t in trajectories)
    # Every round waits for every episode the bound lets run: full rounds of `concurrency`, however the envs step.
    assert max(policy.calls) == concurrency and sum(policy.calls) == 2 * seeds
    assert policy.calls[0] == concurrency


def test_holding_back_episodes_refuses_a_bad_count_and_a_release_past_the_held():
    from gem_core.errors import InvalidArgument, UsageError

    policy = Scripted(num_episodes=3)
    for bad in (-1, 1.5, True, "2"):
        with pytest.raises(InvalidArgument, match="episodes_held"):
            policy.episodes_held(bad)
    policy.episodes_held(2)
    with pytest.raises(UsageError, match="with 2 held"):
        policy.episodes_released(3)
    policy.episodes_released(2)
