"""The rules for the episode options every adapter takes (turn and token limits, system prompt, discount).

Adapters read these from a framework's config (verl's YAML, OpenRLHF's ``AgentConfig``, a
``GemRolloutFunc`` field). Checked where the config is built, a bad value is one ``ValueError`` naming the
config and the key; unchecked, it surfaces at the first episode inside the trainer's workers as a
comparison error between a str and an int, or trains on nothing (``max_new_tokens=0`` samples empty
moves).
"""

from __future__ import annotations

import math
import numbers
from typing import Any

from gem_core.errors import InvalidArgument, InvalidArgumentType
from gem_core.wrappers.turn_limit import check_max_turns

__all__ = ["check_episode_options"]


def _count(value: Any) -> str | None:
    if value is None or (isinstance(value, numbers.Integral) and not isinstance(value, bool) and int(value) >= 1):
        return None
    return "must be a positive whole number, or None"


def _copies(value: Any) -> str | None:
    if isinstance(value, numbers.Integral) and not isinstance(value, bool) and int(value) >= 1:
        return None
    return "must be a positive whole number"


def _text(value: Any) -> str | None:
    return None if value is None or isinstance(value, str) else "must be a str, or None"


def _discount(value: Any) -> str | None:
    if isinstance(value, numbers.Real) and not isinstance(value, bool) and math.isfinite(value) and 0 <= float(value) <= 1:
        return None
    return "must be a number in [0, 1] (a discount over turns)"


_RULES = {
    "max_new_tokens": _count,
    "max_total_tokens": _count,
    "max_response_tokens": _count,
    "system_prompt": _text,
    "gamma": _discount,
}


def check_episode_options(owner: str, **options: Any) -> None:
    """Raise ValueError naming ``owner`` and the key of the first option that breaks its rule.

    Keys: ``max_turns`` (:func:`~gem_core.wrappers.turn_limit.check_max_turns`, the registry's rule),
    ``max_new_tokens``, ``max_total_tokens``, ``max_response_tokens`` (positive whole numbers or None),
    ``system_prompt`` (a str or None), any key ending in ``gamma`` (a number in [0, 1]), and counts of
    episodes, any key ending in ``_per_prompt`` (a GRPO group's size) or starting with ``num_`` (positive
    whole numbers, never None).

    Raises:
        InvalidArgument: if an option breaks its rule.
        InvalidArgumentType: if a key has no rule (a caller's typo).
    """
    for key, value in options.items():
        if key == "max_turns":
            check_max_turns(value, owner)
            continue
        rule = _copies if key.endswith("_per_prompt") or key.startswith("num_") else _RULES.get("gamma" if key.endswith("gamma") else key)
        if rule is None:
            raise InvalidArgumentType(f"check_episode_options: no rule for {key!r}; known: max_turns, {', '.join(_RULES)}, *_per_prompt, num_*.")
        problem = rule(value)
        if problem:
            raise InvalidArgument(f"{owner}: {key}={value!r} {problem}.")
