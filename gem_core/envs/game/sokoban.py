"""Sokoban: push every box onto a goal square.

Rooms are generated from the env's RNG by reverse play: a small walled room (a few inner walls, floor
kept connected) gets its boxes on the goals, then the player walks and *pulls* boxes (preferring a pull
when a box is at hand) for ``reverse_steps`` random steps, and the state on that walk whose boxes are
farthest from the goals becomes the puzzle (redrawn, up to 100 times, until the boxes are in all at
least two squares per box from the goals). A short walk may pull no box at all: when the last room drawn
is still solved, one box is pulled a square off its goal instead, so no room is ever dealt solved. Walking
back is a solution, so every puzzle is solvable in at most ``reverse_steps`` moves.

A move is ``\\boxed{up}``, ``down``, ``left`` or ``right`` (or ``u``/``d``/``l``/``r``). Walking into
a box pushes it if the square behind it is free; walking into a wall, or pushing into a wall or a
second box, is refused with the format penalty.

The board uses the usual Sokoban characters: ``#`` wall, ``-`` floor, ``.`` goal, ``$`` box, ``*``
box on a goal, ``@`` player, ``+`` player on a goal.

Rewards (dense): progress is the share of the boxes that started off a goal that are now on one
(``(on_goal - on_goal_at_start) / (boxes - on_goal_at_start)``, clipped at 0); each turn earns the
rise of the best progress so far. A solved room always returns exactly :attr:`Sokoban.max_return` = 1.0.

Variants: ``-easy`` 5x5 room, 1 box, 12 reverse steps, 30 turns; ``-v0`` 6x6, 2 boxes, 25 steps,
60 turns; ``-hard`` 7x7, 2 boxes, 45 steps, 100 turns.
"""

from __future__ import annotations

from collections import deque
from typing import Any

import numpy as np

from gem_core.env import StepResult
from gem_core.envs.game.action_format import BOXED_HINT, extract_boxed
from gem_core.envs.game.turn_based import TurnBasedGame
from gem_core.errors import InvalidArgument
from gem_core.tools.tool import check_count_from_zero
from gem_core.vector.calls import check_count

MOVES = {"up": (-1, 0), "down": (1, 0), "left": (0, -1), "right": (0, 1)}
Cell = tuple[int, int]
#: The share of the room's squares that may be inner walls: the walls are drawn at random until the floor is
#: connected, which at a fifth of a 20x20 room takes three or four draws and at 100 walls in 15x15 never happens.
MAX_WALL_SHARE = 0.2
#: Wall layouts a reset draws before it gives up on the settings (a one-square-wide room seldom stays connected).
FLOOR_ATTEMPTS = 1000
#: The longest side of the room and the most boxes. A reset redraws the room up to 100 times until its boxes sit
#: far enough from the goals, and each step of its walk measures every box against every goal: at these bounds
#: a reset takes up to 1.5 s; a 30x30 room took 5 s, 10 boxes 3 s, 100 boxes over a minute.
MAX_SIDE, MAX_BOXES = 20, 6
#: The longest walk back from the solved room (each of the up to 100 rooms a reset draws walks it).
MAX_REVERSE_STEPS = 10_000
#: Rooms a reset draws looking for one whose boxes sit two squares each from the goals (the last is kept if
#: none does).
SCRAMBLE_DRAWS = 100
#: Rooms (floor and goals, no walk) a reset draws, when the kept room is solved, until one has a box that
#: can be pulled off its goal. A short walk seldom pulls a box (reverse_steps=1 left the room solved in nine
#: draws of ten), and the kept room used to be dealt solved; a room with no three squares in a line never
#: has a pull.
PULL_DRAWS = 1000


def _connected(floor: np.ndarray) -> bool:
    cells = list(zip(*np.nonzero(floor), strict=True))
    seen, queue = {cells[0]}, deque([cells[0]])
    while queue:
        r, c = queue.popleft()
        for dr, dc in MOVES.values():
            n = (r + dr, c + dc)
            if floor[n] and n not in seen:
                seen.add(n)
                queue.append(n)
    return len(seen) == len(cells)


