"""Self-play with a batching policy: a seat of a turn-based game waits for the other seats' moves, not for the
policy, so a policy whose rounds wait for every episode is refused up front, and each seat's end is told to the
policy as :func:`run_episodes` tells it."""

from __future__ import annotations

import asyncio

import pytest

from gem_core.envs.multi_agent.tic_tac_toe import TicTacToe
from gem_core.errors import InvalidArgument
from gem_core.rollout.policy import BatchingPolicy
from gem_core.rollout.policy_version import VersionedPolicy
from gem_core.rollout.self_play import run_self_play
from gem_core.testing import ScriptedPolicy


def _boxed_five(tokenizer, **kwargs):
    class BoxedFive(BatchingPolicy):
        def sample_batch(self, prompts, sampling, n):
            return [(tokenizer.encode("\\boxed{5}") + [tokenizer.eos_token_id], None) for _ in prompts]

    return BoxedFive(tokenizer, sample_in_thread=False, **kwargs)


@pytest.mark.parametrize("wrap", [lambda p: p, VersionedPolicy, lambda p: {"x": ScriptedPolicy(p.tokenizer, ["\\boxed{1}"]), "o": p}],
                         ids=["one-policy", "versioned", "one-seat"])
async def test_a_batching_policy_that_waits_for_every_episode_is_refused_not_hung(tiny_tokenizer, wrap):
    """num_episodes=2 for the two seats: the policy's round waited for seat o's turn while seat o waited for x's move."""
    policy = wrap(_boxed_five(tiny_tokenizer, num_episodes=2))
    with pytest.raises(InvalidArgument, match="num_episodes=2.*num_episodes=None"):
        await asyncio.wait_for(run_self_play(TicTacToe(), policy, tiny_tokenizer, seed=0, max_turns=3), timeout=5)


async def test_a_batching_policy_without_num_episodes_plays_the_game(tiny_tokenizer):
    played = await asyncio.wait_for(run_self_play(TicTacToe(), _boxed_five(tiny_tokenizer), tiny_tokenizer, seed=0, max_turns=3), timeout=5)
    assert set(played) == {"x", "o"} and all(t.num_turns >= 1 for t in played.values())


async def test_each_seats_end_is_told_to_the_policy(tiny_tokenizer):
    ended = []

    class Counting(ScriptedPolicy):
        def episode_finished(self):
            ended.append(1)

    policies = {"x": Counting(tiny_tokenizer, ["\\boxed{5}"]), "o": Counting(tiny_tokenizer, ["\\boxed{1}"])}
    await asyncio.wait_for(run_self_play(TicTacToe(), policies, tiny_tokenizer, seed=0, max_turns=3), timeout=5)
    assert len(ended) == 2  # once per seat, as run_episodes tells a policy once per episode
