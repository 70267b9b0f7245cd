"""KV reuse with the caller's generate keywords and the model's cache settings, and the cache bounds' checks.

Each test names what went wrong before its fix."""

from __future__ import annotations

import copy

import pytest

from gem_core.errors import InvalidArgument
from gem_core.rollout import ChatTemplate, SamplingParams, TransformersPolicy


def _second_turn(tokenizer, model, kv_cache_sequences: int, stop: list[int], **policy_kwargs) -> tuple[list[list[int]], int]:
    """Turn 2 of an episode batched with a new one of the same length (no pads without reuse): greedy ids, cache hits."""
    template = ChatTemplate.for_tokenizer(tokenizer)
    policy = TransformersPolicy(model, tokenizer, kv_cache_sequences=kv_cache_sequences, **policy_kwargs)
    first = template.initial_ids("Hi.")
    (turn, _), = policy.sample_batch([first], SamplingParams(max_new_tokens=1, temperature=0.0, stop_token_ids=stop), 1)
    continued = first + turn + template.close_turn_ids() + template.observation_ids("again")
    new = (template.initial_ids("Play Wordle: five letters, six tries, go now please ok") * 5)[: len(continued)]
    sampling = SamplingParams(max_new_tokens=4, temperature=0.0, stop_token_ids=stop)
    return [ids for ids, _ in policy.sample_batch([continued, new], sampling, 4)], policy.kv_cache.hits


def test_a_processor_that_reads_the_context_sees_the_same_context_with_reuse(tiny_tokenizer, tiny_model):
    """The reuse layout puts pads between a row's cached prefix and its new tokens, and in front of rows that need
    none without reuse; a repetition penalty (the TRL adapter passes GRPOConfig's) counted them as context. With the
    stop id as the pad (a tokenizer without one), the end of turn was penalized: greedy ids differed from a full
    prefill's ([505, 358, 704, 650] against a first id that stops)."""
    tokenizer = copy.deepcopy(tiny_tokenizer)
    tokenizer.pad_token = None  # the policy pads with the stop id
    kwargs = {"generate_kwargs": {"repetition_penalty": 5.0}}
    probe, _ = _second_turn(tokenizer, tiny_model, 0, [0], **kwargs)
    stop = [probe[0][0]]  # the id a full prefill picks first is the stop id, and so the pad
    full, _ = _second_turn(tokenizer, tiny_model, 0, stop, **kwargs)
    reused, _ = _second_turn(tokenizer, tiny_model, 256, stop, **kwargs)
    assert reused == full


def test_reuse_still_serves_processors_that_read_only_the_scores(tiny_tokenizer, tiny_model):
    """min_p reads the scores alone: reuse stays on."""
    _, hits = _second_turn(tiny_tokenizer, tiny_model, 256, [tiny_tokenizer.eos_token_id], generate_kwargs={"min_p": 0.1})
    assert hits >= 1


def test_a_models_cache_implementation_does_not_break_reused_turns(tiny_tokenizer, tiny_model):
    """A model whose generation_config sets cache_implementation worked without reuse, and every reused turn failed
    with transformers' "Passing both cache_implementation and cache" ValueError."""
    model = copy.deepcopy(tiny_model)
    model.generation_config.cache_implementation = "static"
    template = ChatTemplate.for_tokenizer(tiny_tokenizer)
    sampling = SamplingParams(max_new_tokens=4, temperature=0.0, stop_token_ids=[])
    policy = TransformersPolicy(model, tiny_tokenizer)
    prompt = template.initial_ids("Hi.")
    (turn, _), = policy.sample_batch([prompt], sampling, 4)
    (second, _), = policy.sample_batch([prompt + turn + template.close_turn_ids() + template.observation_ids("again")], sampling, 4)
    assert policy.kv_cache.hits == 1 and len(second) == 4


def test_cache_implementation_is_refused_in_generate_kwargs(tiny_tokenizer, tiny_model):
    with pytest.raises(InvalidArgument, match="cache_implementation"):
        TransformersPolicy(tiny_model, tiny_tokenizer, generate_kwargs={"cache_implementation": "static"})


@pytest.mark.parametrize(("name", "value"), [("kv_cache_sequences", "256"), ("kv_cache_tokens", None),
                                             ("kv_cache_tokens", float("nan")), ("kv_cache_sequences", True), ("kv_cache_tokens", -1)])
def test_cache_bounds_that_are_not_whole_numbers_are_refused_by_name(tiny_tokenizer, tiny_model, name, value):
    """A text or None bound raised a raw TypeError; NaN was taken and turned reuse off in silence."""
    with pytest.raises(InvalidArgument, match=name):
        TransformersPolicy(tiny_model, tiny_tokenizer, **{name: value})
