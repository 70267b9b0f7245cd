"""2048: slide the tiles of a grid; equal tiles that collide merge into their sum. Reach the target.

A move is ``\\boxed{up}``, ``down``, ``left`` or ``right`` (or ``u``/``d``/``l``/``r``). After each
move a new tile appears on a random empty cell (2 with probability 0.9, else 4), drawn from the env's
RNG. A move that changes nothing is refused with the format penalty. The episode ends when a tile
reaches ``target`` (success) or no move is left (failure).

Success is reaching ``target``, not 2048: the targets are chosen so a simple strategy reaches them
within the turn limit of each variant (greedy on a line heuristic for 128 and 256, the same with one
step of expectimax once the board fills up for 512; see ``tests/core/envs/solvers.py``), while random
play seldom reaches more than 128.

Rewards (dense): progress is ``(log2(largest tile) - 2) / (log2(target) - 2)``, clipped at 0 (so tiles
up to 4 count as no progress); each turn earns the rise of the best progress so far. Reaching the
target always returns exactly :attr:`Game2048.max_return` = 1.0.

Variants: ``-easy`` 4x4 to 128, 150 turns; ``-v0`` 4x4 to 256, 350 turns; ``-hard`` 4x4 to 512, 600
turns.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from gem_core.env import StepResult
from gem_core.envs.game.action_format import BOXED_HINT, extract_boxed
from gem_core.envs.game.turn_based import TurnBasedGame
from gem_core.errors import InvalidArgument
from gem_core.vector.calls import check_count

DIRECTIONS = ("up", "down", "left", "right")


def slide_row_left(row: Sequence[int]) -> tuple[list[int], int]:
    """One row slid left with merges; returns the new row and the points scored."""
    slid, points = _slide_line(tuple(row))
    return list(slid), points


@functools.lru_cache(maxsize=1 << 16)
def _slide_line(row: tuple[int, ...]) -> tuple[tuple[int, ...], int]:
    """:func:`slide_row_left` on a tuple, cached: a game sees few distinct rows, and every step slides
    and tests all of them."""
    tiles = [v for v in row if v]
    merged, points, i = [], 0, 0
    while i < len(tiles):
        if i + 1 < len(tiles) and tiles[i] == tiles[i + 1]:
            merged.append(2 * tiles[i])
            points += 2 * tiles[i]
            i += 2
        else:
            merged.append(tiles[i])
            i += 1
    return tuple(merged + [0] * (len(row) - len(merged))), points


@functools.lru_cache(maxsize=1 << 16)
def _line_moves(line: tuple[int, ...]) -> tuple[bool, bool]:
    """Whether sliding ``line`` towards its start, and towards its end, moves or merges a tile."""
    return _slide_line(line)[0] != line, _slide_line(line[::-1])[0] != line[::-1]


def _slide_rows(rows: tuple[tuple[int, ...], ...], direction: str) -> tuple[tuple[tuple[int, ...], ...], int]:
    # Read each line from the side the tiles slide towards, slide it "left", write it back.
    lines = tuple(zip(*rows, strict=True)) if direction in ("up", "down") else rows
    backwards = direction in ("right", "down")
    slid = [_slide_line(line[::-1] if backwards else line) for line in lines]
    out = tuple(line[::-1] if backwards else line for line, _ in slid)
    return (tuple(zip(*out, strict=True)) if direction in ("up", "down") else out), sum(points for _, points in slid)


def slide(board: np.ndarray, direction: str) -> tuple[np.ndarray, int]:
    """The board after sliding in ``direction`` (no new tile), and the points scored."""
    rows, points = _slide_rows(tuple(map(tuple, board.tolist())), direction)
    return np.array(rows, dtype=board.dtype), points


#: The largest board side: a step slides and renders every tile.
MAX_SIZE = 20


class Game2048(TurnBasedGame):
    def __init__(self, size: int = 4, target: int = 256, max_turns: int = 350):
        """A ``size`` x ``size`` board played until a tile reaches ``target``.

        Raises:
            InvalidArgument: if ``size`` is not a whole number from 2 to :data:`MAX_SIZE`, ``target`` not a power
                of two from 8 to the largest tile the board can hold, or ``max_turns`` not a whole number from 1.
        """
        if not 2 <= check_count("size", size) <= MAX_SIZE:
            raise InvalidArgument(f"size={size} must be between 2 and {MAX_SIZE} (a step slides and renders every tile).")
        # Each cell can hold at most twice the tile the cell before it holds: 2**(cells + 1) is the largest tile.
        most = 2 ** (size * size + 1)
        if not 8 <= check_count("target", target, most=most) or target & (target - 1):
            raise InvalidArgument(f"target={target} must be a power of two from 8 to {most} (the largest tile a {size}x{size} board holds).")
        check_count("max_turns", max_turns)
        self.size, self.target, self.max_turns = size, target, max_turns
        self.board = np.zeros((size, size), dtype=int)
        self.score = 0
        self.best_progress = 0.0
        self.started = False

    # The board is kept as a tuple of row tuples (hashable, so line results are cached, and cheap to
    # read); ``board`` shows it as an array and accepts one.
    @property
    def board(self) -> np.ndarray:
        """The grid (a copy; assign an array to change it)."""
        return np.array(self._rows, dtype=int)

    @board.setter
    def board(self, value: Any) -> None:
        self._set_rows(tuple(map(tuple, np.asarray(value, dtype=int).tolist())))

    def _set_rows(self, rows: tuple[tuple[int, ...], ...]) -> None:
        self._rows = rows
        self._legal: list[str] | None = None

    def _spawn(self) -> None:
        flat = [v for row in self._rows for v in row]
        empty = [i for i, v in enumerate(flat) if v == 0]
        cell = empty[int(self.np_random.integers(len(empty)))]
        flat[cell] = 2 if self.np_random.random() < 0.9 else 4
        self._set_rows(tuple(tuple(flat[r * self.size : (r + 1) * self.size]) for r in range(self.size)))

    def _largest(self) -> int:
        return max(max(row) for row in self._rows)

    def _progress(self) -> float:
        return max(0.0, (math.log2(self._largest()) - 2) / (math.log2(self.target) - 2))

    def legal_moves(self) -> list[str]:
        """The directions that change the board, in :data:`DIRECTIONS` order (computed once per board)."""
        if self._legal is None:
            rows = [_line_moves(row) for row in self._rows]
            cols = [_line_moves(col) for col in zip(*self._rows, strict=True)]
            found = {
                "up": any(c[0] for c in cols), "down": any(c[1] for c in cols),
                "left": any(r[0] for r in rows), "right": any(r[1] for r in rows),
            }
            self._legal = [d for d in DIRECTIONS if found[d]]
        return list(self._legal)

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
        super().reset(seed=seed)
        self.board = np.zeros((self.size, self.size), dtype=int)
        self._spawn()
        self._spawn()
        self.score, self.started = 0, True
        self.best_progress = self._progress()
        obs = (
            f"Let's play 2048 on a {self.size}x{self.size} grid. Each turn slide all tiles up, down, left or right; two "
            f"equal tiles that collide merge into their sum, and a new 2 or 4 appears on an empty cell. Make a tile of "
            f"{self.target} within {self.max_turns} turns. " + BOXED_HINT % "left" + f"\n{self.render()}"
        )
        return obs, {"max_turns": self.max_turns}

    def step(self, action: str) -> StepResult:
        out_of_turns = self.take_turn()
        move = (extract_boxed(action) or "").lower()
        direction = _MOVES.get(move)
        legal = self.legal_moves()
        if direction not in legal:
            problem = "that move changes nothing" if direction else "expected up, down, left or right inside \\boxed{}"
            return self.invalid_action(
                f"Invalid move: {problem}. Moves that change the board: {', '.join(legal)}. "
                f"Turns left: {self.max_turns - self.turn}.\n{self.render()}",
                truncated=out_of_turns,
            )
        rows, points = _slide_rows(self._rows, direction)
        self._set_rows(rows)
        self.score += points
        self._spawn()
        progress = self._progress()
        reward = max(0.0, progress - self.best_progress)
        self.best_progress = max(self.best_progress, progress)
        won = self._largest() >= self.target
        if not won and not self.legal_moves():
            return f"{self.render()}\nNo moves left.", reward, True, False, {"success": False}
        return self.end_turn(reward, out_of_turns, won=won, win_message=f"You made {self.target}!")

    def sample_random_action(self) -> str:
        """A uniformly random move among those that change the board."""
        moves = self.legal_moves() or list(DIRECTIONS)
        return f"\\boxed{{{moves[self.random_index(len(moves))]}}}"

    def render(self) -> str:
        """The grid, ``.`` for an empty cell, then the score."""
        width = max(len(str(self.target)), 4)
        rows = [_render_row(row, width) for row in self._rows]
        return "\n".join(rows + [f"Score: {self.score}"])


#: Each move's accepted spellings (``\\boxed{up}`` or ``\\boxed{u}``).
_MOVES = {spelling: d for d in DIRECTIONS for spelling in (d, d[0])}


@functools.lru_cache(maxsize=1 << 16)
def _render_row(row: tuple[int, ...], width: int) -> str:
    return " ".join(f"{(str(v) if v else '.'):>{width}}" for v in row)
