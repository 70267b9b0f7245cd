"""gem_core.rollout.vllm_output: a vLLM RequestOutput (its documented fields, built here) as a Generation."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from gem_core.rollout.vllm_output import generation_from_vllm


@dataclass
class Logprob:  # vllm.sequence.Logprob
    logprob: float
    rank: int | None = None


@dataclass
class CompletionOutput:  # vllm.outputs.CompletionOutput, the fields read
    token_ids: list[int]
    logprobs: list[dict[int, Logprob]] | None
    finish_reason: str | None


@dataclass
class RequestOutput:
    outputs: list[CompletionOutput]


def test_sampled_ids_their_logprobs_and_the_finish_reason():
    # vLLM lists the top-k alternatives too: the sampled id's entry is the one kept.
    logprobs = [{5: Logprob(-0.5), 9: Logprob(-0.1)}, {9: Logprob(-1.5)}]
    generation = generation_from_vllm(RequestOutput([CompletionOutput((5, 9), logprobs, "length")]))
    assert generation.token_ids == [5, 9]
    assert generation.logprobs == [-0.5, -1.5]
    assert generation.finish_reason == "length"


@pytest.mark.parametrize("reason, expected", [("stop", "stop"), ("abort", "abort"), (None, "abort")])
def test_finish_reasons_beyond_stop_and_length_are_aborts(reason, expected):
    assert generation_from_vllm(RequestOutput([CompletionOutput([1], None, reason)])).finish_reason == expected


def test_no_logprobs_requested_gives_none():
    assert generation_from_vllm(RequestOutput([CompletionOutput([1, 2], None, "stop")])).logprobs is None


def test_empty_or_misaligned_outputs_fail_with_the_cause():
    with pytest.raises(ValueError, match="no completion"):
        generation_from_vllm(RequestOutput([]))
    with pytest.raises(ValueError, match="1 logprob entries for 2"):
        generation_from_vllm(RequestOutput([CompletionOutput([1, 2], [{1: Logprob(0.0)}], "stop")]))
