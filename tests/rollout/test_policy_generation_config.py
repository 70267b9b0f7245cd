"""TransformersPolicy samples with its SamplingParams alone: the logits processors a model's ``generation_config`` sets
(Qwen2.5-Instruct ships ``repetition_penalty=1.05``) changed the sampled distribution and the recorded log-probs."""

from __future__ import annotations

import copy

import pytest
import torch

from gem_core.rollout import ChatTemplate, SamplingParams, TransformersPolicy


def recomputed_logprobs(model, prompt, new_ids, temperature=1.0):
    with torch.no_grad():
        logits = model(torch.tensor([prompt + new_ids])).logits[0, len(prompt) - 1 : -1].float() / temperature
    return torch.log_softmax(logits, -1).gather(1, torch.tensor(new_ids).unsqueeze(1)).squeeze(1).tolist()


@pytest.mark.parametrize("setting", [{"repetition_penalty": 1.3}, {"no_repeat_ngram_size": 1}, {"min_new_tokens": 12},
                                     {"typical_p": 0.2}, {"min_p": 0.5}, {"num_beams": 2}])
async def test_the_models_generation_config_processors_leave_sampling_and_logprobs_alone(tiny_tokenizer, tiny_model, setting):
    model = copy.deepcopy(tiny_model)
    for name, value in setting.items():
        setattr(model.generation_config, name, value)
    prompt = ChatTemplate.for_tokenizer(tiny_tokenizer).initial_ids("Guess a number between 1 and 20.")
    sampling = SamplingParams(max_new_tokens=12, temperature=0.8, stop_token_ids=[tiny_tokenizer.eos_token_id])
    torch.manual_seed(0)
    plain = await TransformersPolicy(tiny_model, tiny_tokenizer).generate(prompt, sampling)
    torch.manual_seed(0)
    generation = await TransformersPolicy(model, tiny_tokenizer).generate(prompt, sampling)
    assert generation.token_ids == plain.token_ids  # the same draws: the distribution is softmax(raw logits / T)
    assert generation.logprobs == pytest.approx(recomputed_logprobs(model, prompt, generation.token_ids, 0.8), abs=1e-4)


async def test_an_explicit_generate_keyword_still_reaches_generate(tiny_tokenizer, tiny_model):
    """A wrapper that adds keywords (the TRL adapter's, for GRPOConfig.repetition_penalty) keeps them, over the
    model's own generation_config value."""
    model = copy.deepcopy(tiny_model)
    model.generation_config.repetition_penalty = 1.05
    seen = []

    class AddsKeywords:
        generate_kwargs = {"repetition_penalty": 1.7, "no_repeat_ngram_size": 2}

        def generate(self, *args, **kwargs):
            seen.append(dict(kwargs))
            return model.generate(*args, **{**self.generate_kwargs, **kwargs})

        def __getattr__(self, name):
            return getattr(model, name)

    prompt = ChatTemplate.for_tokenizer(tiny_tokenizer).initial_ids("Hi")
    await TransformersPolicy(AddsKeywords(), tiny_tokenizer).generate(prompt, SamplingParams(max_new_tokens=3, stop_token_ids=[]))
    assert seen and "repetition_penalty" not in seen[0] and "no_repeat_ngram_size" not in seen[0]
