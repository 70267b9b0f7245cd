"""Minesweeper: reveal every safe cell of a grid without stepping on a mine.

Moves are ``\\boxed{reveal ROW COL}`` (or just ``\\boxed{ROW COL}``) and ``\\boxed{flag ROW COL}``
(flags toggle and are only a note to yourself), rows and columns counted from 1. A revealed cell shows
how many of its eight neighbours hold mines; revealing a 0 opens its neighbours too.

The mines are placed after the first reveal, away from it and its neighbours, and the placement is
redrawn (from the env's RNG) until the board can be cleared by logic alone (the single-cell rule, the
subset rule between two numbered cells, and the mine count), so a player never has to guess. If no
such placement turns up in ``placement_attempts`` draws the last one is kept (not seen for the shipped
variants).

Rewards (dense): each reveal earns the number of safe cells it opened divided by the number of safe
cells, so clearing the board always returns exactly :attr:`Minesweeper.max_return` = 1.0. Revealing a
mine ends the episode (reward 0, ``success`` False). Malformed moves, coordinates off the board and
revealing an open cell earn the format penalty.

Variants: ``-easy`` 5x5 with 3 mines, 30 turns; ``-v0`` 8x8 with 10 mines, 80 turns; ``-hard`` 10x10
with 18 mines, 120 turns.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterator
from typing import Any

import numpy as np

from gem_core.env import StepResult
from gem_core.envs.game.action_format import BOXED_HINT, extract_boxed
from gem_core.envs.game.turn_based import TurnBasedGame
from gem_core.errors import InvalidArgument
from gem_core.vector.calls import check_count

_MOVE = re.compile(r"^(?:(reveal|flag|r|f)\s+)?([0-9]{1,6})\s*[ ,]\s*([0-9]{1,6})$", re.IGNORECASE)

Cell = tuple[int, int]


def neighbours(cell: Cell, rows: int, cols: int) -> list[Cell]:
    r, c = cell
    return [
        (r + dr, c + dc)
        for dr in (-1, 0, 1)
        for dc in (-1, 0, 1)
        if (dr or dc) and 0 <= r + dr < rows and 0 <= c + dc < cols
    ]


def _bits(mask: int) -> Iterator[int]:
    """The indices of the set bits of ``mask``, lowest first."""
    while mask:
        low = mask & -mask
        yield low.bit_length() - 1
        mask ^= low


class BitGrid:
    """A ``rows x cols`` board as Python ints, one bit per cell: bit ``row * width + col``, where each row
    is followed by two guard bits that stay clear (``width = cols + 2``).

    Whole-board steps (the 3x3 neighbourhood of a set of cells, the flood through cells with no mine
    around) are a few shifts and bitwise operations on one integer instead of a Python loop over cells.
    The guard bits catch what a shift by one or two columns pushes past a row's end, so the shifts need
    no per-column masks; the placement check at the first reveal, which runs once per draw and dominates
    the short episodes a random policy plays, is mostly such shifts.
    """

    def __init__(self, rows: int, cols: int):
        self.rows, self.cols, self.width = rows, cols, cols + 2
        self.full = sum(((1 << cols) - 1) << (r * self.width) for r in range(rows))  # every cell, no guard bit
        self.cells = [r * self.width + c for r in range(rows) for c in range(cols)]  # the cells' bits, row by row
        self.neighbours = [self.around(1 << i) & ~(1 << i) if self.full >> i & 1 else 0 for i in range(rows * self.width)]
        self.header = "   " + " ".join(f"{c + 1:>2}" for c in range(cols))
        self.row_labels = [f"{r + 1:>2} " for r in range(rows)]
        self.hidden_rows = [label + " ".join([" #"] * cols) for label in self.row_labels]  # a fresh board's rows
        self._allowed: dict[int, tuple[int, ...]] = {}

    def index(self, cell: Cell) -> int:
        return cell[0] * self.width + cell[1]

    def around(self, cells: int) -> int:
        """``cells`` (no guard bits) and every cell next to one of them (the 3x3 blocks around them)."""
        row = cells | (cells << 1) | (cells >> 1)
        return (row | (row << self.width) | (row >> self.width)) & self.full

    def allowed_mines(self, first: int) -> tuple[int, ...]:
        """The cells a mine may take when ``first`` is the first reveal (all but its 3x3), as single-bit masks."""
        if first not in self._allowed:
            free = self.around(1 << first)
            self._allowed[first] = tuple(1 << i for i in self.cells if not free >> i & 1)
        return self._allowed[first]

    def flood(self, start: int, revealed: int, zeros: int) -> int:
        """``revealed`` plus the safe cells ``start`` and, through cells with no mine around, their regions."""
        new = start & ~revealed
        while new:
            revealed |= new
            new = self.around(new & zeros) & ~revealed  # a zero's neighbours are never mines
        return revealed

    def to_bits(self, cells: np.ndarray) -> int:
        """A ``rows x cols`` boolean array as a bit board."""
        padded = np.zeros((self.rows, self.width), dtype=bool)
        padded[:, : self.cols] = cells
        return int.from_bytes(np.packbits(padded.ravel(), bitorder="little").tobytes(), "little")

    def to_array(self, bits: int) -> np.ndarray:
        """A bit board as a ``rows x cols`` boolean array (a copy)."""
        size = self.rows * self.width
        packed = np.frombuffer(bits.to_bytes((size + 7) // 8, "little"), dtype=np.uint8)
        cells = np.unpackbits(packed, count=size, bitorder="little").astype(bool).reshape(self.rows, self.width)
        return cells[:, : self.cols].copy()


@functools.cache
def bit_grid(rows: int, cols: int) -> BitGrid:
    return BitGrid(rows, cols)


def clearable_by_logic(first: Cell, mines: np.ndarray) -> bool:
    """Whether a player who reasons (single-cell and subset rules, mine count) clears the board from ``first``."""
    grid = bit_grid(*mines.shape)
    return _clearable(grid, grid.index(first), grid.to_bits(mines))


def _clearable(grid: BitGrid, first: int, mines: int) -> bool:
    """:func:`clearable_by_logic` on bit boards.

    The rules only ever add knowledge and stay true as knowledge grows, so applying them in any order
    reaches the same end (``test_games`` checks the verdicts against the first version on random boards).
    Knowing the board makes each rule a few whole-board bit operations, because every deduction is
    sound: the known mines are mines and the opened cells are safe. A revealed cell's count equals its
    known mines exactly when no unknown mine is next to it (then its hidden neighbours are safe), and
    its unknown neighbours are exactly its missing mines when no hidden safe cell is next to it (then
    they are mines). Both rules spread a set to the 3x3 blocks, keep the revealed cells outside it and
    spread those again, so they run together on two boards laid side by side in one integer (the
    unknown mines low, the hidden safe cells ``gap`` bits up, a guard row between them); the spreads
    are written out because they run about twenty times per check, and the check about 2.5 times per
    episode of a random policy.
    """
    full, width = grid.full, grid.width
    gap = (grid.rows + 1) * width
    safe_cells = full & ~mines
    spread = mines | (mines << 1) | (mines >> 1)
    zeros = safe_cells & ~(spread | (spread << width) | (spread >> width))
    revealed = known = 0
    new = 1 << first
    while True:
        while new:  # open the new safe cells and, through cells with no mine around, their regions
            revealed |= new
            spread = new & zeros
            spread |= (spread << 1) | (spread >> 1)
            new = (spread | (spread << width) | (spread >> width)) & safe_cells & ~revealed
        hidden_safe = safe_cells & ~revealed
        unknown_mines = mines & ~known
        if not hidden_safe or not unknown_mines:  # all open, or the mine count says the rest is safe
            return True
        spread = unknown_mines | (hidden_safe << gap)
        spread |= (spread << 1) | (spread >> 1)
        both_revealed = revealed | (revealed << gap)
        spread = both_revealed & ~(spread | (spread << width) | (spread >> width))
        spread |= (spread << 1) | (spread >> 1)
        spread |= (spread << width) | (spread >> width)
        new = spread & hidden_safe  # next to a revealed cell with no unknown mine around
        found = (spread >> gap) & unknown_mines  # next to a revealed cell with no hidden safe cell around
        if not new and not found:
            new, found = _subset_rule(grid, revealed, hidden_safe, unknown_mines)
            if not new and not found:
                return False
        known |= found


def _subset_rule(grid: BitGrid, revealed: int, hidden_safe: int, unknown_mines: int) -> tuple[int, int]:
    """Safe cells and mines that follow from one constraint's cells lying inside another's.

    The constraints are each revealed cell's unknown neighbours and the mine count over all unknown
    cells. When ``A`` lies inside ``B`` the cells of ``B`` outside ``A`` hold ``need(B) - need(A)``
    mines, which (the deductions being sound) is the number of mines among them: they are safe when
    that is none and mines when it is all. The first pairs that deduce anything are enough (the order
    of deductions does not change the verdict): pairs of side-by-side cells first (as bit operations,
    they give most deductions), then the mine count's pairs, then all the others.
    """
    safe, found = _neighbour_pairs(grid, revealed, hidden_safe, unknown_mines)
    if safe or found:
        return safe, found
    unknown = hidden_safe | unknown_mines
    neighbours, cells = grid.neighbours, set()
    frontier = revealed & grid.around(unknown)
    while frontier:
        low = frontier & -frontier
        cells.add(neighbours[low.bit_length() - 1] & unknown)
        frontier ^= low
    for inside in cells:  # a revealed cell's unknown neighbours inside all the unknown cells
        rest = unknown & ~inside
        if rest and not rest & unknown_mines:
            safe |= rest
        elif rest and not rest & hidden_safe:
            found |= rest
    if safe or found:
        return safe, found
    ordered = sorted(cells, key=int.bit_count)  # a proper subset comes before its superset
    for i, inside in enumerate(ordered):
        for outside in ordered[i + 1 :]:
            if inside & outside == inside:
                rest = outside & ~inside
                if not rest & unknown_mines:
                    safe |= rest
                elif not rest & hidden_safe:
                    found |= rest
        if safe or found:
            break
    return safe, found


def _neighbour_pairs(grid: BitGrid, revealed: int, hidden_safe: int, unknown_mines: int) -> tuple[int, int]:
    """The subset rule for revealed cells ``a`` and ``b`` side by side, on all such pairs at once.

    For ``b`` right of ``a`` the cells next to ``a`` but not ``b`` are column ``c-1`` of rows ``r-1..r+1``
    and those next to ``b`` but not ``a`` column ``c+2``: ``a``'s unknown neighbours lie inside ``b``'s
    when its own column has no unknown cell, and then ``b``'s own column is safe if it holds no unknown
    mine (and mines if it holds no hidden safe cell); the same the other way round, and for ``b`` below ``a``.
    """
    width = grid.width
    safe = found = 0
    pairs = revealed & (revealed >> 1)  # a and a + 1 revealed
    if pairs:
        near_safe = hidden_safe | (hidden_safe << width) | (hidden_safe >> width)
        near_mine = unknown_mines | (unknown_mines << width) | (unknown_mines >> width)
        left_safe, left_mine, right_safe, right_mine = near_safe << 1, near_mine << 1, near_safe >> 2, near_mine >> 2
        a_in_b, b_in_a = pairs & ~(left_safe | left_mine), pairs & ~(right_safe | right_mine)
        for rest, is_safe in (
            ((a_in_b & right_safe & ~right_mine) << 2, True),
            ((a_in_b & right_mine & ~right_safe) << 2, False),
            ((b_in_a & left_safe & ~left_mine) >> 1, True),
            ((b_in_a & left_mine & ~left_safe) >> 1, False),
        ):
            if rest:
                rest |= (rest << width) | (rest >> width)
                if is_safe:
                    safe |= rest
                else:
                    found |= rest
    pairs = revealed & (revealed >> width)  # a and a + width (the cell below) revealed
    if pairs:
        near_safe = hidden_safe | (hidden_safe << 1) | (hidden_safe >> 1)
        near_mine = unknown_mines | (unknown_mines << 1) | (unknown_mines >> 1)
        up_safe, up_mine = near_safe << width, near_mine << width
        down_safe, down_mine = near_safe >> (2 * width), near_mine >> (2 * width)
        a_in_b, b_in_a = pairs & ~(up_safe | up_mine), pairs & ~(down_safe | down_mine)
        for rest, is_safe in (
            ((a_in_b & down_safe & ~down_mine) << (2 * width), True),
            ((a_in_b & down_mine & ~down_safe) << (2 * width), False),
            ((b_in_a & up_safe & ~up_mine) >> width, True),
            ((b_in_a & up_mine & ~up_safe) >> width, False),
        ):
            if rest:
                rest |= (rest << 1) | (rest >> 1)
                if is_safe:
                    safe |= rest
                else:
                    found |= rest
    return safe & hidden_safe, found & unknown_mines


#: an open cell's text by its number of mines around
_OPEN_CELL = [" ."] + [f"{n:>2}" for n in range(1, 9)]


@functools.cache
def _rules(rows: int, cols: int, mines: int, max_turns: int) -> str:
    """The first observation's text before the board (the same for every episode of a configuration)."""
    return (
        f"Let's play Minesweeper on a {rows}x{cols} grid with {mines} hidden mines. "
        "Reveal every safe cell without revealing a mine. A revealed cell shows how many of its 8 neighbours are "
        "mines (revealing a 0 opens its neighbours). Your first reveal is always safe. Moves: \\boxed{reveal ROW COL} "
        "or \\boxed{flag ROW COL} (flags are notes for you), rows and columns from 1. "
        f"You have at most {max_turns} turns. " + BOXED_HINT % f"reveal {(rows + 1) // 2} {(cols + 1) // 2}"
    )