class Sokoban(TurnBasedGame):
    def __init__(self, height: int = 6, width: int = 6, boxes: int = 2, inner_walls: int = 3, reverse_steps: int = 25, max_turns: int = 60):
        """A ``height`` x ``width`` room (inside its outer walls) with ``boxes`` boxes and ``inner_walls`` walls.

        Raises:
            InvalidArgument: if a setting is not a whole number in range (``inner_walls`` from 0, the others from
                1, the sides up to :data:`MAX_SIDE`, ``boxes`` up to :data:`MAX_BOXES`, ``reverse_steps`` up to
                :data:`MAX_REVERSE_STEPS`), the inner walls are past :data:`MAX_WALL_SHARE` of the room,
                the room has no space for the boxes, ``reverse_steps`` is below ``boxes`` (a step pulls at
                most one box off its goal) or past ``max_turns``.
        """
        cells = check_count("height", height, most=MAX_SIDE) * check_count("width", width, most=MAX_SIDE)
        check_count("boxes", boxes, most=MAX_BOXES)
        check_count("reverse_steps", reverse_steps, most=MAX_REVERSE_STEPS)
        check_count("max_turns", max_turns)
        if check_count_from_zero("inner_walls", inner_walls) > cells * MAX_WALL_SHARE:
            raise InvalidArgument(
                f"inner_walls={inner_walls} must be at most {int(cells * MAX_WALL_SHARE)} in a {height}x{width} room: "
                f"walls are drawn at random until the floor is connected, which past {MAX_WALL_SHARE:.0%} of it seldom is."
            )
        if cells < 2 * boxes + inner_walls + 2:
            raise InvalidArgument(f"A {height}x{width} room is too small for {boxes} boxes and {inner_walls} inner walls.")
        if reverse_steps < boxes:
            raise InvalidArgument(
                f"reverse_steps={reverse_steps} must be at least {boxes} (boxes) here: each step of the walk back pulls "
                f"at most one box off its goal, so fewer steps deal a room with boxes never moved."
            )
        if reverse_steps > max_turns:
            raise InvalidArgument(f"max_turns ({max_turns}) must be at least reverse_steps ({reverse_steps}) so the room is solvable in time.")
        self.height, self.width, self.num_boxes = height, width, boxes
        self.inner_walls, self.reverse_steps, self.max_turns = inner_walls, reverse_steps, max_turns
        self.floor = np.zeros((height + 2, width + 2), dtype=bool)
        self.goals: frozenset[Cell] = frozenset()
        self.boxes: set[Cell] = set()
        self.player: Cell = (1, 1)
        self.start_on_goal = 0
        self.best_progress = 0.0
        self.started = False

    def _random_floor(self) -> np.ndarray:
        for _ in range(FLOOR_ATTEMPTS):
            floor = np.zeros((self.height + 2, self.width + 2), dtype=bool)
            floor[1:-1, 1:-1] = True
            inner = self.np_random.choice(self.height * self.width, size=self.inner_walls, replace=False)
            for i in inner:
                floor[1 + int(i) // self.width, 1 + int(i) % self.width] = False
            if _connected(floor):
                return floor
        raise InvalidArgument(
            f"No connected floor in {FLOOR_ATTEMPTS} draws of inner_walls={self.inner_walls} in a height={self.height} x "
            f"width={self.width} room; use fewer inner walls or a wider room."
        )

    def _solved_room(self) -> None:
        """Goals on the floor, a box on each, and the player on another square."""
        cells = [(int(r), int(c)) for r, c in np.argwhere(self.floor)]
        picks = self.np_random.choice(len(cells), size=self.num_boxes + 1, replace=False)
        self.goals = frozenset(cells[int(i)] for i in picks[:-1])
        self.boxes, self.player = set(self.goals), cells[int(picks[-1])]

    def _pull_one_box(self) -> bool:
        """Pull one box of the solved room a square off its goal, the player a square behind it (one push
        solves it); False when no box has two free squares in a line beside it."""
        pulls = []
        for r, c in sorted(self.goals):
            for dr, dc in MOVES.values():
                to, behind = (r + dr, c + dc), (r + 2 * dr, c + 2 * dc)
                if self.floor[to] and self.floor[behind] and to not in self.goals and behind not in self.goals:
                    pulls.append(((r, c), to, behind))
        if not pulls:
            return False
        box, to, behind = pulls[int(self.np_random.integers(len(pulls)))]
        self.boxes, self.player = set(self.goals) - {box} | {to}, behind
        return True

    def _reverse_play(self) -> None:
        """Start solved, walk and pull boxes at random, and keep the walk's state whose boxes sit farthest
        from the goals (every state on the walk is solvable by walking it back)."""
        self._solved_room()
        best = (self._displacement(), set(self.boxes), self.player)
        for _ in range(self.reverse_steps):
            r, c = self.player
            free = [(dr, dc) for dr, dc in MOVES.values() if self.floor[r + dr, c + dc] and (r + dr, c + dc) not in self.boxes]
            pulls = [(dr, dc) for dr, dc in free if (r - dr, c - dc) in self.boxes]
            if not free:
                break
            # Prefer pulling when a box is at hand: a pure random walk rarely moves boxes far.
            options = pulls if pulls and self.np_random.random() < 0.7 else free
            dr, dc = options[int(self.np_random.integers(len(options)))]
            if (dr, dc) in pulls:
                self.boxes.remove((r - dr, c - dc))
                self.boxes.add((r, c))
            self.player = (r + dr, c + dc)
            if self._displacement() >= best[0]:
                best = (self._displacement(), set(self.boxes), self.player)
        _, self.boxes, self.player = best

    def _displacement(self) -> int:
        """Summed distance of each box from its nearest goal: how scrambled the room is."""
        return sum(min(abs(br - gr) + abs(bc - gc) for gr, gc in self.goals) for br, bc in self.boxes)

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
        """Draw a room by reverse play (see the module docstring); never one already solved.

        Raises:
            InvalidArgument: if no connected floor is drawn (naming ``inner_walls``), or, the walks having
                moved no box, none of :data:`PULL_DRAWS` rooms lets a box be pulled off its goal (naming
                the room's settings).
        """
        super().reset(seed=seed)
        for _ in range(SCRAMBLE_DRAWS):  # a room whose boxes are at least two squares each from the goals, if one turns up
            self.floor = self._random_floor()
            self._reverse_play()
            if self.boxes != self.goals and self._displacement() >= 2 * self.num_boxes:
                break
        # Only when the walks left the kept room solved: the rooms of every other seed stay as they were.
        for _ in range(PULL_DRAWS):
            if self.boxes != self.goals or self._pull_one_box():
                break
            self.floor = self._random_floor()
            self._solved_room()
        else:
            raise InvalidArgument(
                f"No box could be pulled off its goal in {PULL_DRAWS} rooms of height={self.height} x width={self.width} "
                f"with boxes={self.num_boxes} and inner_walls={self.inner_walls} (reverse_steps={self.reverse_steps} "
                f"walks moved none): a pull needs two free squares in a line beside a box; use a larger room or "
                f"fewer boxes or inner walls."
            )
        self.start_on_goal = len(self.boxes & self.goals)
        self.best_progress, self.started = 0.0, True
        obs = (
            f"Let's play Sokoban. Push every box ($) onto a goal (.) by walking the player (@). You can push one box at "
            f"a time by walking into it, never pull. Symbols: # wall, - floor, . goal, $ box, * box on a goal, @ player, "
            f"+ player on a goal. Moves: up, down, left, right. You have at most {self.max_turns} turns. "
            + BOXED_HINT % "up"
            + f"\n{self.render()}"
        )
        return obs, {"max_turns": self.max_turns}

    def step(self, action: str) -> StepResult:
        out_of_turns = self.take_turn()
        move = (extract_boxed(action) or "").lower()
        direction = next((d for d in MOVES if move in (d, d[0])), None)
        problem = None
        if direction is None:
            problem = "expected up, down, left or right inside \\boxed{}"
        else:
            dr, dc = MOVES[direction]
            r, c = self.player
            ahead, beyond = (r + dr, c + dc), (r + 2 * dr, c + 2 * dc)
            if not self.floor[ahead]:
                problem = f"a wall blocks {direction}"
            elif ahead in self.boxes and (not self.floor[beyond] or beyond in self.boxes):
                problem = f"the box {direction} of you cannot be pushed"
        if problem is not None:
            return self.invalid_move(problem, out_of_turns)
        if ahead in self.boxes:
            self.boxes.remove(ahead)
            self.boxes.add(beyond)
        self.player = ahead
        on_goal = len(self.boxes & self.goals)
        progress = max(0.0, (on_goal - self.start_on_goal) / max(1, self.num_boxes - self.start_on_goal))
        reward = max(0.0, progress - self.best_progress)
        self.best_progress = max(self.best_progress, progress)
        return self.end_turn(reward, out_of_turns, won=on_goal == self.num_boxes)

    def legal_moves(self) -> list[str]:
        """Directions the player can walk or push in."""
        r, c = self.player
        legal = []
        for name, (dr, dc) in MOVES.items():
            ahead, beyond = (r + dr, c + dc), (r + 2 * dr, c + 2 * dc)
            if self.floor[ahead] and (ahead not in self.boxes or (self.floor[beyond] and beyond not in self.boxes)):
                legal.append(name)
        return legal

    def sample_random_action(self) -> str:
        """A uniformly random move that is not blocked."""
        moves = self.legal_moves() or list(MOVES)
        return f"\\boxed{{{moves[int(self.np_random.integers(len(moves)))]}}}"

    def render(self) -> str:
        """The room in Sokoban notation (see the module docstring)."""
        lines = []
        for r in range(self.floor.shape[0]):
            row = []
            for c in range(self.floor.shape[1]):
                cell, goal = (r, c), (r, c) in self.goals
                if not self.floor[cell]:
                    row.append("#")
                elif cell == self.player:
                    row.append("+" if goal else "@")
                elif cell in self.boxes:
                    row.append("*" if goal else "$")
                else:
                    row.append("." if goal else "-")
            lines.append("".join(row))
        return "\n".join(lines)
