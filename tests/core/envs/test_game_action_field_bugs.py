"""Game defects found in the field: a final box holding braces was skipped for an earlier one, a non-UTF-8
WikiGame graph raised a raw UnicodeDecodeError, RandomDifficulty.max_turns read 0 before the first reset,
Wordle's example move was refused by Wordle itself, and a won episode returned 0.9999999999999999."""

from __future__ import annotations

from pathlib import Path

import pytest

import gem_core
from gem_core.envs.game.action_format import extract_boxed
from gem_core.envs.game.guess_the_number import GuessTheNumber
from gem_core.envs.game.hangman import Hangman
from gem_core.envs.game.mastermind import Mastermind
from gem_core.envs.game.random_difficulty import RandomDifficulty
from gem_core.envs.game.tower_of_hanoi import TowerOfHanoi
from gem_core.envs.game.wordle import Wordle
from gem_core.errors import InvalidArgument

from .test_games import within  # fails a block that runs past its bound instead of hanging

SIZES = range(3, 14)


# --- 1. the last box is the move, braces and all ---------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "move"),
    [
        ("My first idea was \\boxed{1}, but that is too low. Final answer: \\boxed{\\text{10}}", "10"),
        ("\\boxed{2} then \\boxed{\\textbf{A C}}", "A C"),
        ("\\boxed{2} then \\boxed{ \\mathrm{ crane } }", "crane"),
        ("\\boxed{2} then \\boxed{\\textbf{\\text{7}}}", "7"),
        ("\\boxed{x} \\boxed{{nested}}", "{nested}"),
        ("\\boxed{\\text{a} + \\text{b}}", "\\text{a} + \\text{b}"),  # not one whole-content wrapper
        ("think \\boxed{} then \\boxed{ 42 }", "42"),
        ("\\boxed{3 down: apple}", "3 down: apple"),
        ("\\boxed{5}}}", "5"),
        ("\\boxed{}", ""),
    ],
)
def test_the_last_box_is_read_with_balanced_braces(text, move):
    """Before the fix the box regex refused any brace inside, so ``\\boxed{\\text{10}}`` was skipped and the
    earlier, rejected ``\\boxed{1}`` was returned as the move."""
    assert extract_boxed(text) == move


@pytest.mark.parametrize("text", ["\\boxed{1} and then \\boxed{\\text{10}", "\\boxed{1} \\boxed{", "\\boxed{1} \\boxed{{2}"])
def test_an_unclosed_last_box_is_no_move_not_an_earlier_box(text):
    """Before the fix an unreadable final box fell back to the earlier ``\\boxed{1}``."""
    assert extract_boxed(text) is None


def test_a_final_box_with_braces_is_played_not_the_earlier_rejected_one():
    """Before the fix GuessTheNumber played 1 (the box the model had rejected) with no format error."""
    env = GuessTheNumber(1, 20, 8)
    env.reset(seed=0)
    env.step("My first idea was \\boxed{1}, but that is too low. Final answer: \\boxed{\\text{10}}")
    assert env.guesses == [10]


def test_many_openers_are_read_in_linear_time():
    """A hostile action of 10,000 openers (or openers with a box at the end) is answered at once."""
    with within(2.0):
        assert extract_boxed("\\boxed{" * 100_000) is None
        assert extract_boxed("\\boxed{" * 100_000 + "\\boxed{7}") == "7"
        assert extract_boxed("{" * 100_000 + "\\boxed{7}" + "}" * 100_000) == "7"
        assert extract_boxed("\\boxed{" + "\\text{" * 50_000 + "7" + "}" * 50_001) != "7"  # not unwrapped 50,000 times


# --- 2. a WikiGame graph that is not UTF-8 ---------------------------------------------------------------


def test_a_graph_file_that_is_not_utf8_is_an_invalid_argument(tmp_path: Path):
    """Before the fix ``make`` raised a raw UnicodeDecodeError that named neither graph_file nor the format."""
    path = tmp_path / "latin1.tsv"
    path.write_bytes("Café\tA café.\tTea\nTea\tA drink.\tCafé\n".encode("latin-1"))
    with pytest.raises(InvalidArgument, match="graph_file") as caught:
        gem_core.make("game:WikiGame-v0-easy", graph_file=str(path))
    assert "UTF-8" in str(caught.value) and "title<TAB>summary<TAB>links" in str(caught.value)


def test_a_graph_file_that_cannot_be_read_is_an_invalid_argument(tmp_path: Path, monkeypatch):
    """Before the fix an OSError while reading the graph escaped as it was."""
    path = tmp_path / "graph.tsv"
    path.write_text("A\tPage A.\tB\nB\tPage B.\tA\n", encoding="utf-8")

    def refuse(self, *args, **kwargs):
        raise PermissionError(13, "Permission denied", str(self))

    monkeypatch.setattr(Path, "read_text", refuse)
    with pytest.raises(InvalidArgument, match="graph_file"):
        gem_core.make("game:WikiGame-v0-easy", graph_file=str(path))


