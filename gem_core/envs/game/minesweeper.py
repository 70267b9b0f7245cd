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

_MOVE = re.compile(r"^(?:(reveal|flag|r|f)\s+)?(\d{1,6})\s*[ ,]\s*(\d{1,6})$", re.IGNORECASE)

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
    """A ``rows x cols`` board as Python ints, one bit per cell (bit ``row * cols + col``).

    Whole-board steps (the 3x3 neighbourhood of a set of cells, the flood through cells with no mine
    around) are a few shifts and bitwise operations on one integer instead of a Python loop over cells:
    the placement check at the first reveal runs once per draw, and it dominates the cost of the short
    episodes a random policy plays.
    """

    def __init__(self, rows: int, cols: int):
        self.rows, self.cols, self.size = rows, cols, rows * cols
        self.full = (1 << self.size) - 1
        first_col = sum(1 << (r * cols) for r in range(rows))
        # a cell's left neighbour exists unless it is in the first column, its right one unless in the last
        self.has_left, self.has_right = self.full & ~first_col, self.full & ~(first_col << (cols - 1))
        self.neighbours = [self.around(1 << i) & ~(1 << i) for i in range(self.size)]  # each cell's eight (or fewer)
        self.header = "   " + " ".join(f"{c + 1:>2}" for c in range(cols))
        self.row_labels = [f"{r + 1:>2} " for r in range(rows)]
        self.hidden_rows = [label + " ".join([" #"] * cols) for label in self.row_labels]  # a fresh board's rows
        self._allowed: dict[int, tuple[int, ...]] = {}

    def around(self, cells: int) -> int:
        """``cells`` and every cell next to one of them (the 3x3 blocks around them)."""
        row = cells | ((cells << 1) & self.has_left) | ((cells >> 1) & self.has_right)
        return (row | (row << self.cols) | (row >> self.cols)) & self.full

    def allowed_mines(self, first: int) -> tuple[int, ...]:
        """The cells a mine may take when ``first`` is the first reveal (all but its 3x3), as single-bit masks."""
        if first not in self._allowed:
            free = self.around(1 << first)
            self._allowed[first] = tuple(1 << i for i in range(self.size) if not free >> i & 1)
        return self._allowed[first]

    def flood(self, start: int, revealed: int, zeros: int) -> int:
        """``revealed`` plus the safe cells ``start`` and, through cells with no mine around, their regions."""
        new = start & ~revealed
        while new:
            revealed |= new
            new = self.around(new & zeros) & ~revealed  # a zero's neighbours are never mines
        return revealed


@functools.cache
def bit_grid(rows: int, cols: int) -> BitGrid:
    return BitGrid(rows, cols)


def mines_to_bits(mines: np.ndarray) -> int:
    """A boolean board as a bit board (bit ``row * cols + col``)."""
    return int.from_bytes(np.packbits(mines.ravel(), bitorder="little").tobytes(), "little")


def clearable_by_logic(first: Cell, mines: np.ndarray) -> bool:
    """Whether a player who reasons (single-cell and subset rules, mine count) clears the board from ``first``."""
    rows, cols = mines.shape
    return _clearable(bit_grid(rows, cols), first[0] * cols + first[1], mines_to_bits(mines))


def _clearable(grid: BitGrid, first: int, mines: int) -> bool:
    """:func:`clearable_by_logic` on bit boards.

    The rules only ever add knowledge and stay true as knowledge grows, so applying them in any order
    reaches the same end (``test_games`` checks the verdicts against the first version on random boards).
    Knowing the board makes each rule a few whole-board bit operations, because every deduction is
    sound: the known mines are mines and the opened cells are safe. A revealed cell's count equals its
    known mines exactly when no unknown mine is next to it (then its unknown neighbours are safe), and
    its unknown neighbours are exactly its missing mines when no hidden safe cell is next to it (then
    they are mines). The 3x3 spread (:meth:`BitGrid.around`) is written out in the loop: it runs about
    forty times per check, and the check runs about 2.5 times per episode of a random policy.
    """
    full, width, has_left, has_right = grid.full, grid.cols, grid.has_left, grid.has_right
    safe_cells = full & ~mines
    spread = mines | ((mines << 1) & has_left) | ((mines >> 1) & has_right)
    zeros = safe_cells & ~(spread | (spread << width) | (spread >> width))
    revealed = known = 0
    new = 1 << first
    while True:
        while new:  # open the new safe cells and, through cells with no mine around, their regions
            revealed |= new
            spread = new & zeros
            spread |= ((spread << 1) & has_left) | ((spread >> 1) & has_right)
            new = (spread | (spread << width) | (spread >> width)) & full & ~revealed
        hidden_safe = safe_cells & ~revealed
        unknown_mines = mines & ~known
        if not hidden_safe or not unknown_mines:  # all open, or the mine count says the rest is safe
            return True
        # revealed cells with no unknown mine around: their hidden neighbours are safe
        spread = unknown_mines | ((unknown_mines << 1) & has_left) | ((unknown_mines >> 1) & has_right)
        spread = revealed & ~(spread | (spread << width) | (spread >> width))
        spread |= ((spread << 1) & has_left) | ((spread >> 1) & has_right)
        new = (spread | (spread << width) | (spread >> width)) & hidden_safe
        # revealed cells with no hidden safe cell around: their unknown neighbours are mines
        spread = hidden_safe | ((hidden_safe << 1) & has_left) | ((hidden_safe >> 1) & has_right)
        spread = revealed & ~(spread | (spread << width) | (spread >> width))
        spread |= ((spread << 1) & has_left) | ((spread >> 1) & has_right)
        found = (spread | (spread << width) | (spread >> width)) & unknown_mines
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
    of deductions does not change the verdict); the mine count's pairs are tried first, being cheap.
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
    safe = found = 0
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


