"""Sudoku: fill the grid so every row, column and box holds each digit once.

Puzzles are generated from the env's RNG: a full grid by randomized backtracking, then cells are
emptied in random order, each only if the puzzle keeps exactly one solution (so a filled, rule-abiding
grid is always *the* solution). A move writes one digit, ``\\boxed{ROW COL DIGIT}`` (from 1); a cell
you wrote may be overwritten, or erased with ``\\boxed{ROW COL 0}`` (two of your digits written swapped
could not otherwise be fixed: each cell's right digit repeats the other's), a given cell may not. A digit
that repeats one in its row, column or box is refused with the format penalty, as is anything malformed
(numbers are ASCII digits only).

Rewards (dense): the first time a cell holds its solution digit the move earns ``1 / blanks``, so a
solved grid always returns exactly :attr:`Sudoku.max_return` = 1.0.

Variants: ``-easy`` 4x4 (2x2 boxes) with 8 blanks, 16 turns; ``-v0`` 9x9 with 30 blanks, 45 turns;
``-hard`` 9x9 with 45 blanks, 60 turns.
"""

from __future__ import annotations

import logging
import re
from typing import Any

import numpy as np

from gem_core.env import StepResult, warn_once
from gem_core.envs.game.action_format import BOXED_HINT, extract_boxed
from gem_core.envs.game.turn_based import TurnBasedGame
from gem_core.errors import InvalidArgument
from gem_core.vector.calls import check_count

logger = logging.getLogger("gem.envs.sudoku")

_MOVE = re.compile(r"^([0-9]{1,6})\s*[ ,]\s*([0-9]{1,6})\s*[ ,]\s*([0-9]{1,6})$")


def _candidates(grid: np.ndarray, r: int, c: int, box_rows: int, box_cols: int) -> set[int]:
    size = grid.shape[0]
    br, bc = r - r % box_rows, c - c % box_cols
    used = set(grid[r].tolist()) | set(grid[:, c].tolist()) | set(grid[br : br + box_rows, bc : bc + box_cols].flat)
    return set(range(1, size + 1)) - used


def count_solutions(grid: np.ndarray, box_rows: int, box_cols: int, limit: int = 2, steps: int | None = None) -> int:
    """Solutions of ``grid`` (0 = empty), counted up to ``limit`` (most-constrained cell first); ``grid`` is left as it was.

    The digits used in each row, column and box are bit masks, the empty cells a list: a reset counts solutions
    once per blank it tries, and this search on numpy items and sets took most of a 9x9 reset.

    ``steps`` caps the cells the search fills: past it the answer is ``limit``, so a reset asking whether a
    blank keeps the solution unique hears "no" and keeps the cell, never a wrong "yes". Without it, a 12x12
    grid with most cells blank took half a minute, a 16x16 one hours.
    """
    size = grid.shape[0]
    boxes_across = size // box_cols
    rows, cols, boxes = [0] * size, [0] * size, [0] * size
    empty: list[tuple[int, int, int]] = []
    for r, line in enumerate(grid.tolist()):
        for c, digit in enumerate(line):
            b = r // box_rows * boxes_across + c // box_cols
            if digit:
                bit = 1 << digit
                rows[r] |= bit
                cols[c] |= bit
                boxes[b] |= bit
            else:
                empty.append((r, c, b))
    digits = (1 << (size + 1)) - 2  # bits 1..size
    steps_left = -1 if steps is None else steps  # below zero: no cap

    def search(unfilled: int, limit: int) -> int:  # empty[:unfilled] are still empty
        nonlocal steps_left
        if unfilled == 0:
            return 1
        if steps_left == 0:
            return limit
        steps_left -= 1
        best, best_free, best_count = 0, 0, size + 1
        for i in range(unfilled):
            r, c, b = empty[i]
            free = digits & ~(rows[r] | cols[c] | boxes[b])
            count = free.bit_count()
            if count < best_count:
                best, best_free, best_count = i, free, count
                if count <= 1:
                    break
        last = unfilled - 1
        empty[best], empty[last] = empty[last], empty[best]
        r, c, b = empty[last]
        found = 0
        while best_free:  # smallest digit first, as sorted() gave
            bit = best_free & -best_free
            best_free ^= bit
            rows[r] |= bit
            cols[c] |= bit
            boxes[b] |= bit
            found += search(last, limit - found)
            rows[r] ^= bit
            cols[c] ^= bit
            boxes[b] ^= bit
            if found >= limit:
                break
        empty[best], empty[last] = empty[last], empty[best]
        return found

    return search(len(empty), limit)


