"""The base of the games: a bounded number of turns, counted in one place.

Every game allows at most ``max_turns`` moves; a move costs a turn whether or not it is valid, and the
last turn ends the episode (truncated, unless that move won). The game's own messages say how many
turns are left, so the count lives on the game rather than in a wrapper; the limit itself is the
registered spec's (``register(..., max_turns=N)``), which ``gem_core.make`` hands to the constructor.
"""

from __future__ import annotations

from typing import Any

from gem_core.env import Env, StepResult
from gem_core.errors import ResetNeeded

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
            raise ResetNeeded("Call reset() before step().")
        self.turn += 1
        return self.turn >= self.max_turns

    def invalid_move(self, problem: str, out_of_turns: bool) -> StepResult:
        """A move the rules reject: it costs its turn, scores the env's invalid-action penalty, says what was
        wrong, and ends the episode (truncated) when it was the last turn."""
        return self.invalid_action(f"Invalid move: {problem}. Turns left: {self.max_turns - self.turn}.\n{self.render()}", truncated=out_of_turns)

    def end_turn(self, reward: float, out_of_turns: bool, *, won: bool, win_message: str = "Solved!", feedback: str = "") -> StepResult:
        """A valid move's result: a win ends the episode (``success``), the last turn truncates it, otherwise
        the game goes on and the observation says how many turns are left. ``feedback`` comes first."""
        lead = f"{feedback}\n" if feedback else ""
        if won:
            return f"{lead}{self.render()}\n{win_message}", reward, True, False, {"success": True}
        if out_of_turns:
            return f"{lead}{self.render()}\nOut of turns.", reward, False, True, {"success": False}
        if feedback:
            return f"{feedback} Turns left: {self.max_turns - self.turn}.\n{self.render()}", reward, False, False, {}
        return f"{self.render()}\nTurns left: {self.max_turns - self.turn}.", reward, False, False, {}
