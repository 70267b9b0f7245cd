"""TransformersPolicy and the Generation record."""

from __future__ import annotations

import pytest
import torch

from gem_core.rollout import ChatTemplate, Generation, SamplingParams, TransformersPolicy


def prompt_of(tokenizer):
    return ChatTemplate.for_tokenizer(tokenizer).initial_ids("Guess a number between 1 and 20.")


def model_logprobs(model, prompt, new_ids, temperature=1.0):
    """Log-probs of ``new_ids`` recomputed with one forward pass over the whole sequence."""
    ids = torch.tensor([prompt + new_ids])
    with torch.no_grad():
        logits = model(ids).logits[0, len(prompt) - 1 : -1].float() / temperature
    return torch.log_softmax(logits, -1).gather(1, torch.tensor(new_ids).unsqueeze(1)).squeeze(1).tolist()


async def test_greedy_logprobs_match_a_forward_pass(tiny_tokenizer, tiny_model):
    policy = TransformersPolicy(tiny_model, tiny_tokenizer)
    prompt = prompt_of(tiny_tokenizer)
    gen = await policy.generate(prompt, SamplingParams(max_new_tokens=6, temperature=0.0, stop_token_ids=[]))
    assert gen.finish_reason == "length" and len(gen.token_ids) == 6
    assert gen.logprobs == pytest.approx(model_logprobs(tiny_model, prompt, gen.token_ids), abs=1e-4)


async def test_sampled_logprobs_use_the_temperature(tiny_tokenizer, tiny_model):
    torch.manual_seed(0)
    policy = TransformersPolicy(tiny_model, tiny_tokenizer)
    prompt = prompt_of(tiny_tokenizer)
    gen = await policy.generate(prompt, SamplingParams(max_new_tokens=5, temperature=0.7, stop_token_ids=[]))
    assert gen.logprobs == pytest.approx(model_logprobs(tiny_model, prompt, gen.token_ids, temperature=0.7), abs=1e-4)


async def test_stop_token_ends_the_generation_and_is_kept(tiny_tokenizer, tiny_model):
    policy = TransformersPolicy(tiny_model, tiny_tokenizer)
    prompt = prompt_of(tiny_tokenizer)
    greedy = await policy.generate(prompt, SamplingParams(max_new_tokens=4, temperature=0.0, stop_token_ids=[]))
    stop_at = greedy.token_ids[1]
    gen = await policy.generate(prompt, SamplingParams(max_new_tokens=4, temperature=0.0, stop_token_ids=[stop_at]))
    first_stop = greedy.token_ids.index(stop_at)
    assert gen.token_ids == greedy.token_ids[: first_stop + 1]
    assert gen.finish_reason == "stop" and len(gen.logprobs) == len(gen.token_ids)


async def test_default_stop_ids_are_eos_and_end_of_turn(tiny_tokenizer, tiny_model):
    policy = TransformersPolicy(tiny_model, tiny_tokenizer)
    stop = policy.stop_token_ids(SamplingParams())
    assert ChatTemplate.for_tokenizer(tiny_tokenizer).end_of_turn_ids[0] in stop
    assert tiny_tokenizer.eos_token_id in stop


async def test_the_runner_and_the_policies_stop_a_turn_at_the_same_ids(tiny_tokenizer, tiny_model):
    import gem_core
    from gem_core.rollout.policy import default_stop_token_ids
    from gem_core.rollout.runner import _with_stop_tokens
    from gem_core.rollout.session import EpisodeSession

    session = EpisodeSession(gem_core.make("game:GuessTheNumber-v0"), tiny_tokenizer)
    runner_stop = _with_stop_tokens(session, None).stop_token_ids
    policy_stop = TransformersPolicy(tiny_model, tiny_tokenizer).stop_token_ids(SamplingParams())
    assert runner_stop == policy_stop == default_stop_token_ids(tiny_tokenizer, session.chat_template)


async def test_zero_budget_samples_nothing(tiny_tokenizer, tiny_model):
    gen = await TransformersPolicy(tiny_model, tiny_tokenizer).generate([1, 2], SamplingParams(max_new_tokens=0))
    assert gen.token_ids == [] and gen.finish_reason == "length"