#: Steps (cells tried) one attempt at a full grid may take before it starts over from fresh draws, and the
#: attempts made before giving up. The backtracking's time has a heavy tail that fresh starts cut (a 12x12 grid
#: took up to 350,000 steps, over ten seconds, on 1,000 seeds); a 9x9 grid needs at most ~700 steps (20,000
#: seeds), so no seed of the shipped sizes starts over and each still deals the grid it always dealt.
FILL_STEPS, FILL_ATTEMPTS = 2_000, 200
#: Cells one uniqueness check may fill before the blank it tests is kept (see :func:`count_solutions`).
SEARCH_STEPS = 2_000
#: The largest grid side (``box_rows * box_cols``): a 12x12 reset takes under a second whatever the blanks,
#: a 16x16 one up to 3 s, and a 25x25 grid was never completed in minutes.
MAX_SIZE = 12


def random_full_grid(rng: np.random.Generator, box_rows: int, box_cols: int) -> np.ndarray:
    """A complete valid grid by randomized backtracking, started over after :data:`FILL_STEPS` steps.

    Raises:
        InvalidArgument: if none of :data:`FILL_ATTEMPTS` attempts completes a grid (the message names the boxes).
    """
    size = box_rows * box_cols
    grid = np.zeros((size, size), dtype=int)
    steps_left = 0

    def fill(i: int) -> bool:
        nonlocal steps_left
        if i == size * size:
            return True
        if steps_left == 0:  # this attempt is over: unwind without drawing again
            return False
        steps_left -= 1
        r, c = divmod(i, size)
        # The cell's candidates once per visit: a digit tried and undone here stays out of them, and the
        # permutation never offers it again, so membership is what a fresh look per digit would give.
        candidates = _candidates(grid, r, c, box_rows, box_cols)
        for d in rng.permutation(np.arange(1, size + 1)):
            if d in candidates:
                grid[r, c] = d
                if fill(i + 1):
                    return True
        grid[r, c] = 0
        return False

    for _ in range(FILL_ATTEMPTS):
        grid[:] = 0
        steps_left = FILL_STEPS
        if fill(0):
            return grid
    raise InvalidArgument(
        f"No full {size}x{size} grid (box_rows={box_rows}, box_cols={box_cols}) in {FILL_ATTEMPTS} attempts of "
        f"{FILL_STEPS} steps; use smaller boxes."
    )