def _neighbour_pairs(grid, revealed, hidden_safe, unknown_mines):
    full, w, has_left, has_right = grid.full, grid.cols, grid.has_left, grid.has_right
    has_right2 = has_right & (has_right >> 1)
    safe = found = 0
    # side by side: a and b = a + 1 both revealed; a's own column c-1, b's own column c+2
    pairs = revealed & (revealed >> 1) & has_right
    if pairs:
        vs = hidden_safe | (hidden_safe << w) | (hidden_safe >> w)
        vm = unknown_mines | (unknown_mines << w) | (unknown_mines >> w)
        ls, lm = (vs << 1) & has_left, (vm << 1) & has_left
        rs, rm = (vs >> 2) & has_right2, (vm >> 2) & has_right2
        a_in_b, b_in_a = pairs & ~(ls | lm), pairs & ~(rs | rm)
        x = (a_in_b & rs & ~rm) << 2
        safe |= x | (x << w) | (x >> w)
        x = (a_in_b & rm & ~rs) << 2
        found |= x | (x << w) | (x >> w)
        x = (b_in_a & ls & ~lm) >> 1
        safe |= x | (x << w) | (x >> w)
        x = (b_in_a & lm & ~ls) >> 1
        found |= x | (x << w) | (x >> w)
    # one above the other: a and b = a + w; a's own row r-1, b's own row r+2
    pairs = revealed & (revealed >> w)
    if pairs:
        hs = hidden_safe | ((hidden_safe << 1) & has_left) | ((hidden_safe >> 1) & has_right)
        hm = unknown_mines | ((unknown_mines << 1) & has_left) | ((unknown_mines >> 1) & has_right)
        ts, tm = (hs << w) & full, (hm << w) & full
        bs, bm = hs >> (2 * w), hm >> (2 * w)
        a_in_b, b_in_a = pairs & ~(ts | tm), pairs & ~(bs | bm)
        x = (a_in_b & bs & ~bm) << (2 * w)
        safe |= x | ((x << 1) & has_left) | ((x >> 1) & has_right)
        x = (a_in_b & bm & ~bs) << (2 * w)
        found |= x | ((x << 1) & has_left) | ((x >> 1) & has_right)
        x = (b_in_a & ts & ~tm) >> w
        safe |= x | ((x << 1) & has_left) | ((x >> 1) & has_right)
        x = (b_in_a & tm & ~ts) >> w
        found |= x | ((x << 1) & has_left) | ((x >> 1) & has_right)
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


