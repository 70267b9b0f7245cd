"""Under ``import gem``, GEM's game ids are GEM's games: its levels, turn limits, rewards and rules.

Expected values come from GEM 0.1.0 (``gem-llm``) itself; ``tests/gem_upstream`` compares whole
episodes side by side with it. These run without it, in the core session.
"""

from __future__ import annotations

import pytest

import gem
from gem.envs.game_env import GAME_SPECS

# GEM 0.1.0's own FifteenPuzzle-v0-random cannot be built (num_rows=None reaches num_rows**2); here it draws its level.
# Sokoban-v0-hard's room search takes seconds, as in GEM: its rule is the easy level's (and tests/gem_upstream plays it).
BUILDABLE = sorted(set(GAME_SPECS) - {"game:Sokoban-v0-hard"})


@pytest.mark.parametrize("env_id", BUILDABLE)
def test_a_malformed_action_ends_the_episode_with_the_format_penalty(env_id: str) -> None:
    env = gem.make(env_id)
    env.reset(seed=0)
    _, reward, terminated, truncated, _ = env.step("I would rather not answer")
    assert (reward, terminated, truncated) == (-0.1, True, False)


@pytest.mark.parametrize(
    ("env_id", "illegal_move", "turns"),
    [
        ("game:GuessTheNumber-v0-easy", "\\boxed{99}", 4),
        ("game:GuessTheNumber-v0-hard", "\\boxed{99}", 7),
        ("game:Mastermind-v0-easy", "\\boxed{9 9}", 10),
        ("game:Mastermind-v0-hard", "\\boxed{9 9 9 9}", 30),
        ("game:Minesweeper-v0-easy", "\\boxed{reveal 5 5}", 25),  # 0-based: row 5 is off a 5x5 board
        ("game:Sudoku-v0-easy", "\\boxed{5 5 5}", 15),
        ("game:TowerofHanoi-v0-easy", "\\boxed{B C}", 10),  # tower B is empty
        ("game:Wordle-v0-easy", "\\boxed{ab}", 15),  # 2 letters, the secret has 3
        ("game:Hangman-v0-easy", "\\boxed{zz}", 10),  # a whole-word guess of the wrong length
        ("game:WordSearch-v0-easy", "\\boxed{20 20 20 24}", 20),  # off the grid
    ],
)
def test_turn_limit_is_gems_and_a_legal_format_illegal_move_scores_zero(env_id: str, illegal_move: str, turns: int) -> None:
    env = gem.make(env_id)
    env.reset(seed=0)
    results = []
    for _ in range(turns + 5):
        _, reward, terminated, truncated, _ = env.step(illegal_move)
        results.append(reward)
        if terminated or truncated:
            break
    assert len(results) == turns
    assert (terminated, truncated) == (True, True)
    assert results[:-1] == [0.0] * (turns - 1)


def test_a_seeded_reset_draws_gems_secret() -> None:
    # GEM 0.1.0, reset(seed=3), read from its env attributes.
    env = gem.make("game:GuessTheNumber-v0-hard")
    env.reset(seed=3)
    assert env.game_number == 16
    env = gem.make("game:Mastermind-v0-easy")
    env.reset(seed=3)
    assert env.game_code == [2, 5]
    env = gem.make("game:Sudoku-v0-easy")
    env.reset(3)  # GEM's positional seed
    assert env.full_grid == [[4, 1, 2, 3], [3, 2, 4, 1], [2, 3, 1, 4], [1, 4, 3, 2]]
    assert env.board == [[0, 0, 2, 0], [0, 2, 4, 1], [0, 0, 0, 4], [1, 0, 0, 0]]
    env = gem.make("game:Game2048-v0-easy")
    env.reset(seed=3)
    assert env.board == [[0, 0, 2, 0], [0, 0, 0, 2], [0, 0, 0, 0], [0, 0, 0, 0]]


def test_minesweeper_is_gems_5x5_with_5_mines_and_0_based_cells() -> None:
    env = gem.make("game:Minesweeper-v0-easy")
    observation, info = env.reset(seed=3)
    board = "   " + " ".join(str(c).rjust(2) for c in range(5))  # the board's column header
    assert board not in observation and board in info["suffix"]  # the board is the suffix, shown once
    observation, reward, terminated, _, info = env.step("\\boxed{reveal 0 0}")
    assert observation == "At turn 1, you successfully revealed cell (0, 0)." and reward > 0 and not terminated
    mines = [(r, c) for r in range(5) for c in range(5) if env.grid[r][c] == -1]
    assert mines == [(0, 3), (0, 4), (2, 4), (3, 4), (4, 3)]  # GEM's mines for this seed and first reveal


def test_sudoku_scores_each_correct_cell_as_its_share_of_the_empty_cells() -> None:
    env = gem.make("game:Sudoku-v0-easy")
    env.reset(seed=3)  # 10 empty cells; R1 C1 is 4 (see test_a_seeded_reset_draws_gems_secret)
    _, reward, terminated, _, _ = env.step("\\boxed{1 1 4}")
    assert (reward, terminated) == (0.1, False)


def test_tower_of_hanoi_pays_1_on_solving_and_nothing_per_move() -> None:
    env = gem.make("game:TowerofHanoi-v0-easy")
    env.reset(seed=0)
    moves = ["A C", "A B", "C B", "A C", "B A", "B C", "A C"]
    rewards = [env.step(f"\\boxed{{{move}}}")[1] for move in moves]
    assert rewards == [0.0] * 6 + [1.0]


def test_concat_shows_a_gem_games_board_once_after_the_history() -> None:
    from gem.wrappers.wrapper_factory import WRAPPER_FACTORY

    env = WRAPPER_FACTORY["concat"](gem.make("game:Minesweeper-v0-easy"))
    shown, info = env.reset(seed=3)
    assert shown.endswith(info["suffix"])
    shown, _, _, _, info = env.step("\\boxed{reveal 0 0}")
    assert shown.endswith(info["suffix"]) and shown.count("Here is the current board layout:") == 1
    assert "At turn 1, you successfully revealed cell (0, 0)." in shown


def test_sokoban_is_gems_room_and_takes_any_turn_limit() -> None:
    env = gem.make("game:Sokoban-v0-easy", max_turns=3)  # GEM's own test: fewer turns than a solution needs
    _, info = env.reset(seed=0)
    rows = ["# # # # # #", "# # _ _ _ #", "# _ X _ O #", "# _ # O X #", "# _ _ _ P #", "# # # # # #"]
    assert info["suffix"] == "Here is the current board layout:\n" + "\n".join(rows) + "\n\nEnter your move."  # GEM's room for seed 0
    results = [env.step(move)[:4] for move in ("\\boxed{up}", "\\boxed{up}", "\\boxed{left}")]
    assert results == [
        ("At turn 1, you pushed a box while you moved up.", 0.0, False, False),
        ("At turn 2, you pushed a box while you moved up.", 0.0, False, False),
        ("You have reached the maximum number of turns.", 0.0, True, True),
    ]


def test_print_envs_lists_gems_games_under_gems_ids(capsys: pytest.CaptureFixture[str]) -> None:
    gem.print_envs()
    printed = capsys.readouterr().out
    assert "  - game:TowerofHanoi-v0-easy:\n      Entry Point: gem.envs.game_env.tower_of_hanoi:TowerofHanoiEnv" in printed
    assert "game:TowerofHanoi-v0-easy ->" not in printed  # no longer an alias of the core's game under import gem
