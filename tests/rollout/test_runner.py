"""Drive mode (run_episode, run_episodes) and its agreement with driven mode."""

from __future__ import annotations

import pytest
import torch

from gem_core import make
from gem_core.rollout import (
    ChatTemplate,
    EpisodeSession,
    SamplingParams,
    TransformersPolicy,
    run_episode,
    run_episodes,
)
from gem_core.testing import ScriptedPolicy, make_tokenizer


def check_invariants(traj, tokenizer):
    n = len(traj.response_ids)
    assert len(traj.loss_mask) == len(traj.logprobs) == len(traj.token_rewards) == n
    in_spans = [0] * n
    for start, end in traj.turn_spans:
        in_spans[start:end] = [1] * (end - start)
    assert traj.loss_mask == in_spans
    assert all(lp == 0.0 for lp, m in zip(traj.logprobs, traj.loss_mask) if m == 0)
    assert sum(traj.token_rewards) == traj.episode_return or abs(sum(traj.token_rewards) - traj.episode_return) < 1e-9
    assert len(traj.actions) == len(traj.rewards) == traj.num_turns


async def test_transformers_policy_plays_guess_the_number(tiny_tokenizer, tiny_model):
    torch.manual_seed(0)
    policy = TransformersPolicy(tiny_model, tiny_tokenizer)
    env = make("game:GuessTheNumber-v0")
    traj = await run_episode(
        env, policy, tiny_tokenizer, seed=5, max_turns=3, sampling=SamplingParams(max_new_tokens=8), env_id="game:GuessTheNumber-v0"
    )
    check_invariants(traj, tiny_tokenizer)
    assert 1 <= traj.num_turns <= 3 and traj.env_id == "game:GuessTheNumber-v0" and traj.seed == 5
    sampled = [lp for lp, m in zip(traj.logprobs, traj.loss_mask) if m]
    assert sampled and all(lp < 0.0 for lp in sampled)
    assert traj.metrics["has_logprobs"]


async def test_max_total_tokens_bounds_a_model_episode(tiny_tokenizer, tiny_model):
    torch.manual_seed(1)
    policy = TransformersPolicy(tiny_model, tiny_tokenizer)
    env = make("game:GuessTheNumber-v0")
    prompt_len = len(ChatTemplate.for_tokenizer(tiny_tokenizer).initial_ids(env.reset(seed=2)[0]))
    limit = prompt_len + 50
    traj = await run_episode(env, policy, tiny_tokenizer, seed=2, max_total_tokens=limit, sampling=SamplingParams(max_new_tokens=16))
    check_invariants(traj, tiny_tokenizer)
    assert len(traj.prompt_ids) + len(traj.response_ids) <= limit
    assert traj.truncated


async def test_scripted_policy_wins_guess_the_number(tiny_tokenizer):
    env = make("game:GuessTheNumber-v0")
    env.reset(seed=11)
    target = env.unwrapped.target

    def answer_target(prompt_ids):
        return f"\\boxed{{{target}}}"

    traj = await run_episode(make("game:GuessTheNumber-v0"), ScriptedPolicy(tiny_tokenizer, answer_target), tiny_tokenizer, seed=11)
    assert traj.terminated and traj.rewards == [1.0] and traj.metrics["success"]
    assert traj.actions == [f"\\boxed{{{target}}}"]


async def test_run_episodes_keeps_seed_order_and_bounds_concurrency(tiny_tokenizer, scripted_env):
    in_flight = 0
    peak = 0

    class CountingEnv(scripted_env):
        async def astep(self, action):
            nonlocal in_flight, peak
            in_flight += 1
            peak = max(peak, in_flight)
            try:
                return await super().astep(action)
            finally:
                in_flight -= 1

    policy = ScriptedPolicy(tiny_tokenizer, ["x", "y"])
    seeds = [7, 3, 9, 1, 4, 8]
    trajs = await run_episodes(lambda: CountingEnv(rewards=[0.0, 1.0], step_delay=0.01), policy, tiny_tokenizer, seeds, concurrency=2)
    assert [t.seed for t in trajs] == seeds
    assert [t.observations[0] for t in trajs] == [f"start {s}" for s in seeds]
    assert all(t.episode_return == 1.0 for t in trajs)
    assert 1 <= peak <= 2


