"""GEM's Sokoban room generator, draw for draw: a random walk carves the floor, boxes and the player are
placed away from corner traps, then a reverse game (the player pulls boxes off their targets) finds the
start that moves the boxes farthest, which is solvable by construction.

Same seed, same room as GEM: the walk draws from ``random.Random(seed)`` and the placement from
``numpy.random.default_rng(seed)``, in GEM's order. Cell codes: 0 wall, 1 floor, 2 target, 3 box on
target, 4 box, 5 player.
"""

from __future__ import annotations

import random
from collections import deque

import numpy as np

__all__ = ["MOVES", "generate_room"]

WALL, FLOOR, TARGET, BOX_ON_TARGET, BOX, PLAYER = range(6)
MOVES = {"up": (-1, 0), "down": (1, 0), "left": (0, -1), "right": (0, 1)}
"""The player's moves by name, each as a ``(row, column)`` step."""
_SIDES = [(-1, 0), (1, 0), (0, -1), (0, 1)]
_MASKS = [
    [[0, 0, 0], [1, 1, 1], [0, 0, 0]],
    [[0, 1, 0], [0, 1, 0], [0, 1, 0]],
    [[0, 0, 0], [1, 1, 0], [0, 1, 0]],
    [[0, 0, 0], [1, 1, 0], [1, 1, 0]],
    [[0, 0, 0], [0, 1, 1], [0, 1, 0]],
]
_WALK_DIRECTIONS = [(1, 0), (0, 1), (-1, 0), (0, -1)]
_SEARCH_STATES, _SEARCH_DEPTH = 300_000, 300


def _inside(room: np.ndarray, r: int, c: int) -> bool:
    return 0 <= r < room.shape[0] and 0 <= c < room.shape[1]


def is_corner_trap(structure: np.ndarray, r: int, c: int) -> bool:
    """A box at ``(r, c)`` off a target with walls on two neighbouring sides can never move again."""
    if structure[r, c] == TARGET:
        return False
    walls = [i for i, (dr, dc) in enumerate(_SIDES) if not _inside(structure, r + dr, c + dc) or structure[r + dr, c + dc] == WALL]
    if len(walls) > 2:
        return True
    return len(walls) == 2 and abs(walls[0] - walls[1]) in (1, 3)  # GEM's test for neighbouring sides


def _player_reaches(state: np.ndarray, goal: tuple[int, int]) -> bool:
    found = np.where(state == PLAYER)
    if len(found[0]) == 0:
        return False
    start = (found[0][0], found[1][0])
    if start == goal:
        return True
    seen, queue = {start}, deque([start])
    while queue:
        r, c = queue.popleft()
        for dr, dc in _SIDES:
            cell = (r + dr, c + dc)
            if _inside(state, *cell) and cell not in seen and state[cell] in (FLOOR, TARGET):
                if cell == goal:
                    return True
                queue.append(cell)
                seen.add(cell)
    return False


def _box_frozen(state: np.ndarray, r: int, c: int) -> bool:
    for dr, dc in _SIDES:
        to, push_from = (r + dr, c + dc), (r - dr, c - dc)
        if (_inside(state, *to) and _inside(state, *push_from) and state[to] in (FLOOR, TARGET)
                and (state[push_from] in (FLOOR, TARGET) or _player_reaches(state, push_from))):
            return False
    return True


def has_deadlock(state: np.ndarray, structure: np.ndarray) -> bool:
    """Whether a box sits in a corner trap, or (with two or more boxes) some box cannot be pushed at all."""
    rows, cols = np.where((state == BOX_ON_TARGET) | (state == BOX))
    if any(is_corner_trap(structure, r, c) for r, c in zip(rows, cols, strict=True)):
        return True
    return len(rows) >= 2 and any(_box_frozen(state, r, c) for r, c in zip(rows, cols, strict=True))


def _carve(dim: tuple[int, int], p_turn: float, steps: int, draw: random.Random) -> np.ndarray:
    rows, cols = dim
    direction = draw.sample(_WALK_DIRECTIONS, 1)[0]
    position = np.array([draw.randint(1, rows - 1), draw.randint(1, cols - 1)])
    level = np.zeros(dim, dtype=int)
    for _ in range(steps):
        if draw.random() < p_turn:
            direction = draw.sample(_WALK_DIRECTIONS, 1)[0]
        position = position + direction
        position[0] = max(min(position[0], rows - 2), 1)
        position[1] = max(min(position[1], cols - 2), 1)
        mask = draw.sample(_MASKS, 1)[0]
        level[position[0] - 1:position[0] + 2, position[1] - 1:position[1] + 2] += mask
    level[level > 0] = FLOOR
    level[:, [0, cols - 1]] = WALL
    level[[0, rows - 1], :] = WALL
    return level


