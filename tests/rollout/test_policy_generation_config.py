"""TransformersPolicy samples with its SamplingParams alone: the logits processors a model's ``generation_config`` sets
(Qwen2.5-Instruct ships ``repetition_penalty=1.05``) changed the sampled distribution and the recorded log-probs."""

from __future__ import annotations

import copy

import pytest
import torch

from gem_core.errors import InvalidArgument
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


async def test_the_callers_generate_kwargs_reach_generate_over_the_models_own(tiny_tokenizer, tiny_model):
    """What the caller passes (the TRL adapter passes GRPOConfig.repetition_penalty) applies, over the model's own
    generation_config value, and the log-probs are those after its processor."""
    model = copy.deepcopy(tiny_model)
    model.generation_config.repetition_penalty = 1.05
    seen = []
    real = model.generate

    def generate(*args, **kwargs):
        seen.append(dict(kwargs))
        return real(*args, **kwargs)

    model.generate = generate
    prompt = ChatTemplate.for_tokenizer(tiny_tokenizer).initial_ids("Hi")
    policy = TransformersPolicy(model, tiny_tokenizer, generate_kwargs={"repetition_penalty": 1.7, "no_repeat_ngram_size": 2})
    await policy.generate(prompt, SamplingParams(max_new_tokens=3, stop_token_ids=[]))
    assert seen and seen[0]["repetition_penalty"] == 1.7 and seen[0]["no_repeat_ngram_size"] == 2


@pytest.mark.parametrize("kwargs", [{"temperature": 0.5}, {"max_new_tokens": 3, "num_return_sequences": 2}, {"logits_processor": []}])
def test_generate_kwargs_the_policy_sets_per_call_are_refused_by_name(tiny_tokenizer, tiny_model, kwargs):
    with pytest.raises(InvalidArgument) as err:
        TransformersPolicy(tiny_model, tiny_tokenizer, generate_kwargs=kwargs)
    assert all(key in str(err.value) for key in kwargs) and "SamplingParams" in str(err.value)


@pytest.mark.parametrize("kwargs", [[("repetition_penalty", 1.1)], {1: 2}, "repetition_penalty=1.1"])
def test_generate_kwargs_that_are_not_a_dict_of_names_are_refused(tiny_tokenizer, tiny_model, kwargs):
    with pytest.raises(InvalidArgument, match="give a dict of model.generate keyword names"):
        TransformersPolicy(tiny_model, tiny_tokenizer, generate_kwargs=kwargs)


async def test_generate_kwargs_are_copied_when_given(tiny_tokenizer, tiny_model):
    kwargs = {"repetition_penalty": 1.2}
    policy = TransformersPolicy(tiny_model, tiny_tokenizer, generate_kwargs=kwargs)
    kwargs["temperature"] = 0.1  # set afterwards, past the check: the policy never sees it
    assert policy.generate_kwargs == {"repetition_penalty": 1.2}
