"""Field bugs of drive mode's policy side: a cancel racing an env thread, one bad prompt failing its whole batch,
sampling settings that crash mid-run, and policy outputs that crashed the run with a raw error or were recorded
as garbage."""

from __future__ import annotations

import asyncio
import math

import numpy as np
import pytest
import torch

from gem_core.errors import GemError, InvalidArgument
from gem_core.rollout import ChatTemplate, Generation, SamplingParams, TransformersPolicy, run_episodes
from gem_core.rollout.policy import BatchingPolicy

WAIT = 20  # seconds: the bound of every wait below (none is expected to come near it)


# -- 1. one malformed prompt in a batching round ----------------------------------------------------------------


def good_prompt(tokenizer):
    return ChatTemplate.for_tokenizer(tokenizer).initial_ids("Hello")


BAD_PROMPTS = {
    "empty": (lambda good: [], "empty"),
    "an id out of the vocabulary": (lambda good: good[:-1] + [10**6], "vocabulary"),
    "a negative id": (lambda good: [-1] + good, "vocabulary"),
}


@pytest.mark.parametrize("case", list(BAD_PROMPTS))
async def test_one_malformed_prompt_fails_only_its_own_request(tiny_tokenizer, tiny_model, case):
    """A bad prompt went into the round's model.generate with the others: every request of the round failed with a
    raw IndexError (an id out of range), or the bad one was sampled from (an empty or over-long prompt)."""
    make_bad, named = BAD_PROMPTS[case]
    good = good_prompt(tiny_tokenizer)
    policy = TransformersPolicy(tiny_model, tiny_tokenizer)
    sampling = SamplingParams(max_new_tokens=3, temperature=0.0)
    results = await asyncio.wait_for(
        asyncio.gather(policy.generate(good, sampling), policy.generate(make_bad(good), sampling), policy.generate(good, sampling),
                       return_exceptions=True),
        WAIT,
    )
    first, bad, last = results
    assert isinstance(bad, InvalidArgument), repr(bad)
    assert named in str(bad) and "TransformersPolicy" in str(bad)
    assert isinstance(first, Generation) and isinstance(last, Generation)
    assert first.token_ids == last.token_ids and len(first.token_ids) >= 1


async def test_a_prompt_with_its_new_tokens_past_learned_positions_fails_only_its_own_request(tiny_tokenizer):
    """GPT-2's positions are a learned table of n_positions rows: a 62-id prompt asking 8 new tokens of a 64-row table
    was admitted (the check left out the new tokens), and its round's generate failed every request with IndexError."""
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(0)
    model = GPT2LMHeadModel(GPT2Config(vocab_size=len(tiny_tokenizer), n_positions=64, n_embd=32, n_layer=1, n_head=2)).eval()
    policy = TransformersPolicy(model, tiny_tokenizer, device="cpu")
    long_prompt = (good_prompt(tiny_tokenizer) * 64)[:62]
    sampling = SamplingParams(max_new_tokens=8, temperature=0.0)
    long, short = await asyncio.wait_for(
        asyncio.gather(policy.generate(long_prompt, sampling), policy.generate(good_prompt(tiny_tokenizer), sampling), return_exceptions=True),
        WAIT,
    )
    assert isinstance(long, InvalidArgument) and "64 positions" in str(long) and "max_total_tokens" in str(long), repr(long)
    assert isinstance(short, Generation) and len(short.token_ids) >= 1


async def test_a_rope_model_samples_after_a_prompt_longer_than_its_configured_positions(tiny_tokenizer):
    """Rotary positions have no table to run past (Qwen2.5 documents YaRN scaling for contexts 4x its configured
    positions): a 100-id prompt on a model configured for 64 was refused, though it samples as before."""
    from transformers import Qwen2Config, Qwen2ForCausalLM

    torch.manual_seed(0)
    config = Qwen2Config(vocab_size=len(tiny_tokenizer), hidden_size=32, intermediate_size=64, num_hidden_layers=1,
                         num_attention_heads=2, num_key_value_heads=1, max_position_embeddings=64)
    policy = TransformersPolicy(Qwen2ForCausalLM(config).eval(), tiny_tokenizer, device="cpu")
    generation = await asyncio.wait_for(
        policy.generate((good_prompt(tiny_tokenizer) * 100)[:100], SamplingParams(max_new_tokens=4, temperature=0.0)), WAIT
    )
    assert isinstance(generation, Generation) and len(generation.token_ids) >= 1


async def test_a_batching_backend_that_declares_its_vocabulary_gets_only_valid_prompts(tiny_tokenizer):
    seen: list[list[int]] = []

    class Backend(BatchingPolicy):
        vocab_size = 50

        def sample_batch(self, prompts, sampling, max_new_tokens):
            seen.extend(list(p) for p in prompts)
            return [([7], None) for _ in prompts]

    policy = Backend(tiny_tokenizer)
    sampling = SamplingParams(max_new_tokens=1, stop_token_ids=[])
    ok, too_big, negative = await asyncio.gather(
        policy.generate([1, 2], sampling), policy.generate([1, 50], sampling), policy.generate([-2, 1], sampling), return_exceptions=True
    )
    assert ok.token_ids == [7]
    assert isinstance(too_big, InvalidArgument) and "50" in str(too_big)
    assert isinstance(negative, InvalidArgument) and "-2" in str(negative)
    assert seen == [[1, 2]]


# -- 2. sampling settings that crashed sampling later -----------------------------------------------------------