def _place(room: np.ndarray, num_boxes: int, draw: np.random.Generator) -> np.ndarray:
    """The player, then ``num_boxes`` targets (where the boxes start) off corner traps."""
    free = np.where(room == FLOOR)
    if free[0].shape[0] <= num_boxes + 1:
        raise RuntimeError(f"Not enough free spots (#{free[0].shape[0]}) to place 1 player and {num_boxes} boxes.")
    pick = draw.integers(free[0].shape[0])
    room[free[0][pick], free[1][pick]] = PLAYER
    placed, attempts, max_attempts = 0, 0, free[0].shape[0] * 3
    while placed < num_boxes and attempts < max_attempts:
        free = np.where(room == FLOOR)
        if free[0].shape[0] == 0:
            break
        pick = draw.integers(free[0].shape[0])
        r, c = free[0][pick], free[1][pick]
        trial = room.copy()
        trial[r, c] = TARGET
        if not is_corner_trap(trial, r, c):
            room[r, c] = TARGET
            placed += 1
        attempts += 1
    if placed < num_boxes:
        raise RuntimeError("Could not place all boxes without creating deadlocks")
    return room


class _ReverseSearch:
    """Depth-first reverse play from the solved room, keeping the state whose boxes moved farthest
    (displacement times the number of times the pulled box changed; GEM's score)."""

    def __init__(self, structure: np.ndarray) -> None:
        self.structure = structure
        targets = np.where(structure == TARGET)
        self.num_boxes = len(targets[0])
        self.explored: set[bytes] = set()
        self.best_score = -1
        self.best_room: np.ndarray | None = None
        self.best_mapping = {(r, c): (r, c) for r, c in zip(*targets, strict=True)}

    def search(self, state: np.ndarray, mapping: dict, swaps: int, last_pull: tuple, ttl: int) -> None:
        ttl -= 1
        if ttl <= 0 or len(self.explored) >= _SEARCH_STATES:
            return
        key = state.tobytes()
        if key in self.explored:
            return
        score = swaps * sum(abs(int(b[0]) - int(t[0])) + abs(int(b[1]) - int(t[1])) for t, b in mapping.items())
        if np.where(state == TARGET)[0].shape[0] != self.num_boxes:
            score = 0
        if score > self.best_score:
            self.best_room, self.best_score, self.best_mapping = state, score, mapping
        self.explored.add(key)
        for move in MOVES.values():
            next_state, next_mapping = state.copy(), mapping.copy()
            pulled = self._pull(next_state, next_mapping, last_pull, move)
            # GEM counts the swap but passes the old last_pull down: kept, so rooms match GEM's
            self.search(next_state, next_mapping, swaps + (pulled != last_pull), last_pull, ttl)

    def _pull(self, state: np.ndarray, mapping: dict, last_pull: tuple, move: tuple[int, int]) -> tuple:
        found = np.where(state == PLAYER)
        r, c = found[0][0], found[1][0]
        nr, nc = r + move[0], c + move[1]
        if state[nr, nc] not in (FLOOR, TARGET):
            return last_pull
        state[r, c] = self.structure[r, c]
        state[nr, nc] = PLAYER
        br, bc = r - move[0], c - move[1]
        if state[br, bc] in (BOX_ON_TARGET, BOX):
            state[r, c] = BOX_ON_TARGET
            state[br, bc] = self.structure[br, bc]
            for target, box in mapping.items():
                if box == (br, bc):
                    mapping[target] = (r, c)
                    last_pull = target
        return last_pull


def generate_room(dim: tuple[int, int], num_steps: int, num_boxes: int, seed: int | None,
                  p_change_directions: float = 0.35, tries: int = 1000) -> tuple[np.ndarray, np.ndarray, dict]:
    """``(structure, state, box_mapping)`` of a solvable room, as GEM's ``generate_room``.

    Raises:
        RuntimeWarning: no room without a deadlock in ``tries`` walks (GEM's signal to retry with seed + 1).
    """
    walk, placement = random.Random(seed), np.random.default_rng(seed)
    for _ in range(tries):
        try:
            room = _place(_carve(dim, p_change_directions, num_steps, walk), num_boxes, placement)
        except RuntimeError:
            continue
        structure = room.copy()
        structure[structure == PLAYER] = FLOOR
        state = room.copy()
        state[state == TARGET] = BOX
        if has_deadlock(state, structure):
            continue
        search = _ReverseSearch(structure)
        search.search(state, search.best_mapping, 0, (-1, -1), _SEARCH_DEPTH)
        # the search's first state scores >= 0, above best_score's starting -1, so a room is always kept
        assert search.best_room is not None
        state = search.best_room
        state[state == BOX_ON_TARGET] = BOX
        if search.best_score > 0 and not has_deadlock(state, structure):
            return structure, state, search.best_mapping
    raise RuntimeWarning(f"Could not generate a room without deadlocks after {tries} tries")
