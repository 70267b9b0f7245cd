"""Fifteen puzzle (sliding tiles): put the numbered tiles in order with the gap last.

The start is ``scramble_moves`` random legal slides from the solved board (never undoing the previous
slide), so every puzzle is solvable in at most ``scramble_moves`` moves. A move names the tile to
slide into the gap, ``\\boxed{TILE}``; a tile not next to the gap is refused with the format penalty.

Rewards (dense): progress is ``1 - manhattan / manhattan_at_start`` (the summed distances of the tiles
from their homes); each turn earns the rise of the best progress so far. A solved board has distance
0, so a win always returns exactly :attr:`FifteenPuzzle.max_return` = 1.0.

Variants: ``-easy`` 3x3 scrambled by 10 slides, 30 turns; ``-v0`` 3x3 by 30 slides, 60 turns;
``-hard`` 4x4 by 40 slides, 80 turns.
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np

from gem_core.env import StepResult
from gem_core.envs.game.action_format import BOXED_HINT, extract_boxed, read_number
from gem_core.envs.game.turn_based import TurnBasedGame
from gem_core.errors import InvalidArgument
from gem_core.vector.calls import check_count


def manhattan(board: np.ndarray) -> int:
    """Summed distance of every tile from its home square (the gap, 0, not counted)."""
    size = board.shape[0]
    rows, cols = np.nonzero(board)
    tiles = board[rows, cols] - 1
    return int(np.abs(rows - tiles // size).sum() + np.abs(cols - tiles % size).sum())


def solved_board(size: int) -> np.ndarray:
    return np.append(np.arange(1, size * size), 0).reshape(size, size)


#: The most slides a scramble makes: a reset of this many takes under half a second (10**7 ran past a minute,
#: 10**9 for hours).
MAX_SCRAMBLE = 10_000
#: The largest board side (a step renders every tile).
MAX_SIZE = 30


class FifteenPuzzle(TurnBasedGame):
    def __init__(self, size: int = 3, scramble_moves: int = 30, max_turns: int = 60):
        """A ``size`` x ``size`` board scrambled by ``scramble_moves`` random slides.

        Raises:
            InvalidArgument: if a setting is not a whole number in range: ``size`` 2 to :data:`MAX_SIZE`,
                ``scramble_moves`` 1 to :data:`MAX_SCRAMBLE`, ``max_turns`` from 1.
        """
        if not 2 <= check_count("size", size) <= MAX_SIZE:
            raise InvalidArgument(f"size={size} must be between 2 (a 1x1 board has no tile to slide) and {MAX_SIZE}.")
        check_count("scramble_moves", scramble_moves, most=MAX_SCRAMBLE)
        check_count("max_turns", max_turns)
        self.size, self.scramble_moves, self.max_turns = size, scramble_moves, max_turns
        self.board = solved_board(size)
        self.start_distance = 1
        self.best_progress = 0.0
        self.started = False

    # The board is a flat list of tiles with the gap's index and the Manhattan distance kept up to date
    # (a move changes one tile's distance); ``board`` shows it as an array and accepts one.
    @property
    def board(self) -> np.ndarray:
        """The grid, ``0`` for the gap (a copy; assign an array to change it)."""
        return np.array(self._tiles).reshape(self.size, self.size)

    @board.setter
    def board(self, value: Any) -> None:
        self._tiles = [int(v) for v in np.asarray(value).ravel()]
        self._gap = self._tiles.index(0)
        width = len(str(self.size * self.size - 1))
        self._cells = [f"{v:>{width}}" for v in self._tiles]  # the rendered tiles, updated per move
        self._distance = manhattan(np.asarray(value))

    def _home_distance(self, tile: int, index: int) -> int:
        return abs(index // self.size - (tile - 1) // self.size) + abs(index % self.size - (tile - 1) % self.size)

    def movable_tiles(self) -> list[int]:
        """Tiles next to the gap (the legal moves)."""
        return sorted(self._tiles[i] for i in _around(self._gap, self.size))

    def _slide(self, tile: int) -> None:
        spot = self._tiles.index(tile)
        self._distance += self._home_distance(tile, self._gap) - self._home_distance(tile, spot)
        self._tiles[self._gap], self._tiles[spot] = tile, 0
        self._cells[self._gap], self._cells[spot] = self._cells[spot], self._cells[self._gap]
        self._gap = spot

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
        super().reset(seed=seed)
        self.board = solved_board(self.size)
        previous, slides = None, 0
        while slides < self.scramble_moves or self._distance == 0:
            choices = [t for t in self.movable_tiles() if t != previous]
            previous = choices[int(self.np_random.integers(len(choices)))]
            self._slide(previous)
            slides += 1
        self.best_progress, self.started = 0.0, True
        self.start_distance = self._distance
        obs = (
            f"Let's play the sliding puzzle on a {self.size}x{self.size} board. Slide tiles into the gap (0) until the "
            f"tiles read 1 to {self.size * self.size - 1} row by row with the gap in the bottom-right corner. Each turn "
            f"name one tile next to the gap. You have at most {self.max_turns} turns. "
            + BOXED_HINT % self.movable_tiles()[0]
            + f"\n{self.render()}"
        )
        return obs, {"max_turns": self.max_turns}

    def step(self, action: str) -> StepResult:
        out_of_turns = self.take_turn()
        tile = read_number(extract_boxed(action))
        movable = self.movable_tiles()
        if tile is None or tile not in movable:
            return self.invalid_action(
                f"Invalid move: expected one tile next to the gap inside \\boxed{{}}; movable tiles: "
                f"{', '.join(map(str, movable))}. Turns left: {self.max_turns - self.turn}.\n{self.render()}",
                truncated=out_of_turns,
            )
        self._slide(tile)
        distance = self._distance
        progress = 1.0 - distance / self.start_distance
        reward = max(0.0, progress - self.best_progress)
        self.best_progress = max(self.best_progress, progress)
        return self.end_turn(reward, out_of_turns, won=distance == 0)

    def sample_random_action(self) -> str:
        movable = self.movable_tiles()
        return f"\\boxed{{{movable[self.random_index(len(movable))]}}}"

    def render(self) -> str:
        """The board, one row per line, ``0`` for the gap."""
        size, cells = self.size, self._cells
        return "\n".join(" ".join(cells[r * size : (r + 1) * size]) for r in range(size))


@functools.cache
def _around(index: int, size: int) -> tuple[int, ...]:
    """The cells next to ``index`` (up, down, left, right) on a ``size x size`` board."""
    r, c = divmod(index, size)
    return tuple(nr * size + nc for nr, nc in ((r - 1, c), (r + 1, c), (r, c - 1), (r, c + 1)) if 0 <= nr < size and 0 <= nc < size)
