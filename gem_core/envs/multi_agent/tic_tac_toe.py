"""Tic-tac-toe for two seats (``x`` and ``o``), a turn-based self-play game.

The seed decides who moves first. Moves are a cell number 1-9 in ``\\boxed{}`` (1 is top left, 9 bottom
right). Rewards are zero-sum: +1 to the winner, -1 to the loser, 0 each on a draw. A malformed move or
an occupied cell costs that seat the format penalty and it moves again; ``max_invalid`` such moves in
a row forfeit the game (scored as a loss).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gem_core.envs.game.action_format import extract_boxed, read_number
from gem_core.errors import ResetNeeded
from gem_core.multi_agent import MultiAgentEnv, MultiStepResult
from gem_core.vector.calls import check_count

__all__ = ["TicTacToe", "LINES"]

LINES = ((0, 1, 2), (3, 4, 5), (6, 7, 8), (0, 3, 6), (1, 4, 7), (2, 5, 8), (0, 4, 8), (2, 4, 6))
"""The eight winning lines of the 3x3 board, as cell indices (row-major, 0-8)."""


class TicTacToe(MultiAgentEnv):
    """Tic-tac-toe for seats ``x`` and ``o`` (see the module docstring for the rules and rewards).

    Args:
        max_invalid: malformed or illegal moves in a row that forfeit the game.

    Raises:
        InvalidArgument: if ``max_invalid`` is not a whole number from 1.
    """
    agents = ("x", "o")

    def __init__(self, max_invalid: int = 3):
        self.max_invalid = check_count("max_invalid", max_invalid)
        self.board = [" "] * 9
        self.to_move: str | None = None
        self.invalid = {agent: 0 for agent in self.agents}

    def _board_text(self) -> str:
        cells = [c if c != " " else str(i + 1) for i, c in enumerate(self.board)]
        return "\n".join(" | ".join(cells[r * 3 : r * 3 + 3]) for r in range(3))

    def _prompt(self, agent: str, before: str = "") -> str:
        free = [str(i + 1) for i, c in enumerate(self.board) if c == " "]
        return (
            f"{before}You play {agent.upper()} in tic-tac-toe. Board (numbers are free cells):\n{self._board_text()}\n"
            f"Your move: one free cell ({', '.join(free)}) inside \\boxed{{}}, e.g. \\boxed{{{free[0]}}}."
        )

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        super().reset(seed=seed)
        self.board = [" "] * 9
        self.invalid = {agent: 0 for agent in self.agents}
        self.to_move = self.agents[int(self.np_random.integers(2))]
        return {self.to_move: self._prompt(self.to_move)}, {agent: {"first": self.to_move} for agent in self.agents}

    def acting_agents(self) -> tuple[str, ...]:
        return (self.to_move,) if self.to_move else ()

    def _winner(self) -> str | None:
        for a, b, c in LINES:
            if self.board[a] != " " and self.board[a] == self.board[b] == self.board[c]:
                return "x" if self.board[a] == "X" else "o"
        return None

    def _end(self, rewards: dict[str, float], text: dict[str, str], infos: dict[str, dict]) -> MultiStepResult:
        self.to_move = None
        ended = {agent: True for agent in self.agents}
        return text, rewards, ended, {agent: False for agent in self.agents}, infos

    def step(self, actions: Mapping[str, str]) -> MultiStepResult:  # type: ignore[override]
        r"""Play the acting seat's move.

        Args:
            actions: ``{agent: action}`` for the agent to move; the action holds a cell 1-9 in ``\boxed{}``.

        Returns:
            ``(observations, rewards, terminations, truncations, infos)``, each keyed by agent.

        Raises:
            ResetNeeded: if no game is in progress (before ``reset()``, or after the game ended).
            InvalidArgument: if ``actions`` does not hold exactly the acting agent's action.
            InvalidArgumentType: if ``actions`` is not a dict (e.g. a bare action string).
        """
        if self.to_move is None:
            raise ResetNeeded("No game is in progress (none started yet, or it is over): call reset() before step().")
        agent = self.to_move
        other = "o" if agent == "x" else "x"
        self.check_actions(actions)
        number = read_number(extract_boxed(actions[agent]))
        cell = number - 1 if number is not None and 1 <= number <= 9 else None
        if cell is None or self.board[cell] != " ":
            self.invalid[agent] += 1
            if self.invalid[agent] >= self.max_invalid:
                text = {agent: f"{self.max_invalid} invalid moves in a row: you forfeit.", other: "Your opponent forfeited: you win."}
                return self._end({agent: -1.0, other: 1.0}, text, {agent: {"winner": other, "forfeit": True}, other: {"winner": other}})
            why = "that cell is taken" if cell is not None else "expected one cell number 1-9"
            return {agent: self._prompt(agent, f"Invalid move ({why}). ")}, {agent: self.format_penalty}, {}, {}, {agent: {"format_error": True}}
        self.invalid[agent] = 0
        self.board[cell] = agent.upper()
        winner = self._winner()
        if winner or " " not in self.board:
            final = f"Final board:\n{self._board_text()}\n"
            if winner:
                text = {agent: final + "You win.", other: final + f"{agent.upper()} played {cell + 1} and wins."}
                return self._end({agent: 1.0, other: -1.0}, text, {a: {"winner": agent, "success": a == agent} for a in self.agents})
            text = {a: final + "Draw." for a in self.agents}
            return self._end({a: 0.0 for a in self.agents}, text, {a: {"winner": None} for a in self.agents})
        self.to_move = other
        return {other: self._prompt(other, f"{agent.upper()} played {cell + 1}. ")}, {agent: 0.0, other: 0.0}, {}, {}, {}

    def sample_random_action(self, agent: str) -> str:
        free = [i + 1 for i, c in enumerate(self.board) if c == " "] or [1]
        return f"\\boxed{{{free[int(self.np_random.integers(len(free)))]}}}"

    def render(self) -> str:
        """The board as three text rows, free cells shown by their number."""
        return self._board_text()
