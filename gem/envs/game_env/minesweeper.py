"""GEM's Minesweeper: 0-based ``\\boxed{reveal R C}`` / ``\\boxed{flag R C}``; the board is in ``info["suffix"]``.

Mines are placed at the first reveal, away from the revealed cell and its neighbours. Each reveal earns the
share of safe cells it opened, so clearing the board sums to 1; hitting a mine ends the game with 0.
"""

from __future__ import annotations

import re
from collections import deque
from typing import Any

from gem.envs.game_env.base import FAIL_REWARD, INTERNAL_STEP_REWARD, INVALID_ACTION_REWARD, GameEnv
from gem_core.errors import InvalidArgument
from gem_core.vector.calls import check_count

_MOVE = re.compile(r"\\boxed{([a-zA-Z]+)\s(\d+)\s(\d+)}")
_NEIGHBOURS = [(-1, -1), (-1, 0), (-1, 1), (0, -1), (0, 1), (1, -1), (1, 0), (1, 1)]
MINE = -1


class MinesweeperEnv(GameEnv):
    """``rows``/``cols``/``num_mines``/``max_turns`` None: each episode draws a square board of 5 to 8.

    Raises:
        InvalidArgument: ``rows``/``cols`` is not a whole number from 1, or ``num_mines`` does not fit outside
            the first reveal's safe zone (the revealed cell and its neighbours, which GEM keeps free of mines).
    """

    def __init__(self, rows: int | None = 8, cols: int | None = 8, num_mines: int | None = 10, max_turns: int | None = 20,
                 seed: int | None = None, **_: Any) -> None:
        super().__init__(seed)
        if rows is not None and cols is not None and num_mines is not None:
            rows, cols = check_count("rows", rows), check_count("cols", cols)
            # mines go outside the first reveal's 3x3 safe zone, or placing them never ends: the largest count
            # that fits wherever the first reveal is
            most = rows * cols - min(rows, 3) * min(cols, 3)
            num_mines = check_count("num_mines", num_mines, least=0)
            if num_mines > most:
                raise InvalidArgument(
                    f"num_mines={num_mines} does not fit on a {rows}x{cols} board: the first reveal keeps its cell and "
                    f"neighbours free, so at most {most} mines fit; pass num_mines=0 to {most} or a larger board."
                )
        # None anywhere: each episode draws the level (GEM's rule); otherwise reset() takes this one.
        self._level = None if rows is None or cols is None or num_mines is None or max_turns is None else (rows, cols, num_mines, max_turns)
        self.reset()

    def _instructions(self) -> str:
        reveal = self.sample_random_action("reveal")
        flag = self.sample_random_action("flag")
        reveal_row, reveal_col = reveal[len("\\boxed{"):-1].split()[1:]
        flag_row, flag_col = flag[len("\\boxed{"):-1].split()[1:]
        return (
            "You are playing the Minesweeper game.\n"
            "The objective of the game is to reveal all cells that do not contain mines.\n"
            "To make a move, you can either reveal a cell or place a flag on a suspected mine location using one of the following commands:\n"
            "- 'reveal': Reveal the contents of a specific cell.\n"
            "- 'flag': Place or remove a flag on a specific cell to mark it as a potential mine.\n"
            "To submit your move, type the command followed by the row and column in \\boxed{}.\n"
            "For example:\n"
            f"- {reveal} to reveal the cell in Row {reveal_row}, Column {reveal_col}.\n"
            f"- {flag} to place or remove a flag on the cell in Row {flag_row}, Column {flag_col}.\n"
            "The current board layout is shown below. Cells that are unrevealed are represented by a dot ('.'), revealed numbers show the count of adjacent mines, and flagged cells are marked with an 'F'.\n"
            "Use logic and deduction to avoid revealing cells with mines!\n"
            "Be mindful not to choose revealed or flagged cells.\n"
        )

    def _render_board(self) -> str:
        lines = ["   " + " ".join(str(c).rjust(2) for c in range(self.cols))]
        for r in range(self.rows):
            cells = []
            for c in range(self.cols):
                if self.revealed[r][c]:
                    cells.append(" * " if self.grid[r][c] == MINE else f" {self.grid[r][c]} ")
                else:
                    cells.append(" F " if self.flags[r][c] else " . ")
            lines.append(f"{r:2} " + "".join(cells))
        return "\n".join(lines) + "\n"

    def get_task_suffix(self) -> str:
        return f"Here is the current board layout:\n{self._render_board()}\nEnter your guess."

    def reset(self, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
        super().reset(seed, options)
        if self._level is None:
            size = self.rng.randint(5, 8)
            self.rows = self.cols = size
            self.num_mines, self.max_turns = size**2 // 5, size**2
        else:
            self.rows, self.cols, self.num_mines, self.max_turns = self._level
        self.grid = [[0] * self.cols for _ in range(self.rows)]
        self.revealed = [[False] * self.cols for _ in range(self.rows)]
        self.flags = [[False] * self.cols for _ in range(self.rows)]
        self.first_reveal = True
        self.turn_count = 0
        return self._instructions(), {"suffix": self.get_task_suffix()}

    def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        self.turn_count += 1
        found = _MOVE.findall(action)
        if not found:
            return self.format_error(f"At turn {self.turn_count}, you did not provide a valid guess.")
        kind, row, col = found[-1][0].lower(), int(found[-1][1]), int(found[-1][2])
        reward = INVALID_ACTION_REWARD
        if not (0 <= row < self.rows and 0 <= col < self.cols):
            observation = f"At turn {self.turn_count}, you chose cell ({row}, {col}), which is outside the bounds of the grid."
        elif kind == "reveal":
            if self.first_reveal:
                self._place_mines(row, col)
                self.first_reveal = False
            if self.grid[row][col] == MINE:
                return f"Game over! You hit a mine at ({row}, {col})", FAIL_REWARD, True, False, {"suffix": self.get_task_suffix()}
            if self.revealed[row][col] or self.flags[row][col]:
                observation = f"At turn {self.turn_count}, you chose to reveal cell ({row}, {col}), which has already been revealed."
            else:
                reward = self._reveal(row, col) / (self.rows * self.cols - self.num_mines)
                if self._is_solved():
                    return ("Congratulations! You have successfully cleared the Minesweeper board.", reward, True, False,
                            {"suffix": self.get_task_suffix()})
                observation = f"At turn {self.turn_count}, you successfully revealed cell ({row}, {col})."
        elif kind == "flag":
            if self.revealed[row][col]:
                observation = f"At turn {self.turn_count}, you chose to flag cell ({row}, {col}), which has already been revealed."
            else:
                self.flags[row][col] = not self.flags[row][col]
                observation = f"At turn {self.turn_count}, you {'added' if self.flags[row][col] else 'removed'} a flag on cell ({row}, {col})."
                reward = INTERNAL_STEP_REWARD
        else:
            observation = f"At turn {self.turn_count}, you chose an invalid action '{kind}'. Valid actions are 'reveal' or 'flag'."
        if self.turn_count >= self.max_turns:
            return "You have reached the maximum number of turns.", reward, True, True, {"suffix": self.get_task_suffix()}
        return observation, reward, False, False, {"suffix": self.get_task_suffix()}

    def _place_mines(self, safe_row: int, safe_col: int) -> None:
        mines: set[tuple[int, int]] = set()
        while len(mines) < self.num_mines:
            cell = (self.rng.randint(0, self.rows - 1), self.rng.randint(0, self.cols - 1))
            if cell not in mines and (abs(cell[0] - safe_row) > 1 or abs(cell[1] - safe_col) > 1):
                mines.add(cell)
                self.grid[cell[0]][cell[1]] = MINE
        for r in range(self.rows):
            for c in range(self.cols):
                if self.grid[r][c] != MINE:
                    self.grid[r][c] = sum(self.grid[nr][nc] == MINE for nr, nc in self._neighbours(r, c))

    def _neighbours(self, row: int, col: int) -> list[tuple[int, int]]:
        return [(row + dr, col + dc) for dr, dc in _NEIGHBOURS if 0 <= row + dr < self.rows and 0 <= col + dc < self.cols]

    def _reveal(self, row: int, col: int) -> int:
        """Open ``(row, col)`` and flood through zero cells (skipping flags); the number of cells opened."""
        self.revealed[row][col] = True
        opened, queue = 1, deque([(row, col)])
        while queue:
            r, c = queue.popleft()
            if self.grid[r][c] != 0:
                continue
            for nr, nc in self._neighbours(r, c):
                if not self.revealed[nr][nc] and not self.flags[nr][nc]:
                    self.revealed[nr][nc] = True
                    opened += 1
                    queue.append((nr, nc))
        return opened

    def _is_solved(self) -> bool:
        return all(
            self.flags[r][c] if self.grid[r][c] == MINE else self.revealed[r][c]
            for r in range(self.rows) for c in range(self.cols)
        )

    def sample_random_action(self, reveal_or_flag: str | None = None) -> str:
        if reveal_or_flag is None:
            reveal_or_flag = self.rng.choice(["reveal"] * 9 + ["flag"])
        row, col = self.rng.randint(0, self.rows - 1), self.rng.randint(0, self.cols - 1)
        return f"\\boxed{{{reveal_or_flag} {row} {col}}}"
