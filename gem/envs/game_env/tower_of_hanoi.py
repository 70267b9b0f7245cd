"""GEM's Tower of Hanoi: move ``num_disks`` disks from tower A to tower C; 1.0 on solving it."""

from __future__ import annotations

import re
from typing import Any

from gem.envs.game_env.base import INTERNAL_STEP_REWARD, INVALID_ACTION_REWARD, SUCCESS_REWARD, GameEnv

_MOVE = re.compile(r"\\boxed{([ABCabc])\s*,?\s*([ABCabc])}")


class TowerofHanoiEnv(GameEnv):
    """Running out of turns scores the share of disks on tower C (GEM's soft reward)."""

    def __init__(self, num_disks: int | None = 3, max_turns: int | None = 100, seed: int | None = None, **_: Any) -> None:
        super().__init__(seed)
        # None anywhere: each episode draws the level (GEM's rule); otherwise reset() takes this one.
        self._level = None if num_disks is None or max_turns is None else (num_disks, max_turns)
        self.reset()

    def _instructions(self) -> str:
        return (
            f"You are playing Tower of Hanoi with {self.num_disks} disks.\n"
            "You have to move the disks from tower A to tower C.\n"
            "To move a disk, type the source tower and the target tower (e.g., '\\boxed{A C}').\n"
            "Note that you can only move the top disk of a tower, and that a bigger disk cannot be placed on a smaller disk.\n"
            "As you play, the history of your moves will be displayed.\n"
        )

    def _render_board(self) -> str:
        return "".join(f"{tower}: {disks}\n" for tower, disks in self.board.items())

    def get_task_suffix(self) -> str:
        return f"Here is the current state of the tower of hanoi:\n{self._render_board()}\nEnter your move."

    def reset(self, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
        super().reset(seed, options)
        self.num_disks, self.max_turns = self._level or self.rng.choice([(3, 10), (4, 20), (5, 35)])
        self.board: dict[str, list[int]] = {"A": list(range(self.num_disks, 0, -1)), "B": [], "C": []}
        self.turn_count = 0
        return self._instructions(), {"suffix": self.get_task_suffix()}

    def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        self.turn_count += 1
        found = _MOVE.findall(action)
        if not found:
            return self.format_error("You did not provide a valid action.")
        src, dst = (tower.upper() for tower in found[-1])
        if not self.board[src]:
            observation = f"At turn {self.turn_count}, you tried to move from tower {src}, which is empty."
            reward = INVALID_ACTION_REWARD
        elif self.board[dst] and self.board[src][-1] > self.board[dst][-1]:
            observation = (f"At turn {self.turn_count}, you tried to move from tower {src} to tower {dst}, "
                           f"but the top disk on tower {src} is larger than the top disk on tower {dst}.")
            reward = INVALID_ACTION_REWARD
        else:
            disk = self.board[src].pop()
            self.board[dst].append(disk)
            if self.board["C"] == list(range(self.num_disks, 0, -1)):
                return "Congratulations! You solved the Tower of Hanoi Puzzle", SUCCESS_REWARD, True, False, {"suffix": self.get_task_suffix()}
            observation = f"At turn {self.turn_count}, you moved disk {disk} from tower {src} to tower {dst}."
            reward = INTERNAL_STEP_REWARD
        if self.turn_count >= self.max_turns:
            return ("You have reached the maximum number of turns.", len(self.board["C"]) / self.num_disks, True, True,
                    {"suffix": self.get_task_suffix()})
        return observation, reward, False, False, {"suffix": self.get_task_suffix()}

    def sample_random_action(self) -> str:
        src, dst = self.rng.sample("ABC", 2)
        return f"\\boxed{{{src} {dst}}}"
