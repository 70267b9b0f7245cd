"""GEM's FifteenPuzzle under ``import gem``: 0.1.0's boards for GEM's ids, and the later GEM's solvable-board
API (``init_algo``, ``mc_rand_moves`` and the board helpers its own test drives) when asked for.

GEM 0.1.0 shuffles the tiles (half of its boards cannot be solved); GEM after 0.1.0 (4069f2f) walks back
from the goal (``monte_carlo``) or fixes a shuffle's parity (``pure_random``). Ids keep 0.1.0's draw, the
side-by-side session's reference, so a seed gives the released package's board.
"""

from __future__ import annotations

from collections import deque

import pytest

import gem
from gem.envs.game_env.fifteen_puzzle import FifteenPuzzleEnv

GOAL_3 = [[1, 2, 3], [4, 5, 6], [7, 8, None]]


def _solvable_by_search(board: list[list[int | None]]) -> bool:
    """Breadth-first search over 3x3 boards (181,440 reachable states): ground truth for the parity rule."""
    start = tuple(t for row in board for t in row)
    goal = tuple(t for row in GOAL_3 for t in row)
    seen, todo = {start}, deque([start])
    while todo:
        state = todo.popleft()
        if state == goal:
            return True
        gap = state.index(None)
        r, c = divmod(gap, 3)
        for dr, dc in ((1, 0), (-1, 0), (0, 1), (0, -1)):
            if 0 <= r + dr < 3 and 0 <= c + dc < 3:
                nxt = list(state)
                src = (r + dr) * 3 + c + dc
                nxt[gap], nxt[src] = nxt[src], None
                t = tuple(nxt)
                if t not in seen:
                    seen.add(t)
                    todo.append(t)
    return False


def test_gems_board_helpers_are_there() -> None:
    env = FifteenPuzzleEnv(max_turns=100, num_rows=4, init_algo="monte_carlo", mc_rand_moves=20)
    assert env._generate_goal_board()[3] == [13, 14, 15, None]
    assert env._is_solvable([[1, 2, 3, 4], [5, 6, 7, 8], [9, 10, 11, 12], [13, 14, None, 15]])
    assert not env._is_solvable([[1, 2, 3, 4], [5, 6, 7, 8], [9, 10, 11, 12], [13, 15, 14, None]])
    assert not env._is_solvable([[1, 1, 3, 4], [5, 6, 7, 8], [9, 10, 11, 12], [13, 14, 15, None]])
    env.board = [row[:] for row in env.goal_board]
    assert env._is_solved() and env._get_empty_position() == (3, 3)
    assert env._move("down") and env._get_empty_position() == (2, 3)
    assert env._move("left") is False and env._get_empty_position() == (2, 3)  # no tile right of the gap


@pytest.mark.parametrize("init_algo", ["monte_carlo", "pure_random"])
def test_gems_later_init_algos_draw_solvable_boards(init_algo: str) -> None:
    env = FifteenPuzzleEnv(max_turns=20, num_rows=3, init_algo=init_algo, mc_rand_moves=30)
    for seed in range(3):
        env.reset(seed=seed)
        assert sorted(t for row in env.board for t in row if t is not None) == list(range(1, 9))
        assert _solvable_by_search(env.board)
        assert env._is_solvable(env.board)


def test_an_unknown_init_algo_is_refused_with_the_choices() -> None:
    with pytest.raises(ValueError, match="init_algo.*monte_carlo.*pure_random"):
        FifteenPuzzleEnv(init_algo="spiral")


def test_gems_ids_keep_0_1_0s_shuffled_board() -> None:
    # GEM 0.1.0, seed 3, game:FifteenPuzzle-v0-easy: random.seed(3); random.shuffle([1, 2, 3, None])
    import random

    rng = random.Random(3)
    tiles = [1, 2, 3, None]
    rng.shuffle(tiles)
    env = gem.make("game:FifteenPuzzle-v0-easy")
    env.reset(seed=3)
    assert env.board == [tiles[:2], tiles[2:]]
