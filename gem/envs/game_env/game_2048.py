"""GEM's 2048 on a ``board_size`` board: ``\\boxed{up|down|left|right}``; reaching ``target_tile`` wins.

The reward is progress on a log scale: each new highest tile earns its share of the way from the starting
highest tile to the target, so reaching the target sums to 1.
"""

from __future__ import annotations

import math
import re
from typing import Any

from gem.envs.game_env.base import INVALID_ACTION_REWARD, GameEnv

_MOVE = re.compile(r"\\boxed\{(up|down|left|right)\}", re.IGNORECASE)
Board = list[list[int]]


def slide_row_left(row: list[int]) -> list[int]:
    """``row`` slid left, each pair of equal neighbours merged once (2 2 2 2 → 4 4 0 0)."""
    tiles = [tile for tile in row if tile]
    merged: list[int] = []
    while tiles:
        if len(tiles) > 1 and tiles[0] == tiles[1]:
            merged.append(tiles[0] * 2)
            tiles = tiles[2:]
        else:
            merged.append(tiles.pop(0))
    return merged + [0] * (len(row) - len(merged))


def slide(board: Board, direction: str) -> Board:
    """The board after sliding every tile towards ``direction``."""
    columns = direction in ("up", "down")
    lines = [list(line) for line in zip(*board, strict=True)] if columns else [list(row) for row in board]
    backwards = direction in ("right", "down")
    moved = [slide_row_left(line[::-1])[::-1] if backwards else slide_row_left(line) for line in lines]
    return [list(row) for row in zip(*moved, strict=True)] if columns else moved


class Game2048Env(GameEnv):
    """``target_tile``/``max_turns`` None: each episode draws a target of 16, 32 or 64."""

    def __init__(self, target_tile: int | None = 2048, max_turns: int | None = 1000, board_size: int = 4,
                 seed: int | None = None, **_: Any) -> None:
        super().__init__(seed)
        self.board_size = board_size
        # None anywhere: each episode draws the level (GEM's rule); otherwise reset() takes this one.
        self._level = None if target_tile is None or max_turns is None else (target_tile, max_turns)
        self.reset()

    def _instructions(self) -> str:
        return (
            "You are playing 2048.\n"
            f"Your goal is to reach the {self.target_tile} tile by sliding and merging tiles.\n"
            f"You have {self.max_turns} turns maximum.\n\n"
            "Rules:\n"
            "- When two tiles with the same number touch, they merge into one tile with double the value.\n"
            "- After each move, a new tile (2 or 4) appears in a random empty spot.\n"
            "- You can move tiles in four directions: 'up', 'down', 'left', 'right'.\n\n"
            "To submit your move, type the direction in \\boxed{...}.\n"
            f"For example: {self.sample_random_action()}\n\n"
        )

    def get_task_suffix(self) -> str:
        rows = "\n".join(" ".join("   ." if cell == 0 else f"{cell:4d}" for cell in row) for row in self.board)
        return f"Current board:\n{rows}\nEnter your move."

    def reset(self, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
        super().reset(seed, options)
        self.target_tile, self.max_turns = self._level or self.rng.choice([(16, 20), (32, 30), (64, 50)])
        self.board = [[0] * self.board_size for _ in range(self.board_size)]
        self.turn_count = 0
        self._add_tile()
        self._add_tile()
        self.max_tile_achieved = self.init_max_tile_achieved = max(map(max, self.board))
        return self._instructions(), {"suffix": self.get_task_suffix()}

    def _add_tile(self) -> None:
        empty = [(i, j) for i in range(self.board_size) for j in range(self.board_size) if not self.board[i][j]]
        if empty:
            i, j = self.rng.choice(empty)
            self.board[i][j] = 2 if self.rng.random() < 0.9 else 4

    def _progress_reward(self) -> float:
        highest = min(max(map(max, self.board)), self.target_tile)
        if highest <= self.max_tile_achieved:
            return 0.0
        reward = (math.log2(highest) - math.log2(self.max_tile_achieved)) / (
            math.log2(self.target_tile) - math.log2(self.init_max_tile_achieved))
        self.max_tile_achieved = highest
        return reward

    def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        self.turn_count += 1
        found = _MOVE.findall(action or "")
        if not found:
            return self.format_error(f"At turn {self.turn_count}, you did not provide a valid move. Please use \\boxed{{direction}} format.")
        move = found[-1].lower()
        moved = slide(self.board, move)
        if moved == self.board:
            observation = f"At turn {self.turn_count}, you chose move '{move}' which doesn't change the board state. Try a different direction."
            reward = INVALID_ACTION_REWARD
        else:
            self.board = moved
            reward = self._progress_reward()
            self._add_tile()
            if self.max_tile_achieved >= self.target_tile:
                return (f"Congratulations! You reached the {self.target_tile} tile in {self.turn_count} turns!", reward, True, False,
                        {"suffix": self.get_task_suffix()})
            if all(slide(self.board, d) == self.board for d in ("up", "down", "left", "right")):
                return "Game over! No more moves possible.", reward, True, False, {"suffix": self.get_task_suffix()}
            observation = f"At turn {self.turn_count}, you moved {move}"
        if self.turn_count >= self.max_turns:
            return (f"You have reached the maximum number of turns ({self.max_turns}).", reward, True, True,
                    {"suffix": self.get_task_suffix()})
        return observation, reward, False, False, {"suffix": self.get_task_suffix()}

    def sample_random_action(self) -> str:
        return f"\\boxed{{{self.rng.choice(['up', 'down', 'left', 'right'])}}}"
