"""GEM's Sudoku: ``\\boxed{row column number}`` (1-based) on a ``scale``x``scale`` grid with a unique solution.

Each correct placement earns ``1 / (empty cells at the start)``, so a solved puzzle sums to 1; a wrong
number, a filled cell or an out-of-range move earns 0 and costs the turn.
"""

from __future__ import annotations

import copy
import math
import re
from typing import Any

from gem.envs.game_env.base import INVALID_ACTION_REWARD, GameEnv
from gem_core.errors import InvalidArgument
from gem_core.vector.calls import check_count

_MOVE = re.compile(r"\\boxed{(\d+)\s(\d+)\s(\d+)}")
Grid = list[list[int]]


class SudokuEnv(GameEnv):
    """``scale``/``clues``/``max_turns`` None: each episode draws 4x4 with 10 clues or 9x9 with 50.

    Raises:
        InvalidArgument: ``scale`` is not a square number (the grid is cut into ``sqrt(scale)``-wide boxes), or
            ``clues`` is not a whole number from 0 to ``scale**2`` (the cells there are).
    """

    def __init__(self, clues: int | None = 30, max_turns: int | None = 100, scale: int | None = 9, seed: int | None = None,
                 **_: Any) -> None:
        super().__init__(seed)
        if scale is not None and clues is not None:
            scale = check_count("scale", scale)
            if math.isqrt(scale) ** 2 != scale:
                raise InvalidArgument(f"scale={scale} is not a square number, so the grid has no square boxes: pass "
                                      "scale=4 or 9 (GEM's levels), or another square such as 16.")
            clues = check_count("clues", clues, least=0, most=scale**2)
        # None anywhere: each episode draws the level (GEM's rule); otherwise reset() takes this one.
        self._level = None if scale is None or clues is None or max_turns is None else (scale, clues, max_turns)
        self.reset()

    def _instructions(self) -> str:
        n = self.scale
        return (
            f"You are playing {'A simple version of' if n == 4 else ''} Sudoku.\n"
            f"Each row is numbered from 1 to {n}, and each column is also numbered from 1 to {n}.\n"
            f"Empty cells are represented by '.', and pre-filled cells contain digits from 1 to {n}.\n\n"
            f"Your objective is to fill the empty cells in the {n}x{n} grid with digits from 1 to {n} such that:\n"
            f"1. Each row contains all digits from 1 to {n} without repetition.\n"
            f"2. Each column contains all digits from 1 to {n} without repetition.\n"
            f"3. Each of the nine {n}x{n} subgrids contains all digits from 1 to {n} without repetition.\n\n"
            "Rules and Instructions:\n"
            "1. **Do not overwrite** the initial numbers provided in the grid.\n"
            "2. **Only fill** empty cells represented by '.'.\n"
            "3. You may respond in any manner you prefer, but ensure that your response includes the format of '\\boxed{row column number}', e.g. \\boxed{1 1 5}.\n"
            "4. **Ensure** that your move does not violate Sudoku rules. Invalid moves, including overwriting pre-filled cells and placing two numbers in one row/col/sub-grid will result in penalties.\n"
            "The history of your moves will be appended as you play more rounds. Use the history of your move to improve your decision making by avoiding the moves you have tried. Good luck!\n\n"
        )

    def _render_board(self) -> str:
        box = int(self.scale**0.5)
        lines = ["   " + " ".join(f"C{j + 1}" + ("  " if (j + 1) % box == 0 else "") for j in range(self.scale))]
        for i, row in enumerate(self.board):
            text = f"R{i + 1} "
            for j, number in enumerate(row):
                text += f" {number or '.'} " + ("| " if (j + 1) % box == 0 and j < self.scale - 1 else "")
            lines.append(text.strip())
            if (i + 1) % box == 0 and i < self.scale - 1:
                lines.append("   " + "- " * 2 * (self.scale - 1))
        return "\n".join(lines)

    def get_task_suffix(self) -> str:
        return f"Here is the current board layout:\n{self._render_board()}\nEnter your move."

    def reset(self, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
        super().reset(seed, options)
        self.scale, self.clues, self.max_turns = self._level or self.rng.choice([(4, 10, 15), (9, 50, 50)])
        self.full_grid = [[0] * self.scale for _ in range(self.scale)]
        self._fill(self.full_grid)
        self.board = self._remove_cells(self.full_grid)
        self.init_num_empty = sum(row.count(0) for row in self.board)
        self.turn_count = 0
        return self._instructions(), {"suffix": self.get_task_suffix()}

    def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        self.turn_count += 1
        found = _MOVE.findall(action)
        if not found:
            return self.format_error("You did not provide a valid guess.")
        row, col, number = map(int, found[-1])
        reward = INVALID_ACTION_REWARD
        where = f"At turn {self.turn_count}, you tried to place {number} at R{row} C{col}"
        if not all(1 <= value <= self.scale for value in (row, col, number)):
            observation = f"{where}, which is out of bounds."
        elif self.board[row - 1][col - 1]:
            observation = f"{where}, which is already filled. You cannot overwrite pre-filled cells."
        elif self.full_grid[row - 1][col - 1] == number:
            self.board[row - 1][col - 1] = number
            reward = 1 / self.init_num_empty
            if self.board == self.full_grid:
                return "Congratulations! You have completed the Sudoku puzzle!", reward, True, False, {"suffix": self.get_task_suffix()}
            observation = f"At turn {self.turn_count}, you placed {number} at R{row} C{col}, which is correct."
        else:
            observation = f"{where}, which violates Sudoku rules."
        if self.turn_count >= self.max_turns:
            return "You have reached the maximum number of turns.", reward, True, True, {"suffix": self.get_task_suffix()}
        return observation, reward, False, False, {"suffix": self.get_task_suffix()}

    def _first_empty(self, grid: Grid) -> tuple[int, int] | None:
        return next(((i, j) for i in range(self.scale) for j in range(self.scale) if not grid[i][j]), None)

    def _allowed(self, grid: Grid, row: int, col: int, number: int) -> bool:
        box = int(self.scale**0.5)
        top, left = box * (row // box), box * (col // box)
        return (number not in grid[row]
                and all(grid[i][col] != number for i in range(self.scale))
                and all(grid[i][j] != number for i in range(top, top + box) for j in range(left, left + box)))

    def _fill(self, grid: Grid) -> bool:
        """Complete ``grid`` by backtracking over shuffled digits (GEM's draw order)."""
        empty = self._first_empty(grid)
        if empty is None:
            return True
        row, col = empty
        numbers = list(range(1, self.scale + 1))
        self.rng.shuffle(numbers)
        for number in numbers:
            if self._allowed(grid, row, col, number):
                grid[row][col] = number
                if self._fill(grid):
                    return True
                grid[row][col] = 0
        return False

    def _count_solutions(self, grid: Grid, limit: int = 2) -> int:
        empty = self._first_empty(grid)
        if empty is None:
            return 1
        row, col = empty
        found = 0
        for number in range(1, self.scale + 1):
            if found >= limit:
                break
            if self._allowed(grid, row, col, number):
                grid[row][col] = number
                found += self._count_solutions(grid, limit - found)
                grid[row][col] = 0
        return found

    def _remove_cells(self, solution: Grid) -> Grid:
        """Blank shuffled cells, keeping each blank only while the solution stays unique, down to ``clues``."""
        puzzle = copy.deepcopy(solution)
        cells = [(i, j) for i in range(self.scale) for j in range(self.scale)]
        self.rng.shuffle(cells)
        while len(cells) > self.scale**2 - self.clues:
            row, col = cells.pop()
            kept, puzzle[row][col] = puzzle[row][col], 0
            if self._count_solutions(copy.deepcopy(puzzle)) != 1:
                puzzle[row][col] = kept
        return puzzle
