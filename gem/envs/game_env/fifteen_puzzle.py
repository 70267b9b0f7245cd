"""GEM's sliding puzzle (``num_rows``² - 1 tiles): ``\\boxed{up|down|left|right}`` slides a tile into the gap.

Two GEMs differ here. GEM 0.1.0 (the released ``gem-llm``) shuffles the tiles, so about half of its boards
cannot be solved. GEM after 0.1.0 (4069f2f) draws solvable boards (``init_algo``: ``monte_carlo`` walks
``mc_rand_moves`` random moves back from the goal, ``pure_random`` fixes a shuffle's parity) and its own
test drives the board helpers below. GEM's ids keep 0.1.0's shuffle (``init_algo=None``), so a seed gives
the released package's board, as the side-by-side session checks; passing ``init_algo`` gives the later
GEM's board, drawn in its order.
"""

from __future__ import annotations

import re
from typing import Any

from gem.envs.game_env.base import INTERNAL_STEP_REWARD, INVALID_ACTION_REWARD, SUCCESS_REWARD, GameEnv
from gem_core.errors import GemError
from gem_core.vector.calls import check_count

Board = list[list[int | None]]

_MOVE = re.compile(r"\\boxed{(up|down|left|right)}")
# Where the tile that slides into the gap sits, relative to the gap.
_SOURCE = {"up": (1, 0), "down": (-1, 0), "left": (0, 1), "right": (0, -1)}
_OPPOSITE = {"up": "down", "down": "up", "left": "right", "right": "left"}


class InitAlgoError(GemError, ValueError):
    """Raised for an ``init_algo`` GEM does not define (GEM asserts; a user mistake deserves a named error)."""


