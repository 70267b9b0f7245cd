"""GEM's sliding puzzle (``num_rows``² - 1 tiles): ``\\boxed{up|down|left|right}`` slides a tile into the gap."""

from __future__ import annotations

import re
from typing import Any

from gem.envs.game_env.base import INTERNAL_STEP_REWARD, INVALID_ACTION_REWARD, SUCCESS_REWARD, GameEnv

_MOVE = re.compile(r"\\boxed{(up|down|left|right)}")
# Where the tile that slides into the gap sits, relative to the gap.
_SOURCE = {"up": (1, 0), "down": (-1, 0), "left": (0, 1), "right": (0, -1)}


class FifteenPuzzleEnv(GameEnv):
    """Running out of turns adds the share of tiles in place. GEM's shuffle may draw an unsolvable board."""

    def __init__(self, max_turns: int | None = 20, num_rows: int | None = 2, seed: int | None = None, **_: Any) -> None:
        super().__init__(seed)
        self.max_turns, self.num_rows = max_turns, num_rows
        self.greatest_num = num_rows**2 - 1  # GEM fails here too for num_rows=None (its -random id)
        self._is_random = num_rows is None or max_turns is None
        self.reset()

    def _instructions(self) -> str:
        return (
            f"You are playing the {self.greatest_num}-Puzzle game.\n"
            f"You have to arrange the numbered tiles in ascending order from 1 to {self.greatest_num}, with the empty space located in the bottom-right corner.\n"
            "To make a move, you can slide a tile into the empty space (represented by a double underscore, e.g. __) by using one of the following commands:\n"
            "- 'up': Move the tile below the empty space up.\n"
            "- 'down': Move the tile above the empty space down.\n"
            "- 'left': Move the tile to the right of the empty space left.\n"
            "- 'right': Move the tile to the left of the empty space right.\n"
            "To submit your move, type the direction (e.g., 'up', 'down', 'left', or 'right') in \\boxed{...}.\n"
            "The current board layout is shown below\n"
            "Use logic and planning to solve the puzzle.\n"
        )

    def _render_board(self) -> str:
        return "".join(" ".join("__" if tile is None else f"{tile:2}" for tile in row) + "\n" for row in self.board)

    def get_task_suffix(self) -> str:
        return f"Here is the current board layout: \n{self._render_board()}\nEnter your move."

    def reset(self, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
        super().reset(seed, options)
        if self._is_random:
            self.num_rows, self.max_turns = self.rng.choice([(2, 10), (3, 20), (4, 50)])
            self.greatest_num = self.num_rows**2 - 1
        tiles: list[int | None] = [*range(1, self.greatest_num + 1), None]
        self.rng.shuffle(tiles)
        self.board = [tiles[i:i + self.num_rows] for i in range(0, len(tiles), self.num_rows)]
        self.turn_count = 0
        return self._instructions(), {"suffix": self.get_task_suffix()}

    def _tiles_in_place(self) -> int:
        solved = [*range(1, self.greatest_num + 1), None]
        return sum(tile == want for tile, want in zip((t for row in self.board for t in row), solved))

    def _slide(self, direction: str) -> bool:
        row, col = next((r, c) for r in range(self.num_rows) for c in range(self.num_rows) if self.board[r][c] is None)
        dr, dc = _SOURCE[direction]
        src_row, src_col = row + dr, col + dc
        if not (0 <= src_row < self.num_rows and 0 <= src_col < self.num_rows):
            return False
        self.board[row][col], self.board[src_row][src_col] = self.board[src_row][src_col], None
        return True

    def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        self.turn_count += 1
        found = _MOVE.findall(action)
        if not found:
            return self.format_error(f"At turn {self.turn_count}, you did not provide a valid guess")
        move = found[-1]
        if not self._slide(move):
            observation = f"At turn {self.turn_count}, you chose a move {move} that is outside the bounds of the board."
            reward = INVALID_ACTION_REWARD
        elif self._tiles_in_place() == self.greatest_num + 1:
            return "Congratulations! You have solved the puzzle!", SUCCESS_REWARD, True, False, {"suffix": self.get_task_suffix()}
        else:
            observation = f"At turn {self.turn_count}, you made a valid move: {move}.\n"
            reward = INTERNAL_STEP_REWARD
        if self.turn_count >= self.max_turns:
            # summed tile by tile, as GEM does, so the float is the same to the last bit
            reward += sum(1 / (self.greatest_num + 1) for _ in range(self._tiles_in_place()))
            return "You have reached the maximum number of turns.", reward, True, True, {"suffix": self.get_task_suffix()}
        return observation, reward, False, False, {"suffix": self.get_task_suffix()}

    def sample_random_action(self) -> str:
        return self.rng.choice(["up", "down", "left", "right"])
