"""Under ``import gem``, GEM's word games draw GEM's secrets from the same word list.

GEM reads NLTK's ``words`` corpus, downloaded at run time; here the caller's ``words=`` stands in for it.
Expected values come from GEM 0.1.0 (``gem-llm``) with that corpus replaced by :data:`WORDS`;
``tests/gem_upstream`` plays whole episodes side by side with it.
"""

from __future__ import annotations

import pytest

import gem
from gem.envs.game_env import words as word_source
from gem_core.errors import GemError

WORDS = ["cat", "dog", "sun", "Bob", "x-y", "apple", "bread", "chair", "Paris", "balance", "captain", "diamond", "kitchen"]


def test_wordle_draws_gems_secret_and_pays_half_for_greens_half_for_the_win() -> None:
    env = gem.make("game:Wordle-v0-easy", words=WORDS)
    observation, info = env.reset(seed=3)
    assert env.secret_word == "CAT" and "within 15 turns" in observation and info == {"suffix": "Enter your guess."}
    observation, reward, terminated, truncated, _ = env.step("\\boxed{cat}")
    assert (observation, reward, terminated, truncated) == ("Congratulations! You guessed the secret word CAT in 1 turns.", 1.0, True, False)


def test_wordle_marks_are_gems_printed_list_and_a_wrong_length_scores_zero() -> None:
    env = gem.make("game:Wordle-v0-easy", words=WORDS)
    env.reset(seed=3)  # CAT
    assert env.step("\\boxed{sun}")[:3] == ("At turn 1, you guessed SUN\nFeedback:\nSUN\n['X', 'X', 'X']", 0.0, False)
    assert env.step("\\boxed{bread}")[1:3] == (0.0, False)
    observation, reward, _, _, _ = env.step("\\boxed{act}")
    assert observation.endswith("['Y', 'Y', 'G']") and reward == pytest.approx(0.5 / 3)


def test_hangman_draws_gems_secret_and_shows_the_grid_in_the_suffix() -> None:
    env = gem.make("game:Hangman-v0-hard", words=WORDS)
    observation, info = env.reset(seed=3)
    assert env.secret_word == "CAPTAIN"
    grid = "C00 C01 C02 C03 C04 C05 C06\n  _   _   _   _   _   _   _ "
    assert grid not in observation and info["suffix"] == f"Here is the current state of the Hangman grid:\n{grid}\n\nEnter your guess."
    _, reward, terminated, _, _ = env.step("\\boxed{a}")
    assert (reward, terminated) == (pytest.approx(1 / 7), False)  # GEM: 0.5 * 2 of 7 letters


def test_word_search_builds_gems_grid_from_the_whole_list_and_counts_a_word_named_from_its_end_again() -> None:
    env = gem.make("game:WordSearch-v0-easy", words=WORDS)
    _, info = env.reset(seed=3)
    # GEM samples from the unfiltered list: proper nouns too, upper-cased
    assert env.placed_words == {"BALANCE": (1, 5, "down"), "PARIS": (4, 4, "across"), "APPLE": (2, 5, "across"),
                                "BOB": (0, 0, "down"), "SUN": (4, 8, "down")}
    assert "R04  N   M   X   Z   P   A   R   I   S   S  " in info["suffix"]
    assert env.step("\\boxed{4 4 4 8}")[1:3] == (0.2, False)
    assert env.step("\\boxed{4 8 4 4}")[1:3] == (0.2, False)
    assert env.step("\\boxed{4 4 4 8}")[1:3] == (0.0, False)  # already tried


def test_nltk_corpus_is_the_source_when_on_disk(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(word_source, "_nltk_words", lambda kind: ["zzz", "yyy"] if kind == "en-basic" else None)
    assert word_source.load_words("en-basic") == ["zzz", "yyy"]
    assert word_source.load_words("en-basic", ["cat"]) == ["cat"]  # the caller's list wins
    assert "apple" in word_source.load_words("en")  # no corpus: gem_core's shipped words


def test_no_words_of_the_length_names_words_and_the_corpus_download() -> None:
    with pytest.raises(GemError, match=r"No 6-letter words.*words=.*nltk\.downloader words"):
        gem.make("game:Wordle-v0-easy", words=WORDS, word_length=6)


CLUES = [{"word": w, "hardcore": False, "clues": {"1": f"clue {w}", "2": "x"}} for w in ["apple", "lemon", "pear", "plum"]]


def test_crosswords_lays_out_gems_grid_and_pays_per_letter_cell() -> None:
    env = gem.make("game:Crosswords-v0-easy", clues=CLUES)
    _, info = env.reset(seed=3)
    assert env.placed_words == {"lemon": (1, 4, "down"), "apple": (0, 0, "down"), "pear": (1, 0, "across")}
    assert "R01  _   _   _   _   _   .   .   .  " in info["suffix"]
    assert info["suffix"].endswith("1. clue lemon (down): 5 letters\n2. clue apple (down): 5 letters\n"
                                   "3. clue pear (across): 4 letters\nEnter your guess.")
    assert env.step("\\boxed{0 0 q}")[:3] == ("At turn 1, you tried to place Q at (0, 0), but it is incorrect.", 0.0, False)
    _, reward, _, _, info = env.step("\\boxed{0 0 a}")
    assert reward == pytest.approx(1 / 13) and "R00  A   .  " in info["suffix"]  # 13 letter cells