class FifteenPuzzleEnv(GameEnv):
    """Running out of turns adds the share of tiles in place. 0.1.0's shuffle may draw an unsolvable board.

    Raises:
        InvalidArgument: ``num_rows`` is not a whole number from 1 (None draws the size per episode).
        InitAlgoError: ``init_algo`` is not one of GEM's board generators, or ``mc_rand_moves`` is not positive.
    """

    VALID_INITIALIZATION_ALGOS = ["monte_carlo", "pure_random"]

    def __init__(
        self,
        max_turns: int | None = 20,
        num_rows: int | None = 2,
        init_algo: str | None = None,
        mc_rand_moves: int = 100,
        seed: int | None = None,
        **_: Any,
    ) -> None:
        """``init_algo=None`` is GEM 0.1.0's shuffle; ``monte_carlo``/``pure_random`` are the later GEM's."""
        super().__init__(seed)
        if init_algo is not None and init_algo not in self.VALID_INITIALIZATION_ALGOS:
            raise InitAlgoError(
                f"init_algo={init_algo!r} is not one of GEM's board generators: pass one of "
                f"{self.VALID_INITIALIZATION_ALGOS}, or None for GEM 0.1.0's shuffle"
            )
        if mc_rand_moves <= 0:
            raise InitAlgoError(f"mc_rand_moves={mc_rand_moves} must be positive (random moves back from the goal)")
        self.init_algo, self.mc_rand_moves = init_algo, mc_rand_moves
        # None anywhere: each episode draws the level (GEM's rule); otherwise reset() takes this one.
        self._level = None if num_rows is None or max_turns is None else (num_rows, max_turns)
        # GEM 0.1.0 fails here for num_rows=None, its own -random id (num_rows**2, a TypeError); reset() draws the
        # size then, as GEM's reset would
        if num_rows is not None:
            self.greatest_num = check_count("num_rows", num_rows) ** 2 - 1
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
        if self._level is None:
            self.num_rows, self.max_turns = self.rng.choice([(2, 10), (3, 20), (4, 50)])
            self.greatest_num = self.num_rows**2 - 1
        else:
            self.num_rows, self.max_turns = self._level
        self.goal_board = self._generate_goal_board()
        self.goal_parity = self._get_board_parity(self.goal_board)
        self.board = self._generate_solvable_board() if self.init_algo else self._shuffled_board()
        self.turn_count = 0
        return self._instructions(), {"suffix": self.get_task_suffix()}

    def _tiles_in_place(self) -> int:
        solved = [*range(1, self.greatest_num + 1), None]
        return sum(tile == want for tile, want in zip((t for row in self.board for t in row), solved, strict=True))

    def _rows(self, tiles: list[int | None]) -> Board:
        return [tiles[i:i + self.num_rows] for i in range(0, len(tiles), self.num_rows)]

    def _shuffled_board(self) -> Board:
        tiles: list[int | None] = [*range(1, self.greatest_num + 1), None]
        self.rng.shuffle(tiles)
        return self._rows(tiles)

    def _generate_goal_board(self) -> Board:
        """Tiles in row-major order, the gap last."""
        return self._rows([*range(1, self.greatest_num + 1), None])

    def _has_correct_tiles(self, board: Board) -> bool:
        return {t for row in board for t in row} == {*range(1, self.greatest_num + 1), None}

    def _get_board_parity(self, board: Board) -> int:
        """Parity of the tile permutation plus the gap's distance from the top-left corner: every move
        keeps it, so it decides solvability (GEM counts the transpositions of a selection sort)."""
        tiles = [t for row in board for t in row]
        swaps = 0
        for i in range(len(tiles) - 1):
            at = tiles.index(i + 1)
            if at != i:
                tiles[i], tiles[at] = tiles[at], tiles[i]
                swaps += 1
        gap_row, gap_col = divmod([t for row in board for t in row].index(None), self.num_rows)
        return (swaps + gap_row + gap_col) % 2

    def _is_solvable(self, board: Board) -> bool:
        return self._has_correct_tiles(board) and self._get_board_parity(board) == self.goal_parity

    def _generate_solvable_board(self) -> Board:
        """The later GEM's generators, drawing from :attr:`rng` in GEM's order (GEM draws from ``random``)."""
        if self.init_algo == "pure_random":
            tiles: list[int | None] = [*range(1, self.greatest_num + 1), None]
            self.rng.shuffle(tiles)
            board = self._rows(tiles)
            if not self._is_solvable(board):
                # swapping two tiles flips the parity, keeping the shuffle's distribution over solvable boards
                first, second = self.rng.sample([t for t in tiles if t is not None], 2)
                (r1, c1), (r2, c2) = (divmod(tiles.index(t), self.num_rows) for t in (first, second))
                board[r1][c1], board[r2][c2] = board[r2][c2], board[r1][c1]
            return board
        board = self._generate_goal_board()
        last: str | None = None
        for _ in range(self.mc_rand_moves):
            row, col = next((r, c) for r in range(self.num_rows) for c in range(self.num_rows) if board[r][c] is None)
            moves = [
                m for m in ("up", "down", "left", "right")
                if m != (_OPPOSITE[last] if last else None)
                and 0 <= row + _SOURCE[m][0] < self.num_rows and 0 <= col + _SOURCE[m][1] < self.num_rows
            ]
            last = self.rng.choice(moves)  # never undoes the previous move
            src_row, src_col = row + _SOURCE[last][0], col + _SOURCE[last][1]
            board[row][col], board[src_row][src_col] = board[src_row][src_col], None
        return board

    def _get_empty_position(self) -> tuple[int, int]:
        return next((r, c) for r in range(self.num_rows) for c in range(self.num_rows) if self.board[r][c] is None)

    def _is_solved(self) -> bool:
        return self._tiles_in_place() == self.greatest_num + 1

    def _move(self, direction: str) -> bool:
        """Slide the tile on the ``direction`` side of the gap into it; False (board unchanged) when there is none."""
        row, col = self._get_empty_position()
        dr, dc = _SOURCE[direction]
        src_row, src_col = row + dr, col + dc
        if not (0 <= src_row < self.num_rows and 0 <= src_col < self.num_rows):
            return False
        self.board[row][col], self.board[src_row][src_col] = self.board[src_row][src_col], None
        return True

    _slide = _move

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
