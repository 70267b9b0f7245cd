"""oat's vLLM engine as a core :class:`~gem_core.rollout.Policy`.

oat's actor samples with ``self.generate(prompts, sampling_params) -> list[vllm.RequestOutput]``, a
blocking batched call. The core's runner asks for one turn of one episode at a time, from many
concurrent episodes; :class:`ActorPolicy` gathers the requests made in the same event-loop pass and
sends them to ``generate`` as one batch (token ids in, one ``SamplingParams`` per request), off the
event loop.
"""

from __future__ import annotations

import asyncio
import copy
from collections.abc import Callable
from typing import Any

from gem_core.rollout import Generation, SamplingParams
from gem_core.rollout.vllm_output import generation_from_vllm

__all__ = ["ActorPolicy"]


class ActorPolicy:
    """A Policy backed by a batched ``generate(prompt_ids_list, sampling_params_list)``.

    Args:
        generate: oat's ``actor.generate`` (or anything with its signature and return type).
        base_sampling_params: the actor's ``vllm.SamplingParams``; copied per request with ``max_tokens``,
            ``stop_token_ids``, ``n=1`` and ``logprobs=1`` (oat needs the sampled tokens' logprobs).
    """

    def __init__(self, generate: Callable[[list[list[int]], Any], list[Any]], base_sampling_params: Any):
        self._generate = generate
        self._base = base_sampling_params
        self._pending: list[tuple[list[int], Any, asyncio.Future]] = []
        self._flush_scheduled = False

    def _vllm_params(self, sampling: SamplingParams) -> Any:
        params = copy.deepcopy(self._base)
        params.max_tokens = sampling.max_new_tokens
        params.n = 1
        params.logprobs = 1
        if sampling.stop_token_ids is not None:
            params.stop_token_ids = list(sampling.stop_token_ids)
        return params

    async def generate(self, prompt_ids: list[int], sampling: SamplingParams) -> Generation:
        if sampling.max_new_tokens <= 0:
            return Generation(token_ids=[], logprobs=[], finish_reason="length")
        future = asyncio.get_running_loop().create_future()
        self._pending.append((list(prompt_ids), self._vllm_params(sampling), future))
        if not self._flush_scheduled:
            self._flush_scheduled = True
            asyncio.get_running_loop().call_soon(lambda: asyncio.ensure_future(self._flush()))
        return await future

    async def _flush(self) -> None:
        batch, self._pending, self._flush_scheduled = self._pending, [], False
        try:
            outputs = await asyncio.to_thread(self._generate, [p for p, _, _ in batch], [s for _, s, _ in batch])
        except Exception as exc:  # noqa: BLE001 - every waiting episode sees the engine's error
            for _, _, future in batch:
                future.set_exception(exc)
            return
        for (_, _, future), output in zip(batch, outputs):
            future.set_result(generation_from_vllm(output))
