"""Game rule defects found in the field: Sokoban dealt rooms already solved, Sudoku could not take back a
digit, dealt fewer blanks than asked without a word, and four games read other scripts' digits as moves."""

from __future__ import annotations

import numpy as np
import pytest

import gem_core
from gem_core.envs.game.sokoban import MOVES, Sokoban
from gem_core.envs.game.sudoku import Sudoku
from gem_core.errors import InvalidArgument

from .test_games import within  # fails a block that runs past its bound instead of hanging

# -- Sokoban: never a room that is solved before the first move ------------------------------------


@pytest.mark.parametrize(("boxes", "reverse_steps"), [(1, 1), (2, 2), (2, 3)])
def test_sokoban_never_deals_a_solved_room(boxes, reverse_steps):
    """With a short walk back every one of the 100 redraws missed the displacement target and the last draw
    was kept even with every box on its goal: the first move then ended the episode success=True with return
    0.0, though a solved room is documented to return exactly 1.0 (reverse_steps=1: 182 of 200 seeds)."""
    env = Sokoban(height=5, width=5, boxes=boxes, inner_walls=0, reverse_steps=reverse_steps, max_turns=30)
    with within(20):
        for seed in range(40):
            env.reset(seed=seed)
            assert env.boxes != set(env.goals), f"seed {seed} dealt a solved room:\n{env.render()}"


def test_sokoban_refuses_reverse_steps_too_small_to_move_each_box():
    """Each box leaves its goal only by a pull, one per step: fewer steps than boxes can never scramble them all."""
    with pytest.raises(InvalidArgument, match=r"reverse_steps.*at least 3"):
        Sokoban(height=5, width=5, boxes=3, inner_walls=0, reverse_steps=2, max_turns=30)
    Sokoban(height=5, width=5, boxes=3, inner_walls=0, reverse_steps=3, max_turns=30)


def test_sokoban_short_walk_rooms_are_won_by_their_first_push_for_the_full_return():
    """The room a solved draw is replaced by is one push from solved: pushing the box back wins 1.0."""
    env = Sokoban(height=5, width=5, boxes=1, inner_walls=0, reverse_steps=1, max_turns=30)
    for seed in range(20):
        env.reset(seed=seed)
        (box,) = env.boxes
        (goal,) = env.goals
        direction = next(name for name, (dr, dc) in MOVES.items() if (box[0] + dr, box[1] + dc) == goal)
        if env.player != (2 * box[0] - goal[0], 2 * box[1] - goal[1]):
            continue  # a room the walk scrambled itself
        _, reward, terminated, _, info = env.step(f"\\boxed{{{direction}}}")
        assert terminated and info["success"] and reward == 1.0


def test_sokoban_gives_up_naming_the_room_when_no_box_can_ever_leave_its_goal():
    """A 2x2 room has no three squares in a line, so no pull: the solved room used to be dealt; now the reset
    gives up, quickly, naming the room's settings."""
    env = Sokoban(height=2, width=2, boxes=1, inner_walls=0, reverse_steps=1, max_turns=30)
    with within(20), pytest.raises(InvalidArgument, match="height=2 x width=2"):
        env.reset(seed=0)


# -- Sudoku: your own digits can be erased ----------------------------------------------------------


def test_sudoku_two_swapped_digits_can_be_erased_and_the_puzzle_still_won():
    """Two of the player's digits written swapped in one row could never be fixed: 0 was refused, and the
    right digit in either cell was refused because the other cell held it (Sudoku-v0-easy seed 3 was
    unwinnable after two legal moves). \\boxed{R C 0} now erases a cell the player wrote."""
    env = gem_core.make("game:Sudoku-v0-easy", max_turns=30)
    obs, _ = env.reset(seed=3)
    assert "0" in obs and "erase" in obs
    game = env.unwrapped
    solution = game.solution
    x, y = (2, 0), (2, 2)
    assert not game.given[x] and not game.given[y] and solution[x] != solution[y]
    for (r, c), digit in ((x, solution[y]), (y, solution[x])):
        _, _, _, _, info = env.step(f"\\boxed{{{r + 1} {c + 1} {digit}}}")
        assert not info.get("format_error")
    _, reward, _, _, info = env.step(f"\\boxed{{{x[0] + 1} {x[1] + 1} 0}}")
    assert not info.get("format_error") and reward == 0.0 and game.grid[x] == 0
    total, terminated, info = 0.0, False, {}
    rest = [(int(r), int(c)) for r, c in zip(*np.nonzero(game.grid != solution), strict=True) if (r, c) != y]
    for r, c in [y, *rest]:  # y first: x's digit is free once y holds its own
        _, reward, terminated, _, info = env.step(f"\\boxed{{{r + 1} {c + 1} {solution[r, c]}}}")
        assert not info.get("format_error"), info
        total += reward
    assert terminated and info.get("success") and total == pytest.approx(1.0)


