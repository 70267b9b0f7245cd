"""TransformersPolicy's sampled-token log-probs: taken during sampling, equal to the full-logits computation."""

from __future__ import annotations

import asyncio

import pytest
import torch

from gem_core.rollout import ChatTemplate, SamplingParams, TransformersPolicy
from gem_core.rollout.policy import SampledLogprobs


def prompts_of(tokenizer):
    template = ChatTemplate.for_tokenizer(tokenizer)
    return [template.initial_ids(text) for text in ("Guess a number between 1 and 20.", "Hi.", "Play Wordle: five letters, six tries.")]


def full_logits_reference(model, tokenizer, prompts, sampling: SamplingParams, seed: int):
    """The old path: ask generate for every step's raw logits, log-softmax them all, pick the sampled ids."""
    pad = tokenizer.pad_token_id
    width = max(map(len, prompts))
    input_ids = torch.tensor([[pad] * (width - len(p)) + p for p in prompts])
    attention_mask = torch.tensor([[0] * (width - len(p)) + [1] * len(p) for p in prompts])
    greedy = sampling.temperature <= 0
    kwargs = dict(temperature=None, top_p=None, top_k=None) if greedy else dict(
        temperature=sampling.temperature, top_p=sampling.top_p, top_k=sampling.top_k)
    torch.manual_seed(seed)
    with torch.no_grad():
        out = model.generate(input_ids=input_ids, attention_mask=attention_mask, max_new_tokens=sampling.max_new_tokens,
                             do_sample=not greedy, eos_token_id=sampling.stop_token_ids or None, pad_token_id=pad,
                             output_logits=True, return_dict_in_generate=True, **kwargs)
    scale = 1.0 if greedy else sampling.temperature
    log_probs = torch.log_softmax(torch.stack(out.logits, dim=1).float() / scale, dim=-1)
    new_ids = out.sequences[:, width:]
    return new_ids.tolist(), log_probs.gather(2, new_ids.unsqueeze(2)).squeeze(2).tolist()


def sample_with_policy(policy, prompts, sampling, seed):
    torch.manual_seed(seed)
    return policy.sample_batch(prompts, sampling, sampling.max_new_tokens)


@pytest.mark.parametrize(
    "sampling",
    [
        SamplingParams(max_new_tokens=12, temperature=0.0, stop_token_ids=[]),
        SamplingParams(max_new_tokens=12, temperature=1.0, stop_token_ids=[]),
        SamplingParams(max_new_tokens=12, temperature=0.7, top_p=0.9, top_k=50, stop_token_ids=[]),
    ],
    ids=["greedy", "t1", "t0.7-top_p-top_k"],
)
def test_sampled_logprobs_give_the_same_ids_and_logprobs_as_the_full_logits_path(tiny_tokenizer, tiny_model, sampling):
    prompts = prompts_of(tiny_tokenizer)
    policy = TransformersPolicy(tiny_model, tiny_tokenizer)
    ids, logprobs = zip(*sample_with_policy(policy, prompts, sampling, seed=3))
    ref_ids, ref_logprobs = full_logits_reference(tiny_model, tiny_tokenizer, prompts, sampling, seed=3)
    assert list(ids) == ref_ids
    for row, ref_row in zip(logprobs, ref_logprobs):
        assert row == pytest.approx(ref_row, abs=1e-5)


def test_sampled_logprobs_match_the_full_logits_path_when_rows_stop_at_different_steps(tiny_tokenizer, tiny_model):
    """Rows that sampled a stop id are padded by generate; their real tokens keep their log-probs."""
    prompts = prompts_of(tiny_tokenizer)
    free = SamplingParams(max_new_tokens=8, temperature=1.0, stop_token_ids=[])
    probe = [ids for ids, _ in sample_with_policy(TransformersPolicy(tiny_model, tiny_tokenizer), prompts, free, seed=0)]
    stop = probe[0][2]  # row 0 stops at its third token (same seed, same draws)
    sampling = SamplingParams(max_new_tokens=8, temperature=1.0, stop_token_ids=[stop])
    got = sample_with_policy(TransformersPolicy(tiny_model, tiny_tokenizer), prompts, sampling, seed=0)
    ref_ids, ref_logprobs = full_logits_reference(tiny_model, tiny_tokenizer, prompts, sampling, seed=0)
    for (ids, logprobs), want_ids, want_logprobs in zip(got, ref_ids, ref_logprobs):
        assert ids == want_ids
        end = ids.index(stop) + 1 if stop in ids else len(ids)
        assert logprobs[:end] == pytest.approx(want_logprobs[:end], abs=1e-5)
    assert got[0][0][: probe[0].index(stop) + 1] == probe[0][: probe[0].index(stop) + 1]
    assert any(stop not in ids for ids, _ in got), "every row stopped: the test no longer mixes lengths"
    assert len(got[0][0]) > probe[0].index(stop) + 1, "the batch ran past row 0's stop (its pads are cut by the caller)"


def test_the_policy_never_asks_generate_for_full_vocabulary_logits(tiny_tokenizer, tiny_model):
    seen: list[dict] = []
    original = tiny_model.generate

    def spy(*args, **kwargs):
        seen.append(dict(kwargs))
        return original(*args, **kwargs)

    tiny_model.generate = spy
    try:
        policy = TransformersPolicy(tiny_model, tiny_tokenizer)
        policy.sample_batch(prompts_of(tiny_tokenizer), SamplingParams(temperature=1.0, stop_token_ids=[]), 4)
    finally:
        del tiny_model.generate
    assert seen and not any(k.get("output_logits") or k.get("output_scores") for k in seen)


async def test_logprobs_false_samples_the_same_ids_and_returns_none(tiny_tokenizer, tiny_model):
    prompt = prompts_of(tiny_tokenizer)[0]
    sampling = SamplingParams(max_new_tokens=6, temperature=1.0, stop_token_ids=[])
    torch.manual_seed(5)
    with_logprobs = await TransformersPolicy(tiny_model, tiny_tokenizer).generate(prompt, sampling)
    torch.manual_seed(5)
    without = await TransformersPolicy(tiny_model, tiny_tokenizer, logprobs=False).generate(prompt, sampling)
    assert without.token_ids == with_logprobs.token_ids and without.logprobs is None
    assert with_logprobs.logprobs is not None and len(with_logprobs.logprobs) == len(with_logprobs.token_ids)


async def test_concurrent_episodes_get_their_own_rows_log_probs(tiny_tokenizer, tiny_model):
    """One batched generate for three requests: each gets the log-probs of its own ids (greedy = one at a time)."""
    prompts = prompts_of(tiny_tokenizer)
    sampling = SamplingParams(max_new_tokens=5, temperature=0.0, stop_token_ids=[])
    policy = TransformersPolicy(tiny_model, tiny_tokenizer)
    together = await asyncio.gather(*(policy.generate(p, sampling) for p in prompts))
    alone = [await TransformersPolicy(tiny_model, tiny_tokenizer).generate(p, sampling) for p in prompts]
    assert [g.token_ids for g in together] == [g.token_ids for g in alone]
    for a, b in zip(together, alone):
        assert a.logprobs == pytest.approx(b.logprobs, abs=1e-4)


def test_sampled_logprobs_refuses_a_nonpositive_temperature_and_an_unused_recorder():
    with pytest.raises(ValueError, match="temperature must be positive"):
        SampledLogprobs(0.0)
    with pytest.raises(RuntimeError, match="passed to generate"):
        SampledLogprobs(1.0).result(torch.zeros((2, 3), dtype=torch.long))
