"""Truncate an episode after a fixed number of turns (gymnasium's ``TimeLimit`` for text envs)."""

from __future__ import annotations

import numbers
from typing import Any

from gem_core.env import StepResult
from gem_core.errors import InvalidArgument
from gem_core.wrappers.core import Wrapper

__all__ = ["TurnLimit", "check_max_turns"]


def check_max_turns(max_turns: Any, where: str) -> int | None:
    """``max_turns`` if it is a positive whole number of turns or None; else a ValueError naming ``where``
    (the one rule for ``register``, ``make`` and :class:`TurnLimit`: 2.5, True and "3" are not turn counts).

    Raises:
        InvalidArgument: if ``max_turns`` is not a positive whole number or None.
    """
    if max_turns is not None and (isinstance(max_turns, bool) or not isinstance(max_turns, numbers.Integral) or max_turns < 1):
        raise InvalidArgument(f"{where}: max_turns={max_turns!r} must be a positive whole number of turns, or None.")
    return None if max_turns is None else int(max_turns)  # numpy's ints too, as a plain int


class TurnLimit(Wrapper):
    """Sets ``truncated=True`` on turn ``max_turns`` unless the episode terminated on that turn.

    ``info["turn_limit_reached"]`` tells a trainer that the episode was cut, not finished, so it can
    bootstrap or drop the tail instead of treating the cut as the env's verdict.

    Raises:
        InvalidArgument: if ``max_turns`` is None (leave the wrapper out) or not a positive whole number.
    """

    def __init__(self, env, max_turns: int):
        if check_max_turns(max_turns, "TurnLimit") is None:
            raise InvalidArgument("TurnLimit: max_turns=None sets no limit; leave the wrapper out instead.")
        super().__init__(env)
        self.max_turns = max_turns
        self.turn = 0

    def on_reset(self, observation: str, info: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        self.turn = 0
        return observation, info

    def on_step(self, action: str, result: StepResult) -> StepResult:
        observation, reward, terminated, truncated, info = result
        self.turn += 1
        if self.turn >= self.max_turns and not terminated and not truncated:
            truncated = True
            info = {**info, "turn_limit_reached": True}
        return observation, reward, terminated, truncated, info
