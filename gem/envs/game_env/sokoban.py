"""GEM's Sokoban: push every box onto a target with ``\\boxed{up|down|left|right}``; 1.0 on solving it,
the share of boxes on targets when the turns run out. The board is in ``info["suffix"]``."""

from __future__ import annotations

import re
from typing import Any

import numpy as np

from gem.envs.game_env.base import INTERNAL_STEP_REWARD, INVALID_ACTION_REWARD, SUCCESS_REWARD, GameEnv
from gem.envs.game_env.sokoban_rooms import BOX, BOX_ON_TARGET, FLOOR, MOVES, PLAYER, TARGET, WALL, generate_room
from gem_core.errors import InvalidArgument
from gem_core.vector.calls import check_count

_MOVE = re.compile(r"\\boxed\{(up|down|left|right)\}", re.IGNORECASE)
_SYMBOLS = {WALL: "#", FLOOR: "_", TARGET: "O", BOX_ON_TARGET: "√", BOX: "X", PLAYER: "P", 6: "S"}
_ROOM_RETRIES = 50


class SokobanEnv(GameEnv):
    """``dim_room``/``num_boxes``/``max_turns`` None: each episode draws 6x6 with 2 boxes or 8x8 with 5.

    A seeded reset builds GEM's room for that seed (its generator takes ``seed``, then ``seed + 1``, ...,
    until a room comes out); an unseeded one draws the room's seed from :attr:`rng`.

    Raises:
        InvalidArgument: ``dim_room`` is not a ``(rows, cols)`` pair of whole numbers from 4 (a room inside its
            walls; narrower, every floor cell traps a box), or ``num_boxes`` is not a whole number from 1 that
            leaves the player a free cell.
        RuntimeError: From ``reset``: no solvable room came out of GEM's generator in 50 tries (GEM's error).
    """

    def __init__(self, dim_room: tuple[int, int] | None = (6, 6), max_turns: int | None = 100, num_boxes: int | None = 3,
                 seed: int | None = None, **_: Any) -> None:
        super().__init__(seed)
        if not (isinstance(dim_room, (tuple, list)) and len(dim_room) == 2):
            raise InvalidArgument(f"dim_room={dim_room!r:.60} must be a (rows, cols) pair such as (6, 6); "
                                  "use the game:Sokoban-v0-random id for a room drawn per episode.")
        dim_room = (check_count("dim_room[0]", dim_room[0], least=4), check_count("dim_room[1]", dim_room[1], least=4))
        if num_boxes is not None:
            inside = (dim_room[0] - 2) * (dim_room[1] - 2)
            num_boxes = check_count("num_boxes", num_boxes, most=max(1, inside - 2))
        # None anywhere: each episode draws the level (GEM's rule); otherwise reset() takes this one.
        self._level = None if max_turns is None or num_boxes is None else (dim_room, num_boxes, max_turns)
        self.num_gen_steps = int(1.7 * (dim_room[0] + dim_room[1]))
        self.reset()

    def _instructions(self) -> str:
        example = self.sample_random_action()
        move = example.split("{")[1].rstrip("}")
        return (
            "You are solving the Sokoban puzzle. You are the player and you need to push all boxes to targets.\n"
            "When you are right next to a box, you can push it by moving in the same direction.\n"
            "You cannot push a box through a wall or another box, and you cannot pull a box.\n"
            f"you have to complete the puzzle within {self.max_turns} turns.\n"
            "On the board, objects are represented as:\n"
            "- The player (you) appears as 'P'\n"
            "- Walls are represented with '#'\n"
            "- Boxes are marked as 'X'\n"
            "- Empty goals are shown with 'O'\n"
            "- Boxes on goals are visualized with '√'\n"
            "- Empty floor is shown as '_'\n\n"
            "To submit your move, type the command in \\boxed{}.\n"
            f"For example: {example} to move {move}.\n"
            "Use logic and deduction to push all boxes onto the target positions!"
        )

    def get_task_suffix(self) -> str:
        board = "".join(" ".join(_SYMBOLS[cell] for cell in row) + "\n" for row in self.room_state)
        return f"Here is the current board layout:\n{board}\nEnter your move."

    def reset(self, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
        super().reset(seed, options)
        if self._level is None:
            self.dim_room, self.num_boxes, self.max_turns = self.rng.choice([((6, 6), 2, 20), ((8, 8), 5, 50)])
            self.num_gen_steps = int(1.7 * (self.dim_room[0] + self.dim_room[1]))
        else:
            self.dim_room, self.num_boxes, self.max_turns = self._level
        base = int(seed) if seed is not None else self.rng.randrange(2**31)  # numpy's ints too (checked by super().reset)
        for attempt in range(_ROOM_RETRIES):
            try:
                self.room_fixed, self.room_state, self.box_mapping = generate_room(
                    self.dim_room, self.num_gen_steps, self.num_boxes, seed=base + attempt)
                break
            except (RuntimeError, RuntimeWarning):
                if attempt == _ROOM_RETRIES - 1:
                    raise RuntimeError(f"Failed to generate valid room after {_ROOM_RETRIES} attempts") from None
        self.player_position = np.argwhere(self.room_state == PLAYER)[0]
        self.turn_count = 0
        return self._instructions(), {"suffix": self.get_task_suffix()}

    def _cell(self, position: np.ndarray) -> int | None:
        r, c = position
        inside = 0 <= r < self.room_state.shape[0] and 0 <= c < self.room_state.shape[1]
        return int(self.room_state[r, c]) if inside else None

    def _blocked(self, step: tuple[int, int]) -> bool:
        """A wall or the border ahead, or a box ahead that cannot move on (GEM's collision check)."""
        ahead = self.player_position + step
        cell = self._cell(ahead)
        if cell is None or cell == WALL:
            return True
        return cell in (BOX_ON_TARGET, BOX) and self._cell(ahead + step) not in (FLOOR, TARGET)

    def _walk(self, step: tuple[int, int]) -> tuple[bool, bool]:
        """Move the player one cell, pushing a box ahead if there is one; ``(moved, pushed)``."""
        here, ahead = self.player_position.copy(), self.player_position + step
        beyond = ahead + step
        pushed = self._cell(beyond) is not None and self._cell(ahead) in (BOX_ON_TARGET, BOX) and self._cell(beyond) in (FLOOR, TARGET)
        if not pushed and self._cell(ahead) not in (FLOOR, TARGET):
            return False, False
        self.player_position = ahead
        self.room_state[ahead[0], ahead[1]] = PLAYER
        self.room_state[here[0], here[1]] = self.room_fixed[here[0], here[1]]
        if pushed:
            self.room_state[beyond[0], beyond[1]] = BOX_ON_TARGET if self.room_fixed[beyond[0], beyond[1]] == TARGET else BOX
        return True, pushed

    def _boxes_on_targets(self) -> int:
        return int(np.sum(self.room_state == BOX_ON_TARGET))

    def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        self.turn_count += 1
        found = _MOVE.findall(action or "")
        if not found:
            return self.format_error(f"At turn {self.turn_count}, your submitted action is not valid.")
        move = found[-1].lower()
        reward = INVALID_ACTION_REWARD
        if self._blocked(MOVES[move]):
            observation = f"At turn {self.turn_count}, you cannot move {move} - you would collide with wall or other boxes!"
        else:
            moved, pushed = self._walk(MOVES[move])
            if not moved:
                observation = f"At turn {self.turn_count}, invalid move - cannot move to that position."
            elif self._boxes_on_targets() == self.num_boxes:
                return "Congratulations! You have solved the Sokoban puzzle!", SUCCESS_REWARD, True, False, {"suffix": self.get_task_suffix()}
            else:
                observation = f"At turn {self.turn_count}, you {'pushed a box while you ' if pushed else ''}moved {move}."
                reward = INTERNAL_STEP_REWARD
        if self.turn_count >= self.max_turns:
            return ("You have reached the maximum number of turns.", SUCCESS_REWARD * (self._boxes_on_targets() / self.num_boxes),
                    True, True, {"suffix": self.get_task_suffix()})
        return observation, reward, False, False, {"suffix": self.get_task_suffix()}

    def sample_random_action(self) -> str:
        return f"\\boxed{{{self.rng.choice(list(MOVES))}}}"
