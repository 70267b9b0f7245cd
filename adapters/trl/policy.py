"""Generation with the trainer's own model: a :class:`gem_core.rollout.Policy` over a ``GRPOTrainer``.

Without vLLM, the trainer's (unwrapped) model samples through the core's ``TransformersPolicy``. With
``use_vllm=True``, TRL's ``trainer.vllm_generation.generate`` samples. In server mode (and colocate
mode with tensor parallelism) that call is collective: it gathers every rank's prompts, samples them
together and hands rank ``i`` the slice ``i * len(prompts) .. (i + 1) * len(prompts)``. So every rank
must call it equally often with equally many prompts, while episodes end at different turns on
different ranks. :class:`VLLMTrainerPolicy` keeps the ranks in step: before each call the ranks agree
on the largest batch, each pads its own with a one-token filler prompt, and a rank whose episodes are
over keeps answering rounds with fillers (:meth:`~VLLMTrainerPolicy.drain`) until every rank is done.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

from gem_core.errors import InvalidArgument
from gem_core.rollout.policy import GENERATE_KEYWORDS_SET_PER_CALL, BatchingPolicy, Generation, SamplingParams, TransformersPolicy

__all__ = ["trainer_policy", "VLLMTrainerPolicy"]

_SET_PER_TURN = {
    "max_new_tokens": "GemRolloutFunc(max_new_tokens=...) (GRPOConfig.max_completion_length caps the episode)",
    "max_length": "GemRolloutFunc(max_new_tokens=...) (GRPOConfig.max_completion_length caps the episode)",
    "do_sample": "GRPOConfig.temperature (0 samples greedily)",
    "temperature": "GRPOConfig.temperature",
    "top_p": "GRPOConfig.top_p",
    "top_k": "GRPOConfig.top_k",
    "eos_token_id": "nothing: the tokenizer's eos and the chat template's end-of-turn ids end a turn",
    "pad_token_id": "nothing: the tokenizer's pad id pads a round",
    "num_return_sequences": "GRPOConfig.num_generations (each copy of a prompt is one episode)",
    "logits_processor": "nothing: the rollout passes its own (it records the sampled tokens' log-probabilities)",
    "suppress_tokens": "nothing: a vision model's image placeholders are suppressed already",
    "use_cache": "nothing: the rollout reuses each episode's attention states between turns",
    "past_key_values": "nothing: the rollout reuses each episode's attention states between turns",
}
"""What to set instead of a ``generate`` keyword the rollout sets for each turn (all of
:data:`~gem_core.rollout.policy.GENERATE_KEYWORDS_SET_PER_CALL` are refused in ``generation_kwargs``)."""


def trainer_policy(trainer: Any, num_episodes: int, *, logprobs: bool = True) -> BatchingPolicy:
    """The policy a rollout of ``num_episodes`` concurrent episodes should sample from.

    Without vLLM, every round of ``model.generate`` waits for all live episodes (``num_episodes``; the
    rollout reports each one's end), so a round is as full as TRL's own single ``generate`` call even
    when envs step in threads and come back at different times; and one round is one call, as in
    TRL. ``logprobs=False`` samples without the sampled tokens' log-probabilities (TRL without vLLM
    recomputes them and uses the sampler's only for ``off_policy_mask_threshold``).

    Without vLLM, ``GRPOConfig.repetition_penalty``, ``min_p`` and ``generation_kwargs`` reach ``model.generate`` as in
    TRL's own generation (with vLLM, TRL's vLLM generation applies them). The log-probabilities are then those after
    the repetition penalty and other logits processors, before temperature and truncation (see
    :class:`~gem_core.rollout.policy.SampledLogprobs`).

    Raises:
        InvalidArgument: ``GRPOConfig.generation_kwargs`` holds a keyword the rollout sets for each turn (the message
            names the setting to use instead).
    """
    if getattr(trainer, "use_vllm", False):
        return VLLMTrainerPolicy(trainer, num_episodes)
    # Generation stays on the trainer's thread, as TRL's own does: every round waits for all live episodes
    # anyway, so a worker thread would overlap nothing, and on a GPU it made each turn 2.3-2.9x slower
    # (H100, Qwen3-0.6B shape, 32 x 48 tokens under accelerate's bf16 autocast wrapper: 3.7 s in a worker
    # thread, 1.6 s on the trainer's thread, 1.5 s for TRL's own generate; bench/trl_rollout_overhead.py).
    return TransformersPolicy(
        trainer.accelerator.unwrap_model(trainer.model), trainer.processing_class, num_episodes=num_episodes,
        max_batch_size=max(1, num_episodes), logprobs=logprobs, sample_in_thread=False, generate_kwargs=_generate_kwargs(trainer.args),
    )


def _generate_kwargs(args: Any) -> dict[str, Any]:
    """The ``generate`` keywords of TRL's own generation that the core's policy does not set (TRL's ``GRPOTrainer``
    builds its ``GenerationConfig`` from the same fields), or the error naming one it sets per turn."""
    extra: dict[str, Any] = {}
    if getattr(args, "repetition_penalty", 1.0) not in (None, 1.0):
        extra["repetition_penalty"] = args.repetition_penalty
    if getattr(args, "min_p", None) is not None:
        extra["min_p"] = args.min_p
    for key, value in (getattr(args, "generation_kwargs", None) or {}).items():
        if key in GENERATE_KEYWORDS_SET_PER_CALL:
            raise InvalidArgument(
                f"GRPOConfig.generation_kwargs[{key!r}]={value!r}: GemRolloutFunc sets {key} for each turn of an episode; "
                f"remove it from generation_kwargs{' and set ' + _SET_PER_TURN[key] + ' instead' if key in _SET_PER_TURN else ''}."
            )
        extra[key] = value
    return extra


class VLLMTrainerPolicy(BatchingPolicy):
    """One ``vllm_generation.generate`` call per round of live episodes, the same calls on every rank.

    vLLM samples up to ``GRPOConfig.max_completion_length`` tokens; the core's batcher keeps each turn's
    first ``max_new_tokens`` up to its stop token (a prefix of a sample is a sample). A turn with a token vLLM has no
    log-prob for (TRL's ``None``, vLLM's NaN) is kept without log-probs, as TRL gives such tokens no correction.

    Args:
        trainer: The ``GRPOTrainer`` with ``use_vllm=True`` (its ``vllm_generation`` and ``processing_class``).
        num_episodes: This rank's episodes in the batch; a round waits for every live one.
    """

    def __init__(self, trainer: Any, num_episodes: int):
        # Calls stay on the event loop's thread: they are collectives, and every live episode waits anyway.
        super().__init__(trainer.processing_class, num_episodes=num_episodes, sample_in_thread=False)
        self.generation = trainer.vllm_generation
        # Colocated vLLM without tensor parallelism samples each rank's prompts on its own: no collective.
        self.collective = getattr(self.generation, "mode", "server") == "server" or getattr(self.generation, "tensor_parallel_size", 1) > 1
        tokenizer = trainer.processing_class
        filler = next((t for t in (tokenizer.eos_token_id, tokenizer.pad_token_id) if t is not None), 0)
        self.filler: list[int] = [int(filler)]
        """The prompt that pads a rank's batch to the agreed size; its samples are dropped."""

    def sample_batch(self, prompts: list[list[int]], sampling: SamplingParams, max_new_tokens: int) -> list[tuple[list[int], list[float] | None]]:
        """Sample every prompt with TRL's vLLM (a collective call in server mode or with tensor parallelism).

        ``sampling`` and ``max_new_tokens`` are not sent: vLLM samples with the trainer's ``GRPOConfig`` settings
        and the core's batcher cuts each turn to its own budget and stop tokens.

        Returns:
            ``(ids, logprobs or None)`` per prompt, in order.
        """
        return self._generate(prompts)

    async def generate(self, prompt_ids: list[int], sampling: SamplingParams, *, images: list | None = None) -> Generation:
        """:meth:`BatchingPolicy.generate`; a turn whose kept tokens include one without a log-prob comes back with
        ``logprobs`` None (the episode then goes to TRL without them, see :func:`~gem_adapters.trl.trajectories_to_rollout`).

        Returns:
            The turn, cut at its stop token and budget.
        """
        generation = await super().generate(prompt_ids, sampling, images=images)
        if generation.logprobs is not None and not math.isfinite(sum(generation.logprobs)):
            return dataclasses.replace(generation, logprobs=None)
        return generation

    def drain(self) -> None:
        """After this rank's episodes end: take part in the other ranks' rounds until every rank is done."""
        while self.collective and self._generate([]):
            pass

    def _generate(self, prompts: list[list[int]]) -> list[tuple[list[int], list[float] | None]]:
        size = _largest_across_ranks(len(prompts)) if self.collective else len(prompts)
        if size == 0:
            return []
        padded = prompts + [self.filler] * (size - len(prompts))
        _, completions, logprobs, _ = self.generation.generate(prompts=padded, images=None, num_generations=1)
        if not prompts:
            return [([], None)]  # a filler round: nothing to hand back, but not the end
        # TRL gives None where vLLM had no log-prob (its NaN): NaN again, so the turn can be cut; generate drops them.
        return [
            (list(ids), None if lps is None else [math.nan if lp[0] is None else lp[0] for lp in lps])
            for ids, lps in zip(completions[: len(prompts)], (logprobs or [None] * size)[: len(prompts)], strict=True)
        ]


def _largest_across_ranks(count: int) -> int:
    """The largest ``count`` any process passes (a collective: every process must call it)."""
    from accelerate.utils import gather_object

    return max(gather_object([count]))
