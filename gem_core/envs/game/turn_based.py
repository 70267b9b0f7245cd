"""The base of the games: a bounded number of turns, counted in one place.

Every game allows at most ``max_turns`` moves; a move costs a turn whether or not it is valid, and the
last turn ends the episode (truncated, unless that move won). The game's own messages say how many
turns are left, so the count lives on the game rather than in a wrapper; the limit itself is the
registered spec's (``register(..., max_turns=N)``), which ``gem_core.make`` hands to the constructor.
"""

from __future__ import annotations

from typing import Any

from gem_core.env import Env

__all__ = ["TurnBasedGame"]


class TurnBasedGame(Env):
    """A game of at most :attr:`max_turns` moves. Subclasses call ``super().reset(seed=seed)`` first in
    ``reset`` and ``out_of_turns = self.take_turn()`` first in ``step``."""

    #: Games step in microseconds of pure Python: the vector env and the session call them inline.
    blocking = False
    max_return = 1.0
    max_turns: int
    turn: int = 0
    _turns_started = False

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
        super().reset(seed=seed, options=options)
        self.turn = 0
        self._turns_started = True
        return "", {}

    def random_index(self, n: int) -> int:
        """A uniform index in ``range(n)`` drawn from :attr:`np_random`, for ``sample_random_action``.

        One float draw: ``Generator.integers`` costs a few microseconds per call, as much as a whole
        step of the cheaper games, and random policies call it on every step.
        """
        return min(int(self.np_random.random() * n), n - 1)

    def take_turn(self) -> bool:
        """Count this step's turn; True when it is the last one the episode allows.

        Raises:
            RuntimeError: ``step`` before ``reset``.
        """
        if not self._turns_started:
            raise RuntimeError("Call reset() before step().")
        self.turn += 1
        return self.turn >= self.max_turns
