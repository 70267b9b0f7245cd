"""A core :class:`~gem_core.rollout.TokenTrajectory` as oat's per-turn samples (``oat.types.Transition``).

oat trains one sample per turn: the whole context so far is the prompt (``prompt_ids``), the turn's
sampled ids are the response (``response_ids``, with their logprobs as the old logprobs), and the
turn's reward stays per turn (``rewards``; oat computes turn-level GAE or the discounted return from
``rewards`` and ``done``). The ids come from the core's per-turn view
(:meth:`TokenTrajectory.as_transitions`), so nothing is re-tokenized.
"""

from __future__ import annotations

from typing import Any

from gem_core.errors import InvalidArgument
from gem_core.protocols import Tokenizer
from gem_core.rollout import ChatTemplate, TokenTrajectory

__all__ = ["oat_transitions"]

NO_TURNS_MESSAGE = "The episode has no turns (its prompt filled the token budget); raise max_total_tokens."
"""Why an episode has no turns to train on; the actor says it too when a whole batch has none."""


def oat_transitions(trajectory: TokenTrajectory, tokenizer: Tokenizer) -> list[Any]:
    """One ``oat.types.Transition`` per turn; the last has ``done=True`` (oat requires it).

    Raises:
        ValueError: the trajectory has no turns, or is not finished, or lacks logprobs (oat uses them
            as the behaviour policy's logprobs; sample with ``logprobs=1``).
    """
    from oat.types import Transition

    if trajectory.num_turns == 0:
        raise InvalidArgument(NO_TURNS_MESSAGE)
    if not (trajectory.terminated or trajectory.truncated):
        raise InvalidArgument("oat needs finished episodes (the last transition must have done=True); this one is still running.")
    if not trajectory.metrics.get("has_logprobs", True):
        raise InvalidArgument("oat needs the sampled tokens' logprobs; sample with vllm.SamplingParams(logprobs=1).")
    template = ChatTemplate.for_tokenizer(tokenizer)
    per_turn = trajectory.as_transitions()
    out = []
    for turn in per_turn:
        t = turn.turn
        info = trajectory.infos[t] if t < len(trajectory.infos) else {}
        out.append(
            Transition(
                obs=trajectory.observations[t] if t < len(trajectory.observations) else "",
                action=trajectory.actions[t],
                rewards=float(turn.reward),
                done=turn.done,
                prompt=tokenizer.decode(turn.context_ids, skip_special_tokens=False),
                prompt_ids=list(turn.context_ids),
                response=tokenizer.decode(turn.action_ids, skip_special_tokens=False),
                response_ids=list(turn.action_ids),
                response_logprobs=list(turn.action_logprobs),
                response_is_truncated=not template.ends_turn(list(turn.action_ids)),
                action_is_formatted=not info.get("format_error", False),
                info={},  # oat's step() calls info.update(...)
            )
        )
    return out