class Minesweeper(TurnBasedGame):
    def __init__(self, rows: int = 8, cols: int = 8, mines: int = 10, max_turns: int = 80, placement_attempts: int = 300):
        if not 0 < mines <= rows * cols - 9:
            raise ValueError(f"mines must be between 1 and rows*cols-9 = {rows * cols - 9} (the first reveal's 3x3 is kept free), got {mines}.")
        self.rows, self.cols, self.num_mines, self.max_turns = rows, cols, mines, max_turns
        self.placement_attempts = placement_attempts
        self.placed = False
        self.started = False
        self.exploded: Cell | None = None
        self._new_board()

    def _new_board(self) -> None:
        # The board lives in bit masks (one bit per cell) and the rendered cells and rows, updated as they
        # change: a step touches a few cells, so it never walks the whole board.
        self._mine_bits = self._revealed_bits = self._flag_bits = self._zero_bits = 0
        self._cells = [" #"] * (self.rows * self.cols)
        self._rows = bit_grid(self.rows, self.cols).hidden_rows.copy()
        self._stale_rows = 0  # bit r: row r's text is out of date
        self._hidden = list(range(self.rows * self.cols))

    @property
    def mines(self) -> np.ndarray:
        """Where the mines are (a copy; all False until the first reveal places them)."""
        return grid_bits_to_array(self._mine_bits, self.rows, self.cols)

    @property
    def revealed(self) -> np.ndarray:
        """Which cells are open (a copy)."""
        return grid_bits_to_array(self._revealed_bits, self.rows, self.cols)

    @property
    def flags(self) -> np.ndarray:
        """Which hidden cells carry a flag (a copy)."""
        return grid_bits_to_array(self._flag_bits & ~self._revealed_bits, self.rows, self.cols)

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
        super().reset(seed=seed)
        self._new_board()
        self.placed, self.started, self.exploded = False, True, None
        return f"{_rules(self.rows, self.cols, self.num_mines, self.max_turns)}\n{self.render()}", {"max_turns": self.max_turns}

    def _place_mines(self, first: Cell) -> None:
        grid = bit_grid(self.rows, self.cols)
        start = first[0] * self.cols + first[1]
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
        elif self._revealed_bits >> (cell[0] * self.cols + cell[1]) & 1:
            problem = f"cell {cell[0] + 1} {cell[1] + 1} is already revealed"
        if problem is not None:
            return self.invalid_action(f"Invalid move: {problem}. Turns left: {self.max_turns - self.turn}.\n{self.render()}", truncated=out_of_turns)
        assert cell is not None and match is not None
        index = cell[0] * self.cols + cell[1]
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
        grid, before = bit_grid(self.rows, self.cols), self._revealed_bits
        self._revealed_bits = revealed = grid.flood(bit, before, self._zero_bits)
        opened = revealed & ~before
        cells, neighbours, mines, cols, stale = self._cells, grid.neighbours, self._mine_bits, self.cols, self._stale_rows
        for i in _bits(opened):
            cells[i] = _OPEN_CELL[(neighbours[i] & mines).bit_count()]
            stale |= 1 << (i // cols)
        self._stale_rows, opened = stale, opened.bit_count()
        if opened == 1:
            self._hidden.remove(index)
        else:
            self._hidden = [i for i in self._hidden if not revealed >> i & 1]
        return self._after_move(f"Opened {opened} cell(s).", opened / (self.rows * self.cols - self.num_mines), out_of_turns)

    def _after_move(self, feedback: str, reward: float, out_of_turns: bool) -> StepResult:
        if self.placed and self._revealed_bits.bit_count() == self.rows * self.cols - self.num_mines:
            return f"{feedback}\n{self.render()}\nCleared! Every safe cell is open.", reward, True, False, {"success": True}
        if out_of_turns:
            return f"{feedback}\n{self.render()}\nOut of turns.", reward, False, True, {"success": False}
        return f"{feedback} Turns left: {self.max_turns - self.turn}.\n{self.render()}", reward, False, False, {}

    def sample_random_action(self) -> str:
        r, c = divmod(self._hidden[self.random_index(len(self._hidden))], self.cols)
        return f"\\boxed{{reveal {r + 1} {c + 1}}}"

    def _set_cell(self, index: int, text: str) -> None:
        self._cells[index] = text
        self._stale_rows |= 1 << (index // self.cols)

    def render(self) -> str:
        """The board: ``#`` hidden, ``F`` flagged, a digit for an open cell (``.`` for 0), ``*`` the mine hit."""
        grid, rows = bit_grid(self.rows, self.cols), self._rows
        if self._stale_rows:  # rebuild only the rows whose cells changed since the last render
            cells, cols = self._cells, self.cols
            for r in _bits(self._stale_rows):
                rows[r] = grid.row_labels[r] + " ".join(cells[r * cols : (r + 1) * cols])
            self._stale_rows = 0
        return "\n".join([grid.header, *rows])


def grid_bits_to_array(bits: int, rows: int, cols: int) -> np.ndarray:
    """A bit board as a ``rows x cols`` boolean array."""
    size = rows * cols
    packed = np.frombuffer(bits.to_bytes((size + 7) // 8, "little"), dtype=np.uint8)
    return np.unpackbits(packed, count=size, bitorder="little").astype(bool).reshape(rows, cols)