#: The longest side: the first reveal checks each drawn board for a clearable start, which took 7 s at 99x99.
MAX_SIDE = 50


class Minesweeper(TurnBasedGame):
    def __init__(self, rows: int = 8, cols: int = 8, mines: int = 10, max_turns: int = 80, placement_attempts: int = 300):
        """A ``rows`` x ``cols`` board with ``mines`` mines, placed at the first reveal (up to
        ``placement_attempts`` draws, for a board that can be cleared without guessing).

        Raises:
            InvalidArgument: if a setting is not a whole number from 1 (the sides at most :data:`MAX_SIDE`), or
                ``mines`` leaves no room for the first reveal's free 3x3.
        """
        check_count("rows", rows, most=MAX_SIDE)
        check_count("cols", cols, most=MAX_SIDE)
        check_count("max_turns", max_turns)
        check_count("placement_attempts", placement_attempts)
        if not 0 < check_count("mines", mines) <= rows * cols - 9:
            raise InvalidArgument(f"mines must be between 1 and rows*cols-9 = {rows * cols - 9} (the first reveal's 3x3 is kept free), got {mines}.")
        self.rows, self.cols, self.num_mines, self.max_turns = rows, cols, mines, max_turns
        self.placement_attempts = placement_attempts
        self.placed = False
        self.started = False
        self.exploded: Cell | None = None
        self._new_board()

    def _new_board(self) -> None:
        # The board lives in bit masks (one bit per cell) and the rendered cells and rows, updated as they
        # change: a step touches a few cells, so it never walks the whole board.
        self._grid = grid = bit_grid(self.rows, self.cols)
        self._mine_bits = self._revealed_bits = self._flag_bits = self._zero_bits = 0
        self._cells = [" #"] * (self.rows * grid.width)  # by bit index (the guard bits' entries unused)
        self._rows = grid.hidden_rows.copy()
        self._stale_rows = 0  # bit r: row r's text is out of date
        self._hidden = grid.cells.copy()  # the hidden cells' bit indices, in order

    @property
    def mines(self) -> np.ndarray:
        """Where the mines are (a copy; all False until the first reveal places them)."""
        return self._grid.to_array(self._mine_bits)

    @property
    def revealed(self) -> np.ndarray:
        """Which cells are open (a copy)."""
        return self._grid.to_array(self._revealed_bits)

    @property
    def flags(self) -> np.ndarray:
        """Which hidden cells carry a flag (a copy)."""
        return self._grid.to_array(self._flag_bits & ~self._revealed_bits)

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
        super().reset(seed=seed)
        self._new_board()
        self.placed, self.started, self.exploded = False, True, None
        return f"{_rules(self.rows, self.cols, self.num_mines, self.max_turns)}\n{self.render()}", {"max_turns": self.max_turns}

    def _place_mines(self, first: Cell) -> None:
        grid = self._grid
        start = grid.index(first)
        allowed = grid.allowed_mines(start)
        draw, pick, size = self.np_random.choice, allowed.__getitem__, self.num_mines
        for _ in range(self.placement_attempts):
            # the same draw as ``choice(allowed, ...)`` (the same boards per seed), without a list-to-array copy
            bits = sum(map(pick, draw(len(allowed), size=size, replace=False).tolist()))
            if _clearable(grid, start, bits):
                break
        self._mine_bits, self.placed = bits, True
        self._zero_bits = grid.full & ~bits & ~grid.around(bits)

    def step(self, action: str) -> StepResult:
        out_of_turns = self.take_turn()
        match = _MOVE.match(extract_boxed(action) or "")
        cell = (int(match[2]) - 1, int(match[3]) - 1) if match else None
        problem = None
        if cell is None:
            problem = "expected \\boxed{reveal ROW COL} or \\boxed{flag ROW COL}"
        elif not (0 <= cell[0] < self.rows and 0 <= cell[1] < self.cols):
            problem = f"rows go from 1 to {self.rows} and columns from 1 to {self.cols}"
        elif self._revealed_bits >> self._grid.index(cell) & 1:
            problem = f"cell {cell[0] + 1} {cell[1] + 1} is already revealed"
        if problem is not None:
            return self.invalid_move(problem, out_of_turns)
        assert cell is not None and match is not None
        grid = self._grid
        index = grid.index(cell)
        bit = 1 << index
        if (match[1] or "").lower() in ("flag", "f"):
            self._flag_bits ^= bit
            flagged = bool(self._flag_bits & bit)
            self._set_cell(index, " F" if flagged else " #")
            return self._after_move(f"Flag {'set' if flagged else 'removed'}.", 0.0, out_of_turns)
        if not self.placed:
            self._place_mines(cell)
        if self._mine_bits & bit:
            self.exploded = cell
            self._set_cell(index, " *")
            return f"Boom! {cell[0] + 1} {cell[1] + 1} was a mine.\n{self.render()}", 0.0, True, False, {"success": False}
        self._flag_bits &= ~bit
        before = self._revealed_bits
        self._revealed_bits = revealed = grid.flood(bit, before, self._zero_bits)
        opened = rest = revealed & ~before
        cells, neighbours, mines, width, stale = self._cells, grid.neighbours, self._mine_bits, grid.width, self._stale_rows
        while rest:  # the opened cells, lowest first (written out: the first reveal opens dozens)
            low = rest & -rest
            i = low.bit_length() - 1
            cells[i] = _OPEN_CELL[(neighbours[i] & mines).bit_count()]
            stale |= 1 << (i // width)
            rest ^= low
        self._stale_rows, opened = stale, opened.bit_count()
        if opened == 1:
            self._hidden.remove(index)
        else:
            self._hidden = [i for i in self._hidden if not revealed >> i & 1]
        return self._after_move(f"Opened {opened} cell(s).", opened / (self.rows * self.cols - self.num_mines), out_of_turns)

    def _after_move(self, feedback: str, reward: float, out_of_turns: bool) -> StepResult:
        cleared = self.placed and self._revealed_bits.bit_count() == self.rows * self.cols - self.num_mines
        return self.end_turn(reward, out_of_turns, won=cleared, win_message="Cleared! Every safe cell is open.", feedback=feedback)

    def sample_random_action(self) -> str:
        r, c = divmod(self._hidden[self.random_index(len(self._hidden))], self._grid.width)
        return f"\\boxed{{reveal {r + 1} {c + 1}}}"

    def _set_cell(self, index: int, text: str) -> None:
        self._cells[index] = text
        self._stale_rows |= 1 << (index // self._grid.width)

    def render(self) -> str:
        """The board: ``#`` hidden, ``F`` flagged, a digit for an open cell (``.`` for 0), ``*`` the mine hit."""
        grid, rows = self._grid, self._rows
        if self._stale_rows:  # rebuild only the rows whose cells changed since the last render
            cells, cols, width = self._cells, self.cols, grid.width
            for r in _bits(self._stale_rows):
                rows[r] = grid.row_labels[r] + " ".join(cells[r * width : r * width + cols])
            self._stale_rows = 0
        return "\n".join([grid.header, *rows])