async def test_run_episodes_from_an_env_id(tiny_tokenizer):
    policy = ScriptedPolicy(tiny_tokenizer, ["\\boxed{10}", "\\boxed{5}", "\\boxed{15}"])
    trajs = await run_episodes("game:GuessTheNumber-v0", policy, tiny_tokenizer, [0, 1, 2], max_turns=3)
    assert [t.env_id for t in trajs] == ["game:GuessTheNumber-v0"] * 3
    for t in trajs:
        check_invariants(t, tiny_tokenizer)
        assert t.actions == ["\\boxed{10}", "\\boxed{5}", "\\boxed{15}"][: t.num_turns]


async def test_drive_and_driven_modes_give_identical_trajectories(tiny_tokenizer, scripted_env):
    texts = ["\\boxed{3}", "the quick brown fox jumps over the lazy dog", "<think>ok</think> \\boxed{9}"]
    rewards = [0.0, -0.1, 1.0]
    sampling = SamplingParams(max_new_tokens=6)  # the second text is cut by the length limit

    drive = await run_episode(scripted_env(rewards=rewards), ScriptedPolicy(tiny_tokenizer, texts), tiny_tokenizer, seed=4, sampling=sampling)

    policy = ScriptedPolicy(tiny_tokenizer, texts)
    session = EpisodeSession(scripted_env(rewards=rewards), tiny_tokenizer)
    await session.start(seed=4)
    while not session.done:
        gen = await policy.generate(session.context_ids, SamplingParams(max_new_tokens=session.generation_budget(6)))
        await session.step(gen.token_ids, logprobs=gen.logprobs, finish_reason=gen.finish_reason)
    driven = session.trajectory()

    assert drive == driven
    assert drive.num_turns == 3 and drive.rewards == rewards
    assert sum(drive.loss_mask) < sum(len(tiny_tokenizer.encode(t, add_special_tokens=False)) + 1 for t in texts)


@pytest.mark.parametrize(
    ("env_id", "texts"),
    [
        ("game:Wordle-v0", ["\\boxed{crane}", "not a guess", "\\boxed{slate}", "\\boxed{audio}"]),
        ("game:GuessTheNumber-v0", ["\\boxed{10}", "\\boxed{5}", "\\boxed{15}", "\\boxed{12}"]),
    ],
)
@pytest.mark.parametrize("template", ["chatml", "llama3"])
async def test_drive_and_driven_agree_on_registered_games(env_id, texts, template):
    tokenizer = make_tokenizer(template)
    sampling = SamplingParams(max_new_tokens=8)
    drive = await run_episode(make(env_id), ScriptedPolicy(tokenizer, texts), tokenizer, seed=21, max_turns=4, sampling=sampling, env_id=env_id)

    policy = ScriptedPolicy(tokenizer, texts)
    session = EpisodeSession(make(env_id), tokenizer, max_turns=4, env_id=env_id)
    await session.start(seed=21)
    while not session.done:
        gen = await policy.generate(session.context_ids, SamplingParams(max_new_tokens=session.generation_budget(8)))
        await session.step(gen.token_ids, logprobs=gen.logprobs, finish_reason=gen.finish_reason)
    driven = session.trajectory()

    assert drive == driven
    check_invariants(drive, tokenizer)
    assert drive.actions == texts[: drive.num_turns]


