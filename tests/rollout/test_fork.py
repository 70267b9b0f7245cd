"""Same-state turn groups: EpisodeSession.fork, run_branched_episode and their advantages."""

from __future__ import annotations

import numpy as np
import pytest

import gem_core
from gem_core.rollout import EpisodeSession, run_branched_episode, same_state_advantages
from gem_core.testing import ScriptedPolicy


def _ids(tokenizer, text, session):
    return list(tokenizer.encode(text, add_special_tokens=False)) + list(session.chat_template.end_of_turn_ids)


async def _straight(tokenizer, actions, seed):
    """The same moves played in one session from the start, no fork."""
    session = EpisodeSession(gem_core.make("game:GuessTheNumber-v0"), tokenizer)
    await session.start(seed=seed)
    for text in actions:
        if not session.done:
            await session.step(_ids(tokenizer, text, session), logprobs=None)
    return session.trajectory()


async def test_branches_share_the_prefix_differ_after_it_and_each_equals_a_straight_run(tiny_tokenizer):
    session = EpisodeSession(gem_core.make("game:GuessTheNumber-v0"), tiny_tokenizer)
    await session.start(seed=2)
    shared = ["\\boxed{10}", "\\boxed{5}"]
    for text in shared:
        await session.step(_ids(tiny_tokenizer, text, session), logprobs=None)
    prefix = session.context_ids
    continuations = [["\\boxed{15}", "\\boxed{3}"], ["\\boxed{7}", "\\boxed{8}"], ["oops", "\\boxed{2}"]]
    branches = session.fork(len(continuations))
    for branch, texts in zip(branches, continuations):
        for text in texts:
            if not branch.done:
                await branch.step(_ids(tiny_tokenizer, text, branch), logprobs=None)
    assert session.context_ids == prefix and session.num_turns == 2  # the original is untouched
    trajectories = [branch.trajectory() for branch in branches]
    for trajectory, texts in zip(trajectories, continuations):
        full = trajectory.prompt_ids + trajectory.response_ids
        assert full[: len(prefix)] == prefix
        assert trajectory.metrics["fork_turn"] == 2
        reference = await _straight(tiny_tokenizer, shared + texts, seed=2)
        # Token-exact: the branch is the episode a straight run of the same moves gives.
        for field in ("prompt_ids", "response_ids", "loss_mask", "turn_spans", "rewards", "observations", "terminated", "truncated"):
            assert getattr(trajectory, field) == getattr(reference, field), field
    tails = [tuple((t.prompt_ids + t.response_ids)[len(prefix):]) for t in trajectories]
    assert len(set(tails)) == len(tails)


async def test_fork_before_start_or_with_no_branches_is_refused(tiny_tokenizer):
    session = EpisodeSession(gem_core.make("game:GuessTheNumber-v0"), tiny_tokenizer)
    with pytest.raises(RuntimeError, match="before `fork`"):
        session.fork(2)
    await session.start(seed=0)
    with pytest.raises(ValueError, match="positive number of branches"):
        session.fork(0)


async def test_run_branched_episode_plays_one_prefix_then_k_continuations(tiny_tokenizer):
    import random

    rng = random.Random(0)

    class Sampler(ScriptedPolicy):
        """Two out-of-range guesses (the shared prefix, never a win), then random guesses."""

        def text_for(self, prompt_ids):
            if self._turn_index(prompt_ids) < 2:
                return "\\boxed{0}"
            return f"\\boxed{{{rng.randint(1, 20)}}}"

    policy = Sampler(tiny_tokenizer, ["unused"])
    group = await run_branched_episode(
        gem_core.make("game:GuessTheNumber-v0"), policy, tiny_tokenizer, branch_turn=2, num_branches=4, seed=5
    )
    assert len(group) == 4
    played_turns = sum(t.num_turns for t in group) - 3 * 2  # the two shared turns were sampled once
    assert policy.calls == played_turns
    first = group[0].prompt_ids + group[0].response_ids[: group[0].turn_spans[2][0]]
    for trajectory in group:
        assert (trajectory.prompt_ids + trajectory.response_ids)[: len(first)] == first

    advantages = same_state_advantages([t.rewards for t in group], 2, gamma=0.9)
    returns_at_fork = [t.returns(0.9)[2] for t in group]
    for trajectory, advantage, g in zip(group, advantages, returns_at_fork):
        assert list(advantage[:2]) == [0.0, 0.0]
        assert np.allclose(advantage[2:], g - np.mean(returns_at_fork))


def test_same_state_advantages_by_hand():
    # Two branches forked at turn 1: returns from there with gamma 0.5: 0 + 0.5*1 = 0.5 and 0.
    out = same_state_advantages([[0.0, 0.0, 1.0], [0.0, 0.0]], fork_turn=1, gamma=0.5)
    assert [list(a) for a in out] == [[0.0, 0.25, 0.25], [0.0, -0.25]]
    assert [list(a) for a in same_state_advantages([[1.0], [1.0]], 0, 1.0, scale=True)] == [[0.0], [0.0]]
    with pytest.raises(ValueError, match="fork_turn"):
        same_state_advantages([[1.0]], -1, 1.0)


async def test_an_episode_that_ends_before_the_branch_turn_is_one_trajectory(tiny_tokenizer):
    env = gem_core.make("game:GuessTheNumber-v0")
    env.reset(seed=1)
    policy = ScriptedPolicy(tiny_tokenizer, [f"\\boxed{{{env.target}}}"])
    group = await run_branched_episode(gem_core.make("game:GuessTheNumber-v0"), policy, tiny_tokenizer, branch_turn=3, num_branches=4, seed=1)
    assert len(group) == 1 and group[0].terminated and group[0].episode_return == 1.0


async def test_a_spawn_that_fails_closes_the_branches_already_spawned(tiny_tokenizer):
    """fork(n) spawns n envs; when spawn k raises, the k-1 spawned before it were left open (their tools, servers
    and processes held until exit)."""
    closed: list[int] = []
    env = gem_core.make("game:GuessTheNumber-v0")
    real_spawn = env.spawn
    spawned = 0

    def spawn(**kwargs):
        nonlocal spawned
        spawned += 1
        if spawned == 3:
            raise OSError("no room for a third env")
        child = real_spawn(**kwargs)
        number = spawned
        child.close = lambda: closed.append(number)
        return child

    env.spawn = spawn
    session = EpisodeSession(env, tiny_tokenizer)
    await session.start(seed=0)
    with pytest.raises(OSError, match="third env"):
        session.fork(4)
    assert sorted(closed) == [1, 2]


async def test_a_session_that_cannot_be_made_from_a_label_closes_the_env_it_made(tiny_tokenizer, monkeypatch):
    """from_label makes the label's env, then the session; a session keyword refused after the env was made left
    that env open."""
    from gem_core.errors import InvalidArgument
    from gem_core.rollout import session as session_module

    closed: list[str] = []
    real_make = session_module.make_label_env

    def make_and_watch(label):
        env = real_make(label)
        env.close = lambda: closed.append(label.env_id)
        return env

    monkeypatch.setattr(session_module, "make_label_env", make_and_watch)
    with pytest.raises(InvalidArgument):
        EpisodeSession.from_label({"env_id": "game:GuessTheNumber-v0", "seed": 3}, tiny_tokenizer, max_turns=-1)
    assert closed == ["game:GuessTheNumber-v0"]
