"""Wordle: find a hidden five-letter word; each guess is scored letter by letter.

Feedback per letter: ``G`` right letter in the right place, ``Y`` in the word elsewhere, ``X`` not in
the word (repeated letters are scored as in the original game: a letter is marked ``Y`` only as many
times as it remains unmatched in the target). Guesses need not be in the word list (a small list
cannot hold every English word), but must be ``word_length`` letters.

Rewards (dense): each position that turns green for the first time earns ``1 / word_length``, and the
winning guess earns whatever the episode has not yet been paid (``1.0`` minus the earlier rewards, not a
float ``k / word_length`` that leaves a 6-letter win at 0.9999999999999999); so solving the word always
brings the return to exactly 1.0, and partial progress is credited on the turn that made it. A
malformed guess earns the format penalty and costs the turn.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from functools import cache
from importlib import resources
from typing import Any

from gem_core.env import StepResult
from gem_core.envs.game.action_format import BOXED_HINT, extract_boxed
from gem_core.envs.game.turn_based import TurnBasedGame
from gem_core.errors import InvalidArgument, InvalidArgumentType
from gem_core.vector.calls import check_count

_WORD = re.compile(r"[a-z]+")


@cache
def load_words(word_length: int = 5) -> tuple[str, ...]:
    """The shipped word list (read once per process)."""
    text = resources.files("gem_core.envs.game").joinpath("data/wordle_words.txt").read_text(encoding="utf-8")
    return tuple(sorted({w.lower() for w in text.split() if len(w) == word_length and w.isalpha()}))


def word_list(words: Iterable[str] | None, word_length: int, *, any_length: bool = False) -> tuple[str, ...]:
    """The words a game draws from: ``words`` in lower case, in the order given, or the shipped
    ``word_length``-letter words when it is None. Guesses are read in lower case, so a capitalised word
    could never be guessed; an empty list is refused rather than read as "the shipped list".

    Raises:
        InvalidArgumentType: if ``words`` is a single str or not a list of str.
        InvalidArgument: if ``words`` is empty or holds a word that is not ASCII letters (of
            ``word_length`` letters unless ``any_length``), or the shipped list has no such words.
    """
    if words is None:
        shipped = load_words(word_length)
        if not shipped:
            raise InvalidArgument(f"No {word_length}-letter words in the word list; use word_length=5 or pass words=.")
        return shipped
    if isinstance(words, (str, bytes)) or not isinstance(words, Iterable):
        raise InvalidArgumentType(f"words={words!r:.80} must be a list of words, e.g. words=['crane', 'slate'].")
    chosen = tuple(words)
    if not chosen:
        raise InvalidArgument("words=[] holds no word: pass at least one, or leave words out for the shipped list.")
    for word in chosen:
        if not isinstance(word, str):
            raise InvalidArgumentType(f"words holds {word!r:.80}, not a str.")
        if not (word.isascii() and _WORD.fullmatch(word.lower()) and (any_length or len(word) == word_length)):
            size = "one or more" if any_length else str(word_length)
            raise InvalidArgument(f"words holds {word!r:.80}: each word must be {size} ASCII letters a-z.")
    return tuple(word.lower() for word in chosen)


def score_guess(guess: str, target: str) -> str:
    """Per-letter feedback ``G``/``Y``/``X`` for ``guess`` against ``target``."""
    feedback = ["X"] * len(guess)
    unmatched: dict[str, int] = {}
    for i, (g, t) in enumerate(zip(guess, target, strict=True)):
        if g == t:
            feedback[i] = "G"
        else:
            unmatched[t] = unmatched.get(t, 0) + 1
    for i, g in enumerate(guess):
        if feedback[i] != "G" and unmatched.get(g, 0) > 0:
            feedback[i] = "Y"
            unmatched[g] -= 1
    return "".join(feedback)


class Wordle(TurnBasedGame):
    #: The rewards paid this episode, summed in step order (the win pays ``max_return`` minus this).
    _paid = 0.0

    def __init__(self, word_length: int = 5, max_turns: int = 6, words: tuple[str, ...] | None = None):
        self.words = word_list(words, check_count("word_length", word_length))
        self.word_length, self.max_turns = word_length, check_count("max_turns", max_turns)
        self.target = ""  # drawn by reset()
        self.history: list[tuple[str, str]] = []
        self.greens: set[int] = set()
        # The example move the prompt shows: the same every episode (so it tells nothing of the answer) and no word of
        # the list (so it is never the answer): crane where the list lacks it, as before, else one repeated letter.
        candidates = (["crane"] if word_length == 5 else []) + [letter * word_length for letter in "xyzq"]
        self.example_guess = next(guess for guess in candidates if guess not in self.words)

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
        super().reset(seed=seed)
        self.target = self.words[int(self.np_random.integers(len(self.words)))]
        self.history, self.greens, self._paid = [], set(), 0.0
        obs = (
            f"Let's play Wordle. Find the hidden {self.word_length}-letter English word in at most {self.max_turns} guesses. "
            "After each guess you get one mark per letter: G = right letter, right place; Y = in the word, wrong place; "
            "X = not in the word. " + BOXED_HINT % self.example_guess
        )
        return obs, {"max_turns": self.max_turns}

    def step(self, action: str) -> StepResult:
        out_of_turns = self.take_turn()
        move = extract_boxed(action)
        guess = move.lower() if move is not None else ""
        if len(guess) != self.word_length or not guess.isascii() or not guess.isalpha():
            return self.invalid_action(
                f"Invalid guess: expected one {self.word_length}-letter word inside \\boxed{{}}, e.g. \\boxed{{{self.example_guess}}}. "
                f"Guesses left: {self.max_turns - self.turn}.",
                truncated=out_of_turns,
            )
        feedback = score_guess(guess, self.target)
        self.history.append((guess, feedback))
        new_greens = {i for i, f in enumerate(feedback) if f == "G"} - self.greens
        self.greens |= new_greens
        # The win pays the rest of max_return: k / n steps summed in float fall short of 1.0 for n = 6, 7, 9, ...
        reward = self.max_return - self._paid if guess == self.target else len(new_greens) / self.word_length
        self._paid += reward
        board = "\n".join(f"{' '.join(g.upper())}   {' '.join(f)}" for g, f in self.history)
        if guess == self.target:
            return f"{board}\nSolved! The word was {self.target}.", reward, True, False, {"success": True}
        if out_of_turns:
            return f"{board}\nOut of guesses: the word was {self.target}.", reward, False, True, {"success": False}
        return f"{board}\nGuesses left: {self.max_turns - self.turn}.", reward, False, False, {}

    def sample_random_action(self) -> str:
        return f"\\boxed{{{self.words[int(self.np_random.integers(len(self.words)))]}}}"

    def render(self) -> str:
        return "\n".join(f"{g} {f}" for g, f in self.history) or "(no guesses yet)"
