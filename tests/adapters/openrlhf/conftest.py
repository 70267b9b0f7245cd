"""Fixtures for the OpenRLHF adapter tests: a vLLM-like engine backed by a gem_core Policy.

OpenRLHF's ``MultiTurnAgentExecutor.execute`` (the real one, from ``openrlhf.utils.agent`` installed
with ``--no-deps``) calls ``await llm_engine.generate(prompt_token_ids, sampling_params,
multi_modal_data=...)`` and reads ``outputs[0].token_ids``, ``.text``, ``.finish_reason`` and
``.logprobs[i][token_id].logprob``. vLLM does not install on CPU, so :class:`PolicyEngine` returns a
small stand-in with exactly those fields (:class:`FakeRequestOutput`), and :class:`FakeSamplingParams`
stands in for ``vllm.SamplingParams`` (``max_tokens``, ``temperature``, ``logprobs``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest

from gem_core.rollout.policy import SamplingParams
from gem_core.testing import make_tokenizer


@dataclass
class FakeSamplingParams:
    """Stand-in for ``vllm.SamplingParams``: the fields OpenRLHF's executor reads and writes."""

    max_tokens: int | None = None
    temperature: float = 1.0
    logprobs: int | None = 1


@dataclass
class FakeLogprob:
    logprob: float


@dataclass
class FakeCompletion:
    token_ids: list[int]
    text: str
    finish_reason: str
    logprobs: list[dict[int, FakeLogprob]] | None


@dataclass
class FakeRequestOutput:
    """Stand-in for ``vllm.RequestOutput`` with one completion."""

    prompt_token_ids: list[int]
    outputs: list[FakeCompletion] = field(default_factory=list)


class PolicyEngine:
    """An ``llm_engine`` whose ``generate`` samples from a gem_core Policy (tiny model or scripted)."""

    def __init__(self, policy: Any, tokenizer: Any):
        self.policy, self.tokenizer = policy, tokenizer
        self.max_tokens_seen: list[int | None] = []

    async def generate(self, prompt_token_ids, sampling_params, multi_modal_data=None) -> FakeRequestOutput:
        self.max_tokens_seen.append(sampling_params.max_tokens)
        sampling = SamplingParams(max_new_tokens=sampling_params.max_tokens, temperature=sampling_params.temperature)
        gen = await self.policy.generate(list(prompt_token_ids), sampling)
        logprobs = None
        if sampling_params.logprobs is not None:
            logprobs = [{tok: FakeLogprob(lp)} for tok, lp in zip(gen.token_ids, gen.logprobs)]
        text = self.tokenizer.decode(gen.token_ids, skip_special_tokens=False)
        return FakeRequestOutput(list(prompt_token_ids), [FakeCompletion(list(gen.token_ids), text, gen.finish_reason, logprobs)])


@pytest.fixture(scope="session")
def tokenizer():
    return make_tokenizer("chatml")


@pytest.fixture
def engine_for(tokenizer):
    """``engine_for(policy)``: a :class:`PolicyEngine` for the session tokenizer."""
    return lambda policy: PolicyEngine(policy, tokenizer)


@pytest.fixture
def vllm_sampling_params():
    """``vllm_sampling_params(**fields)``: a :class:`FakeSamplingParams`."""
    return FakeSamplingParams


@pytest.fixture
def open_envs(monkeypatch):
    """Counts envs ``gem_core.registry.make`` built and how many are not closed yet."""
    from gem_core.testing import EnvLifecycles

    return EnvLifecycles().install(monkeypatch)