def test_generation_rejects_misaligned_logprobs():
    with pytest.raises(ValueError, match="one logprob per sampled token"):
        Generation(token_ids=[1, 2], logprobs=[-1.0], finish_reason="stop")
    with pytest.raises(ValueError, match="finish_reason"):
        Generation(token_ids=[1], logprobs=None, finish_reason="eos")


def test_importing_rollout_does_not_import_torch():
    import subprocess
    import sys

    code = "import sys, gem_core.rollout; print('torch' in sys.modules or 'transformers' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


async def test_concurrent_requests_share_one_batch_and_match_one_at_a_time(tiny_tokenizer, tiny_model):
    """Left-padded batching must not change what a prompt samples (greedy) nor its logprobs."""
    import asyncio

    template = ChatTemplate.for_tokenizer(tiny_tokenizer)
    prompts = [template.initial_ids(text) for text in ("Hi.", "Guess a number between 1 and 20, please.", "Go")]
    budgets = [5, 3, 6]
    calls = []
    real_generate = tiny_model.generate

    def counting_generate(*args, **kwargs):
        calls.append(kwargs["input_ids"].shape[0])
        return real_generate(*args, **kwargs)

    batched = TransformersPolicy(tiny_model, tiny_tokenizer)
    tiny_model.generate = counting_generate
    try:
        together = await asyncio.gather(*(
            batched.generate(p, SamplingParams(max_new_tokens=b, temperature=0.0, stop_token_ids=[]))
            for p, b in zip(prompts, budgets)
        ))
    finally:
        del tiny_model.generate
    assert calls == [3]  # one generate call for the three concurrent turns
    alone = TransformersPolicy(tiny_model, tiny_tokenizer, max_batch_size=1)
    for prompt, budget, gen in zip(prompts, budgets, together):
        single = await alone.generate(prompt, SamplingParams(max_new_tokens=budget, temperature=0.0, stop_token_ids=[]))
        assert gen.token_ids == single.token_ids and len(gen.token_ids) == budget
        assert gen.logprobs == pytest.approx(model_logprobs(tiny_model, prompt, gen.token_ids), abs=1e-4)


async def test_a_failing_model_fails_every_waiting_request(tiny_tokenizer, tiny_model):
    import asyncio

    class Broken:
        device = "cpu"

        def generate(self, **kwargs):
            raise RuntimeError("out of memory")

    policy = TransformersPolicy(Broken(), tiny_tokenizer)
    results = await asyncio.gather(
        *(policy.generate([1, 2, 3], SamplingParams(max_new_tokens=2)) for _ in range(3)), return_exceptions=True
    )
    assert all(isinstance(r, RuntimeError) for r in results)


class ScriptedBatchPolicy:
    """A BatchingPolicy backend that answers every prompt with the same ids and records each call's size."""

    def __new__(cls, answer, **kwargs):
        from gem_core.rollout.policy import BatchingPolicy

        class Scripted(BatchingPolicy):
            def sample_batch(self, prompts, sampling, max_new_tokens):
                self.calls.append(len(prompts))
                return [(list(answer), [-1.0] * len(answer)) for _ in prompts]

        policy = Scripted(**kwargs)
        policy.calls = []
        return policy


async def test_batching_policy_waits_for_every_live_episode_and_cuts_each_sample_once():
    """With num_episodes a round goes out only when every live episode waits, however slow their envs are."""
    import asyncio

    policy = ScriptedBatchPolicy([5, 6, 9, 7, 8], num_episodes=3)
    sampling = SamplingParams(max_new_tokens=4, stop_token_ids=[9])

    async def episode(turns: int, env_delay: float) -> list[Generation]:
        out = []
        for _ in range(turns):
            out.append(await policy.generate([1, 2], sampling))
            await asyncio.sleep(env_delay)  # a slow env step would split the round under a tick-based flush
        policy.episode_finished()
        return out

    results = await asyncio.gather(episode(1, 0.0), episode(2, 0.05), episode(3, 0.01))
    assert policy.calls == [3, 2, 1]
    for generation in (g for run in results for g in run):
        assert generation.token_ids == [5, 6, 9] and generation.logprobs == [-1.0] * 3
        assert generation.finish_reason == "stop"


async def test_batching_policy_cuts_at_the_request_budget():
    policy = ScriptedBatchPolicy([5, 6, 7, 8])
    short = await policy.generate([1], SamplingParams(max_new_tokens=2, stop_token_ids=[9]))
    assert short.token_ids == [5, 6] and short.finish_reason == "length"
