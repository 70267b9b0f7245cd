"""One sampled turn read from a ``vllm.RequestOutput``, for every adapter whose framework samples with vLLM.

OpenRLHF's engine and oat's actor hand back vLLM's ``RequestOutput``; the session needs the exact
sampled ids, their logprobs and why sampling stopped. vLLM reports the logprobs as one
``{token_id: Logprob}`` dict per position (the sampled id always among the keys) and finish reasons
beyond ``stop``/``length`` (``abort``, or None while streaming), which the core folds into ``abort``.
Nothing here imports vLLM: only those attributes are read.
"""

from __future__ import annotations

from typing import Any

from gem_core.errors import InvalidArgument
from gem_core.rollout.policy import Generation

__all__ = ["generation_from_vllm"]


def generation_from_vllm(output: Any) -> Generation:
    """The first completion of ``output`` (a ``vllm.RequestOutput``) as a :class:`Generation`.

    Logprobs are None when the request did not ask for them (``SamplingParams.logprobs`` unset).

    Raises:
        ValueError: the output has no completion, or its logprobs do not cover every sampled id.
    """
    if not getattr(output, "outputs", None):
        raise InvalidArgument("The vLLM RequestOutput has no completion (outputs is empty); request n >= 1.")
    completion = output.outputs[0]
    token_ids = [int(t) for t in completion.token_ids]
    logprobs = None
    if completion.logprobs is not None:
        if len(completion.logprobs) != len(token_ids):
            raise InvalidArgument(f"vLLM returned {len(completion.logprobs)} logprob entries for {len(token_ids)} sampled ids.")
        logprobs = [float(position[token].logprob) for position, token in zip(completion.logprobs, token_ids, strict=True)]
    reason = completion.finish_reason if completion.finish_reason in ("stop", "length") else "abort"
    return Generation(token_ids=token_ids, logprobs=logprobs, finish_reason=reason)
