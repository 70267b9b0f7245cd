"""How a task's statistics become its share of the next episode starts.

A GRPO group whose episodes all score the same has zero advantages and teaches nothing (TRL logs the
share of such groups as ``frac_reward_zero_std``). With success probability ``p`` per episode, a group of
``G`` episodes is all-fail with probability ``(1-p)^G`` and all-success with ``p^G``, so

    informative(p) = 1 - p^G - (1-p)^G

is the chance that a group of the task carries a gradient: 0 at ``p = 0`` and ``p = 1``, highest at 0.5.
``"band"`` weighting draws tasks in proportion to it (success-band sampling with a smooth band);
``"progress"`` in proportion to how fast success is changing (learning progress); ``"uniform"`` ignores the
statistics (a static mixture by the tasks' weights). Every mode keeps a floor under each task, so a task
the policy cannot do yet, or has mastered, is still tried now and then and its statistics stay current.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

__all__ = ["Weighting", "WEIGHTINGS", "informative_group_probability", "with_floor"]

Weighting = Literal["uniform", "band", "progress"]
"""How a sampler weights its tasks: ``uniform``, ``band`` (by the chance a GRPO group of the task is
informative) or ``progress`` (by how fast its success rate changes); see this module's docstring.
"""
WEIGHTINGS: tuple[str, ...] = ("uniform", "band", "progress")
"""The values :data:`Weighting` allows, for checking a user's string at run time."""


def informative_group_probability(p: float, group_size: int) -> float:
    """The chance that ``group_size`` episodes of success probability ``p`` do not all score the same."""
    return max(0.0, 1.0 - p**group_size - (1.0 - p) ** group_size)


def with_floor(scores: Sequence[float], weights: Sequence[float], floor: float) -> list[float]:
    """Probabilities ``floor + (1 - k*floor) * w_i s_i / sum(w s)``: every one of the ``k`` tasks gets at least
    ``floor``; when no task scores above zero (all unseen-free tasks at 0 or 1), the rest goes by ``weights``."""
    k = len(scores)
    mass = [w * s for w, s in zip(weights, scores, strict=True)]
    total = sum(mass)
    if total <= 0:
        mass, total = list(weights), sum(weights)
    spare = 1.0 - k * floor
    return [floor + spare * m / total for m in mass]