async def test_run_labels_plays_each_label_in_order_closes_its_env_and_tells_the_policy_when_it_ends(tiny_tokenizer, monkeypatch):
    """What TRL's rollout_func and oat's actor do with the episode starts of a batch, written once."""
    from gem_core import placement
    from gem_core.rollout import run_labels
    from gem_core.rows import EpisodeLabel

    closed = []
    make_env = placement.make_env

    def tracking_make_env(env_id, **kwargs):
        env = make_env(env_id, **kwargs)
        close = env.close
        env.close = lambda: (closed.append(env_id), close())[1]
        return env

    monkeypatch.setattr(placement, "make_env", tracking_make_env)

    class FinishCountingPolicy(ScriptedPolicy):
        finished = 0

        def episode_finished(self):
            self.finished += 1

    labels = [EpisodeLabel("game:GuessTheNumber-v0", seed, {"max_number": 4}) for seed in (5, 1, 3)]
    policy = FinishCountingPolicy(tiny_tokenizer, ["\\boxed{2}", "\\boxed{3}", "\\boxed{4}"])
    trajs = await run_labels(labels, policy, tiny_tokenizer, system_prompts=["Be quick.", None, "Be brief."], max_turns=3)
    assert [(t.env_id, t.seed) for t in trajs] == [(l.env_id, l.seed) for l in labels]
    prompts = [tiny_tokenizer.decode(t.prompt_ids) for t in trajs]
    assert "Be quick." in prompts[0] and "Be" not in prompts[1] and "Be brief." in prompts[2]
    assert len(closed) == 3 and policy.finished == 3
    with pytest.raises(ValueError, match="one system prompt per label"):
        await run_labels(labels, policy, tiny_tokenizer, system_prompts=["x"])


async def test_run_labels_with_a_bad_label_raises_it_and_still_tells_the_policy(tiny_tokenizer):
    from gem_core.rollout import run_labels
    from gem_core.rows.label import LabelError

    class FinishCountingPolicy(ScriptedPolicy):
        finished = 0

        def episode_finished(self):
            self.finished += 1

    policy = FinishCountingPolicy(tiny_tokenizer, ["\\boxed{2}"])
    with pytest.raises(LabelError, match="Nope"):
        await run_labels([{"env_id": "game:Nope-v0", "seed": 0}], policy, tiny_tokenizer)
    assert policy.finished == 1


@pytest.mark.parametrize("concurrency", [2, 6, None])
async def test_run_episodes_cancelled_before_its_episodes_start_still_tells_the_policy_each_one_finished(tiny_tokenizer, concurrency):
    """run_episodes and (concurrency None) run_labels. A task that a cancel reaches before its first step never runs its ``finally``: the episodes of a run cancelled
    at once were never reported finished, so a batching policy built with ``num_episodes`` kept counting them live and
    its next rounds waited for turns that would never come (the policy counted 0 of 6 finished)."""
    import asyncio

    from gem_core.rollout import run_episodes, run_labels
    from gem_core.rows import EpisodeLabel

    class FinishCountingPolicy(ScriptedPolicy):
        finished = 0

        def episode_finished(self):
            self.finished += 1

    policy = FinishCountingPolicy(tiny_tokenizer, ["\\boxed{2}"] * 20)
    if concurrency is None:  # run_labels: every label's episode in flight at once
        labels = [EpisodeLabel("game:GuessTheNumber-v0", seed, {}) for seed in range(6)]
        run = asyncio.ensure_future(run_labels(labels, policy, tiny_tokenizer))
    else:
        run = asyncio.ensure_future(
            run_episodes(lambda: make("game:GuessTheNumber-v0"), policy, tiny_tokenizer, list(range(6)), concurrency=concurrency)
        )
    await asyncio.sleep(0)  # run_episodes made its episodes' tasks and waits for them; none has taken its first step
    run.cancel()
    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(run, 30)
    assert policy.finished == 6


class RecordingPolicy(ScriptedPolicy):
    """Keeps each prompt it was given (the object, and its ids at the time)."""

    def __init__(self, tokenizer, texts, borrows):
        super().__init__(tokenizer, texts)
        self.borrows_prompt_ids = borrows
        self.given: list[tuple[list[int], list[int]]] = []

    async def generate(self, prompt_ids, sampling):
        self.given.append((prompt_ids, list(prompt_ids)))
        return await super().generate(prompt_ids, sampling)