# --- 3. RandomDifficulty.max_turns before the first reset -------------------------------------------------


def test_random_difficulty_max_turns_before_reset_is_the_hardest_levels_default():
    """Before the fix a level that left max_turns to the game's default counted as 0, so max_turns read 0
    before the first reset and the game's own limit after it."""
    env = RandomDifficulty(
        "gem_core.envs.game.guess_the_number:GuessTheNumber", [dict(min_number=1, max_number=10), dict(min_number=1, max_number=100, max_turns=3)]
    )
    expected = max(game.max_turns for game in env._games.values())
    assert expected > 0 and env.max_turns == expected


# --- 4. Wordle's example move --------------------------------------------------------------------------------


@pytest.mark.parametrize("words", [["planet", "silver", "orange"], ["crane", "slate"], ["planet"], ["xxxxxx", "yyyyyy"]])
def test_wordle_example_move_is_a_valid_guess_and_never_the_answer(words):
    """Before the fix the prompt always said ``\\boxed{crane}``: a 6-letter game refused its own example with
    the format penalty, and a game whose answer was crane showed it in the prompt. The example is the same in every
    episode (one that changed with the answer would tell it) and is no word of the list."""
    env = Wordle(word_length=len(words[0]), words=words)
    targets, examples = set(), set()
    for seed in range(40):
        obs, _ = env.reset(seed=seed)
        targets.add(env.target)
        example = obs.rsplit("\\boxed{", 1)[1].split("}", 1)[0]
        examples.add(example)
        assert len(example) == env.word_length and example not in words
        invalid = env.step("no box")[0]
        assert f"\\boxed{{{example}}}" in invalid and f"\\boxed{{{env.target}}}" not in invalid
        assert not env.step(f"\\boxed{{{example}}}")[4].get("format_error")
    assert targets == set(words) and len(examples) == 1


# --- 5. a win returns exactly max_return ------------------------------------------------------------------


def _hanoi(n: int, src: str, dst: str, via: str) -> list[tuple[str, str]]:
    return [] if n == 0 else _hanoi(n - 1, src, via, dst) + [(src, dst)] + _hanoi(n - 1, via, dst, src)


def _play(env, moves) -> list[float]:
    rewards = []
    for move in moves:
        _, reward, terminated, truncated, info = env.step(move)
        rewards.append(reward)
        if terminated or truncated:
            break
    assert info.get("success") is True, info
    return rewards


def _sum(rewards: list[float]) -> float:
    total = 0.0
    for reward in rewards:
        total += reward
    return total


def _check(rewards: list[float], n: int) -> None:
    assert _sum(rewards) == 1.0
    assert [r for r in rewards[:-1] if r] == [1 / n] * (n - 1)  # every step before the win pays as before


@pytest.mark.parametrize("n", SIZES)
def test_tower_of_hanoi_win_returns_exactly_one(n):
    """Before the fix disks=6, 7, 9, ... returned 0.9999999999999999 (six 1/6 increments)."""
    env = TowerOfHanoi(disks=n, max_turns=2**n)
    env.reset(seed=0)
    rewards = _play(env, (f"\\boxed{{{s} {d}}}" for s, d in _hanoi(n, "A", "C", "B")))
    _check(rewards, n)


@pytest.mark.parametrize("n", SIZES)
def test_mastermind_win_returns_exactly_one(n):
    """Before the fix code_length=6, 7, 9, ... returned 0.9999999999999999."""
    env = Mastermind(code_length=n, num_colors=9, max_turns=60)
    env.reset(seed=1)
    code = env.code
    wrong = [1 if c != 1 else 2 for c in code]
    guesses = (list(code[: i + 1]) + wrong[i + 1 :] for i in range(n))
    _check(_play(env, ("\\boxed{" + " ".join(map(str, g)) + "}" for g in guesses)), n)


@pytest.mark.parametrize("n", SIZES)
def test_wordle_win_returns_exactly_one(n):
    """Before the fix 6-, 7-, 9-letter ... words returned 0.9999999999999999."""
    word = "abcdefghijklm"[:n]
    env = Wordle(word_length=n, words=[word], max_turns=n)
    env.reset(seed=0)
    guesses = (word[: i + 1] + "z" * (n - i - 1) for i in range(n))
    _check(_play(env, (f"\\boxed{{{g}}}" for g in guesses)), n)


@pytest.mark.parametrize("n", SIZES)
def test_hangman_win_returns_exactly_one(n):
    """Before the fix 6-, 7-, 9-letter ... words returned 0.9999999999999999, by letters or by the whole word."""
    word = "abcdefghijklm"[:n]
    env = Hangman(words=[word])
    env.reset(seed=0)
    _check(_play(env, (f"\\boxed{{{ch}}}" for ch in word)), n)
    env.reset(seed=0)
    rewards = _play(env, [*(f"\\boxed{{{ch}}}" for ch in word[: n // 2 + 1]), f"\\boxed{{{word}}}"])
    assert _sum(rewards) == 1.0
