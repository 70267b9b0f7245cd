"""Keep the env's observation tokens out of TRL's LM head: the loss projects only sampled positions.

A GEM completion holds the sampled action tokens and the env's observation tokens. TRL trains on the
former only (``env_mask``), yet its loss projects every completion position through the LM head (TRL's
fused head, ``add_fused_lm_head``) and zeroes the observation positions afterwards. With a 150k-id
vocabulary that projection is most of a small model's loss, and in short-turn games the observations
outnumber the sampled tokens: the head is where a multi-turn step lost to TRL's own single-turn step.

TRL's fused head already skips positions whose label is ``-100`` where Triton runs (CUDA, XPU); on CPU
it scores every position so that tile shapes stay fixed for compilers, which eager CPU torch does not
need. :func:`score_sampled_tokens_only` wraps the model's forward: on TRL's fused calls it labels the
observation positions ``-100``, and on CPU it lets TRL's head compact to the labelled positions as it
does on CUDA. The loss and its gradient are unchanged (those positions' log-probs were multiplied by
a zero mask before; now they are zero without being computed), and so are TRL's entropy and KL metrics,
which use the same mask.

The forward sees ids, not rollout rows (TRL shuffles and slices its batches), so each completion's
env mask is found by the completion's own tokens, registered by the rollout. A completion that is not
registered, or whose tokens two registered completions share with different masks, is scored as TRL
scores it: correct, only slower.
"""

from __future__ import annotations

import contextvars
import functools
from collections.abc import Sequence
from typing import Any

__all__ = ["SampledTokensHead", "score_sampled_tokens_only"]

_COMPACT_ON_CPU: contextvars.ContextVar[bool] = contextvars.ContextVar("gem_compact_on_cpu", default=False)
_AMBIGUOUS = ()


class SampledTokensHead:
    """The env masks of the latest two rollouts, keyed by completion tokens, and what they saved."""

    def __init__(self) -> None:
        self._current: dict[tuple[int, ...], tuple[int, ...]] = {}
        self._previous: dict[tuple[int, ...], tuple[int, ...]] = {}
        self.positions_skipped = 0
        """Observation positions kept out of the LM head so far (a count, for tests and benches)."""
        self.rows_unmatched = 0
        """Completions the forward saw with observation tokens it could not place (scored in full)."""

    def register(self, completion_ids: Sequence[Sequence[int]], env_masks: Sequence[Sequence[int]]) -> None:
        """Remember one rollout's completions (the two latest rollouts are kept: TRL scores a rollout's
        batch before it asks for the next one, and may score it again for ``num_iterations``)."""
        masks: dict[tuple[int, ...], tuple[int, ...]] = {}
        for ids, mask in zip(completion_ids, env_masks, strict=True):
            if len(ids) != len(mask):
                continue
            key, value = tuple(ids), tuple(1 if m else 0 for m in mask)
            masks[key] = value if masks.get(key, value) == value else _AMBIGUOUS
        self._previous, self._current = self._current, masks

    def mask_labels(self, labels: Any) -> Any:
        """``labels`` with each registered completion's observation positions set to ``-100``."""
        if not (self._current or self._previous):
            return labels
        masked = labels.clone()
        for row, values in enumerate(labels.tolist()):
            positions = [i for i, token in enumerate(values) if token != -100]
            key = tuple(values[i] for i in positions)
            mask = self._current.get(key, self._previous.get(key))
            if not mask:  # unknown, ambiguous, or all padding
                self.rows_unmatched += mask is None and bool(key)
                continue
            drop = [positions[i] for i, keep in enumerate(mask) if not keep]
            masked[row, drop] = -100
            self.positions_skipped += len(drop)
        return masked


def _fused_head_models(trainer: Any) -> list[Any]:
    """The modules TRL gave a fused LM head: the policy (its base model under PEFT) and the reference."""
    model, accelerator = getattr(trainer, "model", None), getattr(trainer, "accelerator", None)
    if model is not None and accelerator is not None:
        model = accelerator.unwrap_model(model)
    if model is not None and hasattr(model, "get_base_model"):
        model = model.get_base_model()
    return [m for m in (model, getattr(trainer, "ref_model", None)) if m is not None and _has_fused_head(m)]


def _has_fused_head(model: Any) -> bool:
    function = getattr(model.forward, "__func__", None)  # TRL binds its fused forward to the instance
    return function is not None and "fused_lm_head" in function.__code__.co_varnames


def _skip_observations(model: Any, head: SampledTokensHead) -> None:
    """Wrap ``model``'s fused forward: its LM head sees only the registered completions' sampled positions."""
    fused_forward = model.forward

    @functools.wraps(fused_forward)  # keeps the signature ``generate`` validates its kwargs against
    def forward(*args: Any, fused_lm_head: bool = False, labels: Any = None, **kwargs: Any) -> Any:
        if not (fused_lm_head and labels is not None):
            return fused_forward(*args, fused_lm_head=fused_lm_head, labels=labels, **kwargs)
        token = _COMPACT_ON_CPU.set(True)
        try:
            return fused_forward(*args, fused_lm_head=True, labels=head.mask_labels(labels), **kwargs)
        finally:
            _COMPACT_ON_CPU.reset(token)

    model.forward = forward


def _allow_cpu_compaction() -> None:
    """Let TRL's fused head compact to labelled positions on CPU inside :data:`_COMPACT_ON_CPU` only."""
    import trl.trainer.utils as trl_utils

    decide = getattr(trl_utils, "_use_triton", None)
    if decide is None or getattr(decide, "gem_cpu_compaction", False):
        return  # another TRL: its head decides as it always does (correct, maybe slower on CPU)

    @functools.wraps(decide)
    def use_compaction(device: Any) -> bool:
        return decide(device) or (device.type == "cpu" and _COMPACT_ON_CPU.get())

    use_compaction.gem_cpu_compaction = True  # type: ignore[attr-defined]
    trl_utils._use_triton = use_compaction


def score_sampled_tokens_only(trainer: Any) -> SampledTokensHead | None:
    """Make ``trainer``'s loss project only sampled positions through the LM head (once per trainer).

    Returns the registry the rollout fills, or None where the trainer's model has no TRL fused head
    (another TRL version): the loss is then TRL's own, unchanged.
    """
    head = getattr(trainer, "_gem_sampled_head", None)
    if head is not None:
        return head
    models = _fused_head_models(trainer)
    if not models:
        return None
    head = SampledTokensHead()
    _allow_cpu_compaction()
    for model in models:
        _skip_observations(model, head)
    trainer._gem_sampled_head = head
    return head
