"""Per-task statistics of finished episodes: a window of recent outcomes plus lifetime totals.

A window (the last ``window`` episodes) rather than an average over all time, because what the sampler
needs is how the policy does *now*: a task learnt long ago must read as solved, not as half-solved.
Everything here is plain numbers and lists, so it round-trips through JSON with a checkpoint.
"""

from __future__ import annotations

import math
import numbers
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from gem_core.errors import InvalidArgument
from gem_core.rows.label import _shown

__all__ = ["TaskStats"]


@dataclass
class TaskStats:
    """Outcomes of one task's finished episodes."""

    window: int = 64
    """How many recent episodes :attr:`success_rate` and :attr:`learning_progress` look at."""
    recent_success: deque[bool] = field(default_factory=deque)
    recent_return: deque[float] = field(default_factory=deque)
    episodes: int = 0
    successes: int = 0
    return_sum: float = 0.0

    def __post_init__(self) -> None:
        if isinstance(self.window, bool) or not isinstance(self.window, int) or self.window < 2:
            raise InvalidArgument(f"window must be an integer of at least 2 episodes, got {self.window!r}.")
        self.recent_success = deque((bool(s) for s in self.recent_success), maxlen=self.window)
        self.recent_return = deque((float(r) for r in self.recent_return), maxlen=self.window)

    def record(self, success: bool, episode_return: float = 0.0) -> None:
        """Add one finished episode; both values are checked before anything changes.

        Raises:
            InvalidArgument: ``success`` is not a bool (or 0/1), or ``episode_return`` not a finite number, or one
                that would take :attr:`return_sum` past the largest float. A bad value once added half an episode
                (the window's outcomes and returns then differed in length, and the sampler's checkpoint could not
                be loaded), a NaN success counted as a success, and an infinite sum was saved as ``Infinity``
                (not JSON). Refused rather than clamped: a sum held at the largest float would be silently wrong.
        """
        if not _is_outcome(success):
            raise InvalidArgument(f"success must be a bool (or 0 or 1), got {success!r}.")
        value = _as_float(episode_return)
        if value is None:
            raise InvalidArgument(f"episode_return must be a finite number, got {_shown(episode_return)}.")
        if not math.isfinite(self.return_sum + value):
            raise InvalidArgument(f"episode_return {value!r} would take the task's return sum ({self.return_sum!r}) past the largest "
                                  "float: give returns on a reward's scale.")
        success, episode_return = bool(success), value
        self.recent_success.append(success)
        self.recent_return.append(episode_return)
        self.episodes += 1
        self.successes += int(success)
        self.return_sum += episode_return

    @property
    def seen(self) -> int:
        """Episodes in the window."""
        return len(self.recent_success)

    @property
    def success_rate(self) -> float | None:
        """Success rate over the window; None before the first episode."""
        return sum(self.recent_success) / self.seen if self.seen else None

    @property
    def mean_return(self) -> float | None:
        """Mean return over the window; None before the first episode."""
        return sum(self.recent_return) / self.seen if self.seen else None

    @property
    def learning_progress(self) -> float | None:
        """``|success(newer half) - success(older half)|`` of the window: how fast success is changing
        (either way: forgetting is worth training on too); None with fewer than 2 episodes."""
        if self.seen < 2:
            return None
        outcomes = list(self.recent_success)
        half = len(outcomes) // 2
        older, newer = outcomes[:half], outcomes[half:]
        return abs(sum(newer) / len(newer) - sum(older) / len(older))

    def to_json(self) -> dict[str, Any]:
        """The statistics as a JSON-ready dict, what :meth:`from_json` reads back."""
        return {
            "recent_success": [int(s) for s in self.recent_success],
            "recent_return": list(self.recent_return),
            "episodes": self.episodes,
            "successes": self.successes,
            "return_sum": self.return_sum,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any], window: int) -> TaskStats:
        """Stats saved by :meth:`to_json`; a smaller ``window`` than the saved one keeps the newest episodes."""
        return cls(
            window=window,
            recent_success=deque(bool(s) for s in data.get("recent_success", [])),
            recent_return=deque(float(r) for r in data.get("recent_return", [])),
            episodes=int(data.get("episodes", 0)),
            successes=int(data.get("successes", 0)),
            return_sum=float(data.get("return_sum", 0.0)),
        )


def _as_float(value: Any) -> float | None:
    """``value`` as a finite float, or None (not a real number, NaN, infinite, or an int past a float's range)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        return None
    try:
        number = float(value)
    except OverflowError:
        return None
    return number if math.isfinite(number) else None


def _is_outcome(value: Any) -> bool:
    """A success flag: a bool, numpy's bool, or a number equal to 0 or 1 (NaN is neither)."""
    try:
        return bool(value in (0, 1))
    except (TypeError, ValueError):  # an array: not one outcome
        return False