@pytest.mark.parametrize("history", ["as_sampled", "as_rendered"])
async def test_a_policy_that_borrows_the_prompt_is_lent_the_context_and_one_that_keeps_it_gets_its_own_copy(
    tiny_tokenizer, scripted_env, history
):
    """``borrows_prompt_ids`` (issue 46): the runner lends the session's own context list instead of a copy per turn,
    and only to a policy that says it reads the prompt only until its turn is sampled."""
    texts = ["\\boxed{3}", "a longer answer than the first", "\\boxed{9}"]
    rewards = [0.0, -0.1, 1.0]
    trajectories = {}
    for borrows in (False, True):
        policy = RecordingPolicy(tiny_tokenizer, texts, borrows)
        trajectories[borrows] = await run_episode(scripted_env(rewards=rewards), policy, tiny_tokenizer, seed=4, history=history)
        prompts = [kept for kept, _ in policy.given]
        assert len(prompts) == 3
        if borrows and history == "as_sampled":
            assert all(prompt is prompts[0] for prompt in prompts), "a copy per turn"
        else:  # a kept prompt is still what the policy was asked to answer
            assert len({id(prompt) for prompt in prompts}) == 3
            assert [kept for kept, _ in policy.given] == [then for _, then in policy.given]
    assert trajectories[True] == trajectories[False]
    full = trajectories[True].prompt_ids + trajectories[True].response_ids
    if history == "as_sampled":
        assert all(full[: len(then)] == then for _, then in policy.given)


async def test_a_versioned_policy_lends_as_its_backend_does(tiny_tokenizer, tiny_model):
    from gem_core.rollout.policy_version import VersionedPolicy

    assert VersionedPolicy(TransformersPolicy(tiny_model, tiny_tokenizer)).borrows_prompt_ids is True
    assert getattr(VersionedPolicy(ScriptedPolicy(tiny_tokenizer, ["x"])), "borrows_prompt_ids", False) is False


async def test_run_episodes_tells_a_batching_policy_when_each_episode_ends(tiny_tokenizer, scripted_env):
    """With ``num_episodes``, a round waits for every live episode: run_episodes never said an episode had ended,
    so once the short episode was over the long one's next turn waited for it for ever."""
    import asyncio

    from gem_core.rollout.policy import BatchingPolicy

    class Answering(BatchingPolicy):
        def sample_batch(self, prompts, sampling, max_new_tokens):
            ids = tiny_tokenizer.encode("go", add_special_tokens=False) + self.stop_token_ids(sampling)[:1]
            return [(ids, None) for _ in prompts]

    lengths = iter([[1.0], [0.0, 0.0, 1.0]])
    trajectories = await asyncio.wait_for(
        run_episodes(lambda: scripted_env(rewards=next(lengths)), Answering(tiny_tokenizer, num_episodes=2), tiny_tokenizer, [0, 1]),
        timeout=30,
    )
    assert [t.num_turns for t in trajectories] == [1, 3]


async def test_an_episode_that_raises_stops_the_others_before_run_episodes_raises(tiny_tokenizer, scripted_env):
    """asyncio.gather raised the first error and left the other episodes playing: they went on calling the policy
    (a GPU batch no one would read) with their envs open, after run_episodes had returned the error."""
    import asyncio

    opened, closed = [], []

    class FailingAtSeed13(scripted_env):
        def reset(self, *, seed=None, options=None):
            opened.append(seed)
            if seed == 13:
                raise RuntimeError("reset of seed 13 failed")
            return super().reset(seed=seed, options=options)

        def close(self):
            closed.append(self)

    class Slow(ScriptedPolicy):
        calls = 0

        async def generate(self, prompt_ids, sampling):
            Slow.calls += 1
            await asyncio.sleep(0.02)
            return await super().generate(prompt_ids, sampling)

    with pytest.raises(RuntimeError, match="seed 13"):
        await run_episodes(lambda: FailingAtSeed13(rewards=[0.0] * 50), Slow(tiny_tokenizer, ["a"]), tiny_tokenizer, [1, 2, 3, 13])
    calls = Slow.calls
    await asyncio.sleep(0.2)
    assert Slow.calls == calls, "episodes went on playing after run_episodes raised"
    assert len(closed) == len(opened) == 4
    assert [t for t in asyncio.all_tasks() if t is not asyncio.current_task()] == []