@pytest.mark.parametrize(
    "kwargs, field",
    [
        ({"temperature": 1e-300}, "temperature"),
        ({"temperature": 1e-9}, "temperature"),
        ({"stop_token_ids": ["x"]}, "stop_token_ids"),
        ({"stop_token_ids": "x"}, "stop_token_ids"),
        ({"stop_token_ids": 2}, "stop_token_ids"),
        ({"stop_token_ids": [-1]}, "stop_token_ids"),
        ({"stop_token_ids": [True]}, "stop_token_ids"),
        ({"stop_token_ids": [2.0]}, "stop_token_ids"),
        ({"top_k": 2**63}, "top_k"),
        ({"max_new_tokens": 2**63}, "max_new_tokens"),
    ],
)
def test_sampling_params_refuse_values_that_crash_sampling_naming_the_field(kwargs, field):
    """temperature=1e-300 overflowed the logits (a raw RuntimeError from torch's sampler), stop id "x" raised a
    raw ValueError inside generate, a negative stop id never stopped, and 2**63 overflows the 64-bit (vLLM:
    32-bit) integers backends keep these in."""
    with pytest.raises(InvalidArgument, match=f"SamplingParams.{field}"):
        SamplingParams(**kwargs)


def test_sampling_params_keep_what_samples_fine():
    assert SamplingParams(temperature=0).temperature == 0
    assert SamplingParams(temperature=1e-5).temperature == 1e-5
    params = SamplingParams(stop_token_ids=(np.int64(2), 5), top_k=2**31 - 1, max_new_tokens=2**31 - 1)
    assert params.stop_token_ids == [2, 5] and all(type(t) is int for t in params.stop_token_ids)
    assert SamplingParams(stop_token_ids=[]).stop_token_ids == []


async def test_the_smallest_temperature_samples_with_finite_logprobs(tiny_tokenizer, tiny_model):
    policy = TransformersPolicy(tiny_model, tiny_tokenizer)
    generation = await asyncio.wait_for(policy.generate(good_prompt(tiny_tokenizer), SamplingParams(max_new_tokens=3, temperature=1e-5)), WAIT)
    assert len(generation.token_ids) == 3 and all(math.isfinite(x) for x in generation.logprobs)


# -- 3. a policy whose output is malformed ----------------------------------------------------------------------


class BadPolicy:
    """Returns one kind of malformed output every turn."""

    def __init__(self, kind: str):
        self.kind = kind
        if kind == "an id past the declared vocabulary":
            self.vocab_size = 1002  # the model's rows; the runner reads it when the episode starts

    async def generate(self, prompt_ids, sampling):
        kind = self.kind
        if kind == "None":
            return None
        if kind == "a tuple":
            return ([5, 6], None, "stop")
        if kind == "text ids":
            return Generation(["a", "b"], None, "stop")
        if kind == "float ids":
            return Generation([1.5, 2.0], None, "stop")
        if kind == "bool ids":
            return Generation([True, False], None, "stop")
        if kind == "a negative id":
            return Generation([-3, 5], None, "stop")
        if kind == "an id past the declared vocabulary":
            return Generation([1002], None, "stop")
        if kind == "a NaN log-prob":
            return Generation([5, 6], [float("nan"), 0.0], "stop")
        if kind == "an infinite log-prob":
            return Generation([5, 6], [-math.inf, 0.0], "stop")
        if kind == "more ids than max_new_tokens":
            return Generation([5] * (sampling.max_new_tokens + 50), None, "length")
        raise AssertionError(kind)


BAD_OUTPUTS = [
    "None", "a tuple", "text ids", "float ids", "bool ids", "a negative id", "an id past the declared vocabulary",
    "a NaN log-prob", "an infinite log-prob", "more ids than max_new_tokens",
]


@pytest.mark.parametrize("kind", BAD_OUTPUTS)
async def test_a_malformed_policy_output_raises_an_error_naming_the_policy(tiny_tokenizer, scripted_env, kind):
    """None or a tuple crashed with a raw AttributeError, a negative id with a raw OverflowError; bool ids, an id far
    past the vocabulary, a NaN log-prob and a turn longer than its budget were recorded into the trajectory."""
    closed = []

    class Counted(scripted_env):
        def close(self):
            closed.append(self)

    with pytest.raises(GemError, match="BadPolicy") as raised:
        await asyncio.wait_for(
            run_episodes(lambda: Counted(rewards=[0.0, 1.0]), BadPolicy(kind), tiny_tokenizer, [0, 1],
                         sampling=SamplingParams(max_new_tokens=8), max_total_tokens=400),
            WAIT,
        )
    assert "generate" in str(raised.value)
    assert len(closed) == 2


async def test_well_formed_outputs_of_other_shapes_are_still_played(tiny_tokenizer, scripted_env):
    """numpy ids (a backend's array) and ids past the tokenizer's length from a policy that declares no vocabulary
    (Qwen's model has 271 more rows than its tokenizer, and vLLM samples them) are played as before."""
    eot = ChatTemplate.for_tokenizer(tiny_tokenizer).end_of_turn_ids

    class Shapes:
        def __init__(self, ids):
            self.ids = ids

        async def generate(self, prompt_ids, sampling):
            return Generation(self.ids, [-0.5] * len(self.ids), "stop")

    numpy_ids = np.array([5, 6, *eot], dtype=np.int64)
    for policy in (Shapes(list(numpy_ids)), Shapes([len(tiny_tokenizer) + 10, *eot])):
        (trajectory,) = await asyncio.wait_for(run_episodes(lambda: scripted_env(rewards=[1.0]), policy, tiny_tokenizer, [0]), WAIT)
        assert trajectory.num_turns == 1 and trajectory.logprobs[0] == -0.5