class Sudoku(TurnBasedGame):
    def __init__(self, box_rows: int = 3, box_cols: int = 3, blanks: int = 30, max_turns: int = 45):
        """Boxes of ``box_rows`` x ``box_cols`` cells make a grid of side ``box_rows * box_cols``.

        Raises:
            InvalidArgument: if a setting is not a whole number in range: the side past :data:`MAX_SIZE`, or
                ``blanks`` not below the number of cells.
        """
        size = check_count("box_rows", box_rows, most=MAX_SIZE) * check_count("box_cols", box_cols, most=MAX_SIZE)
        if size > MAX_SIZE:
            raise InvalidArgument(
                f"box_rows * box_cols = {size} must be at most {MAX_SIZE}: a larger grid takes seconds to minutes to generate."
            )
        if check_count("blanks", blanks) >= size * size:
            raise InvalidArgument(f"blanks must be between 1 and {size * size - 1} for a {size}x{size} grid, got {blanks}.")
        check_count("max_turns", max_turns)
        self.box_rows, self.box_cols, self.size = box_rows, box_cols, size
        self.blanks, self.max_turns = blanks, max_turns
        self.solution = np.zeros((size, size), dtype=int)
        self.given = np.zeros((size, size), dtype=bool)
        self.grid = np.zeros((size, size), dtype=int)
        self.credited = np.zeros((size, size), dtype=bool)
        self.started = False

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
        """Deal a puzzle with ``blanks`` blanks and one solution, or as many as the seed's grid can lose and keep one.

        A seed whose grid keeps one solution only with fewer blanks (a ``blanks`` near the grid's limit) deals that
        many: ``info["blanks"]`` says how many, each cell then earns ``1 / info["blanks"]`` (a solved grid still
        returns 1.0), and a warning names the setting once per process. Refusing the seed instead would end a
        training run at whichever rare seed falls short.
        """
        super().reset(seed=seed)
        self.solution = random_full_grid(self.np_random, self.box_rows, self.box_cols)
        puzzle = self.solution.copy()
        removed = 0
        for i in self.np_random.permutation(self.size * self.size):
            if removed == self.blanks:
                break
            r, c = divmod(int(i), self.size)
            puzzle[r, c] = 0
            if count_solutions(puzzle.copy(), self.box_rows, self.box_cols, steps=SEARCH_STEPS) == 1:
                removed += 1
            else:
                puzzle[r, c] = self.solution[r, c]
        if removed < self.blanks:
            warn_once(
                logger, ("sudoku-blanks", self.size, self.blanks),
                "Sudoku blanks=%d: seed %s's %dx%d grid keeps one solution with at most %d blanks; dealt %d "
                "(info['blanks']; lower blanks to deal the same count every episode).",
                self.blanks, seed, self.size, self.size, removed, removed,
            )
        self.grid, self.given = puzzle, puzzle != 0
        self.credited = np.zeros_like(self.given)
        self.started = True
        obs = (
            f"Let's play Sudoku on a {self.size}x{self.size} grid with {self.box_rows}x{self.box_cols} boxes. Fill every "
            f"empty cell (.) so each row, column and box holds each digit 1-{self.size} exactly once. Each turn write one "
            f"digit as \\boxed{{ROW COL DIGIT}} (rows and columns from 1); you may overwrite your own digits, or erase one "
            f"with \\boxed{{ROW COL 0}}, but not the given ones. You have at most {self.max_turns} turns. " + BOXED_HINT % "1 2 3" + f"\n{self.render()}"
        )
        return obs, {"max_turns": self.max_turns, "blanks": removed}

    def step(self, action: str) -> StepResult:
        out_of_turns = self.take_turn()
        match = _MOVE.match(extract_boxed(action) or "")
        problem = None
        if match is None:
            problem = "expected \\boxed{ROW COL DIGIT}, e.g. \\boxed{1 2 3} (DIGIT 0 erases a digit you wrote)"
        else:
            r, c, d = (int(x) for x in match.groups())
            r, c = r - 1, c - 1
            if not (0 <= r < self.size and 0 <= c < self.size and 0 <= d <= self.size):
                problem = f"rows, columns and digits go from 1 to {self.size} (digit 0 erases a digit you wrote)"
            elif self.given[r, c]:
                problem = f"cell {r + 1} {c + 1} is given and cannot change (0 erases only digits you wrote)"
            elif d:
                previous, self.grid[r, c] = self.grid[r, c], 0
                if d not in _candidates(self.grid, r, c, self.box_rows, self.box_cols):
                    self.grid[r, c] = previous
                    problem = f"{d} already appears in row {r + 1}, column {c + 1} or their box"
        if problem is not None:
            return self.invalid_move(problem, out_of_turns)
        self.grid[r, c] = d
        reward = 0.0
        if d == self.solution[r, c] and not self.credited[r, c]:
            self.credited[r, c] = True
            reward = 1.0 / int((~self.given).sum())
        return self.end_turn(reward, out_of_turns, won=(self.grid == self.solution).all())

    def sample_random_action(self) -> str:
        """A random digit that breaks no rule in a random open cell (may still be wrong)."""
        moves = []
        for r, c in zip(*np.nonzero(~self.given), strict=True):
            previous, self.grid[r, c] = self.grid[r, c], 0
            moves += [(int(r), int(c), d) for d in sorted(_candidates(self.grid, r, c, self.box_rows, self.box_cols))]
            self.grid[r, c] = previous
        if not moves:  # a dead end: every open cell is blocked; any open cell with any digit then
            r, c = divmod(int(np.flatnonzero(~self.given)[0]), self.size)
            moves = [(r, c, 1)]
        r, c, d = moves[int(self.np_random.integers(len(moves)))]
        return f"\\boxed{{{r + 1} {c + 1} {d}}}"

    def render(self) -> str:
        """The grid, ``.`` for an empty cell, ``|`` and ``-`` between boxes."""
        lines = []
        for r in range(self.size):
            if r and r % self.box_rows == 0:
                lines.append("-" * (2 * self.size + 2 * (self.size // self.box_cols - 1) - 1))
            cells = [str(v) if v else "." for v in self.grid[r]]
            groups = [" ".join(cells[i : i + self.box_cols]) for i in range(0, self.size, self.box_cols)]
            lines.append(" | ".join(groups))
        return "\n".join(lines)