def test_sudoku_erasing_a_given_or_an_empty_cell_follows_the_rules():
    """Erasing is for the player's own digits: a given stays an invalid move; an empty cell stays empty."""
    env = gem_core.make("game:Sudoku-v0-easy")
    env.reset(seed=3)
    game = env.unwrapped
    r, c = (int(v) for v in np.argwhere(game.given)[0])
    obs, reward, _, _, info = env.step(f"\\boxed{{{r + 1} {c + 1} 0}}")
    assert info.get("format_error") and reward == env.format_penalty and game.grid[r, c] == game.solution[r, c]
    assert "erase" in obs
    r, c = (int(v) for v in np.argwhere(~game.given)[0])
    _, reward, _, _, info = env.step(f"\\boxed{{{r + 1} {c + 1} 0}}")
    assert not info.get("format_error") and reward == 0.0 and game.grid[r, c] == 0


def test_sudoku_rewriting_an_erased_cell_earns_its_credit_once():
    """Erasing and rewriting the right digit must not pay the cell twice (a solved grid returns 1.0)."""
    env = gem_core.make("game:Sudoku-v0-easy")
    env.reset(seed=3)
    game = env.unwrapped
    r, c = (int(v) for v in np.argwhere(~game.given)[0])
    d = game.solution[r, c]
    rewards = [env.step(f"\\boxed{{{r + 1} {c + 1} {m}}}")[1] for m in (d, 0, d)]
    assert rewards[0] > 0 and rewards[1:] == [0.0, 0.0]


# -- Sudoku: blanks it cannot deal are said, never silent ------------------------------------------


@pytest.mark.parametrize(("box", "blanks"), [(2, 15), (3, 75)])
def test_sudoku_says_how_many_blanks_it_dealt_when_the_seed_cannot_deal_all(box, blanks, caplog):
    """blanks=15 on 4x4 dealt 12 and blanks=75 on 9x9 dealt 56, without a word. Refusing the seed would end a training
    run at whichever rare seed falls short, so the count dealt is in the reset info (each cell then earns 1/count, so a
    solved grid still returns 1.0) and a warning names the setting."""
    env = Sudoku(box_rows=box, box_cols=box, blanks=blanks, max_turns=100)
    with within(20), caplog.at_level("WARNING", logger="gem.envs.sudoku"):
        _, info = env.reset(seed=0)
    dealt = int((~env.given).sum())
    assert dealt < blanks and info["blanks"] == dealt
    assert any(f"blanks={blanks}" in r.getMessage() and f"dealt {dealt}" in r.getMessage() for r in caplog.records), caplog.text
    rewards = [env.step(f"\\boxed{{{r + 1} {c + 1} {env.solution[r, c]}}}")[1] for r, c in np.argwhere(~env.given)[:dealt]]
    assert sum(rewards) == pytest.approx(1.0)


@pytest.mark.parametrize("env_id", ["game:Sudoku-v0-easy", "game:Sudoku-v0", "game:Sudoku-v0-hard"])
def test_sudoku_shipped_variants_deal_all_their_blanks(env_id):
    env = gem_core.make(env_id)
    for seed in range(10):
        _, info = env.reset(seed=seed)
        assert int((~env.unwrapped.given).sum()) == env.unwrapped.blanks == info["blanks"]


# -- Moves read ASCII digits only -------------------------------------------------------------------

ARABIC_INDIC, DEVANAGARI, FULL_WIDTH = "\u0660", "\u0966", "\uff10"


def _spell(number: int, zero: str) -> str:
    return "".join(chr(ord(zero) + int(ch)) for ch in str(number))


def _move(env_id: str, game, zero: str) -> str:
    if env_id == "game:Sudoku-v0":
        r, c = (int(v) for v in np.argwhere(~game.given)[0])
        numbers = [r + 1, c + 1, int(game.solution[r, c])]
    elif env_id == "game:Minesweeper-v0":
        numbers = ["reveal", 4, 4]
    elif env_id == "game:WordSearch-v0":
        numbers = [1, 1, 1, 5]
    else:
        entry = game.entries[0]
        numbers = [entry.number, ("across:" if entry.name.endswith("across") else "down:"), entry.word]
    spelt = " ".join(_spell(n, zero) if isinstance(n, int) else n for n in numbers)
    return f"\\boxed{{{spelt}}}"


@pytest.mark.parametrize("zero", [ARABIC_INDIC, DEVANAGARI, FULL_WIDTH], ids=["arabic-indic", "devanagari", "full-width"])
@pytest.mark.parametrize("env_id", ["game:Sudoku-v0", "game:Minesweeper-v0", "game:WordSearch-v0", "game:Crosswords-v0"])
def test_a_move_number_in_another_script_is_an_invalid_move(env_id, zero):
    """The move patterns used \\d, which matches any script's digits, and int() read them: \\boxed{١ ١ ٥}
    scored in Sudoku. The suite's rule is plain ASCII digits; the same move in ASCII is still accepted."""
    env = gem_core.make(env_id)
    env.reset(seed=0)
    _, reward, _, _, info = env.step(_move(env_id, env.unwrapped, zero))
    assert info.get("format_error") and reward == env.format_penalty
    ascii_env = gem_core.make(env_id)
    ascii_env.reset(seed=0)
    _, _, _, _, info = ascii_env.step(_move(env_id, ascii_env.unwrapped, "0"))
    assert not info.get("format_error"), info
