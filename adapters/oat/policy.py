"""oat's vLLM engine as a core :class:`~gem_core.rollout.policy.BatchingPolicy`.

oat's actor samples with ``self.generate(prompts, sampling_params) -> list[vllm.RequestOutput]``, a
blocking batched call. The core's runner asks for one turn of one episode at a time, from many
concurrent episodes; the core's batcher gathers the turns requested together and this class sends
them to ``generate`` as one batch (token ids in, the actor's ``SamplingParams`` with the round's
budget, stop ids and ``logprobs=1``), in a worker thread.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

from gem_core.protocols import Tokenizer
from gem_core.rollout.policy import BatchingPolicy, SamplingParams
from gem_core.rollout.vllm_output import generation_from_vllm

__all__ = ["ActorPolicy"]


class ActorPolicy(BatchingPolicy):
    """A Policy backed by oat's batched ``generate(prompt_ids_list, sampling_params_list)``.

    Args:
        generate: oat's ``actor.generate`` (or anything with its signature and return type).
        base_sampling_params: the actor's ``vllm.SamplingParams``; copied per batch with ``max_tokens``,
            ``stop_token_ids``, ``n=1`` and ``logprobs=1`` (oat needs the sampled tokens' logprobs).
        tokenizer: gives the default stop ids for requests that name none.
    """

    def __init__(self, generate: Callable[[list[list[int]], Any], list[Any]], base_sampling_params: Any, tokenizer: Tokenizer | None = None):
        super().__init__(tokenizer)
        self._generate = generate
        self._base = base_sampling_params

    def sample_batch(self, prompts: list[list[int]], sampling: SamplingParams, max_new_tokens: int) -> list[tuple[list[int], list[float] | None]]:
        """Sample every prompt in one ``actor.generate`` call, with the actor's sampling settings.

        Args:
            prompts: Token ids of each episode's context.
            sampling: The turn's settings; only its stop ids are used (the actor's own temperature and top-p stand).
            max_new_tokens: The request's ``max_tokens``.

        Returns:
            ``(ids, logprobs)`` per prompt, in order.
        """
        params = copy.deepcopy(self._base)
        params.max_tokens, params.n, params.logprobs = max_new_tokens, 1, 1
        params.stop_token_ids = self.stop_token_ids(sampling)
        generations = [generation_from_vllm(output) for output in self._generate(prompts, [params] * len(prompts))]
        return [(g.token_ids, g.logprobs) for g in generations]
