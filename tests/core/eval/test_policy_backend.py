"""gem_core/eval/policy_backend.py: token-level episodes through gem_core.rollout, turned into records."""

from __future__ import annotations

import asyncio

import pytest
from openai_test_server import OpenAITestServer

from gem_core import make
from gem_core.eval import EvalConfig, EvalReport, evaluate, evaluate_async
from gem_core.eval.policy_backend import PolicyBackend, record_from_trajectory
from gem_core.eval.report import EpisodeRecord
from gem_core.rollout import run_episode
from gem_core.testing import ScriptedPolicy

EASY = "game:GuessTheNumber-v0-easy"


@pytest.fixture
def searcher(tiny_tokenizer, binary_search):
    return ScriptedPolicy(tiny_tokenizer, lambda prompt_ids: binary_search(tiny_tokenizer.decode(prompt_ids)))


async def test_record_from_trajectory_counts_tokens_and_rebuilds_the_transcript(tiny_tokenizer, searcher):
    trajectory = await run_episode(make(EASY), searcher, tiny_tokenizer, seed=5, env_id=EASY)
    record = record_from_trajectory(trajectory, EpisodeRecord(env_id=EASY, seed=5))
    assert record.rewards == trajectory.rewards and record.success and record.terminated
    assert record.completion_tokens == sum(trajectory.loss_mask)
    # Turn t's call saw the prompt and all response ids before its span.
    expected_prompt = sum(len(trajectory.prompt_ids) + start for start, _ in trajectory.turn_spans)
    assert record.prompt_tokens == expected_prompt
    roles = [m["role"] for m in record.transcript]
    assert roles == ["user", "assistant"] * record.turns + ["user"]
    assert [m["content"] for m in record.transcript if m["role"] == "assistant"] == trajectory.actions
    assert record.transcript[-1]["content"] == trajectory.final_observation


def test_token_and_http_backends_play_the_same_episodes_for_the_same_seeds(tiny_tokenizer, searcher, binary_search):
    by_policy = evaluate([EASY, "game:GuessTheNumber-v0"], policy=searcher, tokenizer=tiny_tokenizer, episodes=4, seed=11, progress=False)

    def respond(messages):
        return binary_search("\n".join(m["content"] for m in messages))

    with OpenAITestServer(respond=respond) as server:
        by_http = evaluate([EASY, "game:GuessTheNumber-v0"], model="s", base_url=server.base_url, episodes=4, seed=11, progress=False)
    assert by_policy.backend == "transformers" and by_http.backend == "openai-chat"
    for env_id in by_policy.env_ids:
        a, b = by_policy.episodes[env_id], by_http.episodes[env_id]
        assert [(r.seed, r.rewards, r.success) for r in a] == [(r.seed, r.rewards, r.success) for r in b]
        assert [m["content"] for m in a[0].transcript] == [m["content"] for m in b[0].transcript]
        assert by_policy.summary(env_id).success_rate == 1.0


class _BrokenAfter:
    """A policy that answers ``good`` calls, then raises: a backend dying mid-run."""

    def __init__(self, inner, good):
        self.inner, self.good, self.calls = inner, good, 0

    async def generate(self, prompt_ids, sampling):
        self.calls += 1
        if self.calls > self.good:
            raise RuntimeError("CUDA error: device lost")
        return await self.inner.generate(prompt_ids, sampling)


def test_a_policy_that_raises_fails_its_episodes_and_keeps_the_finished_ones(tiny_tokenizer, searcher):
    policy = _BrokenAfter(searcher, good=3)
    report = evaluate(EASY, policy=policy, tokenizer=tiny_tokenizer, episodes=4, max_turns=1, concurrency=1, progress=False)
    records = report.episodes[EASY]
    assert [r.failed for r in records] == [False, False, False, True]
    assert records[3].error == "RuntimeError: CUDA error: device lost"
    assert report.summary(EASY).episodes_completed == 3


async def test_cancelling_a_run_writes_the_partial_report(tiny_tokenizer, searcher, tmp_path):
    release = asyncio.Event()

    class Stalls:
        calls = 0

        async def generate(self, prompt_ids, sampling):
            Stalls.calls += 1
            if Stalls.calls > 2:
                await release.wait()  # never set: the run hangs here until cancelled
            return await searcher.generate(prompt_ids, sampling)

    done = []
    config = EvalConfig(env_ids=[EASY], episodes=5, max_turns=1, concurrency=1, progress=False, out_dir=str(tmp_path))
    backend = PolicyBackend(Stalls(), tiny_tokenizer, model_name="stalls")
    task = asyncio.create_task(evaluate_async(backend, config, on_episode=done.append))

    async def stalled():
        while len(done) < 2 or Stalls.calls < 3:
            await asyncio.sleep(0.01)

    await asyncio.wait_for(stalled(), timeout=120)  # a guard against a hang, not a speed check
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    partial = EvalReport.load(tmp_path)
    assert partial.interrupted
    assert [r.seed for r in partial.episodes[EASY]] == [0, 1]
    assert partial.summary(EASY).episodes_completed == 2 and (tmp_path / "success_and_return.png").exists()


@pytest.mark.parametrize("max_turns", [2, 9])
def test_both_backends_play_the_turn_limit_the_env_is_made_with(tiny_tokenizer, max_turns):
    """One home for the limit: ``make(env_id, max_turns=)``, also above the registered 6 turns, and the
    game's own first message states it (a wrapper cutting a 6-turn game short would not)."""
    wrong = ScriptedPolicy(tiny_tokenizer, lambda prompt_ids: "\\boxed{0}")
    by_policy = evaluate(EASY, policy=wrong, tokenizer=tiny_tokenizer, episodes=2, max_turns=max_turns, progress=False)
    with OpenAITestServer(respond=lambda messages: "\\boxed{0}") as server:
        by_http = evaluate(EASY, model="w", base_url=server.base_url, episodes=2, max_turns=max_turns, progress=False)
    for report in (by_policy, by_http):
        records = report.episodes[EASY]
        assert [(r.turns, r.truncated, r.success) for r in records] == [(max_turns, True, False)] * 2
        assert f"at most {max_turns} turns" in records[0].transcript[0]["content"]
