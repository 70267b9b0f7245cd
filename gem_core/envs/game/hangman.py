"""Hangman: find a hidden word by guessing letters before running out of lives.

Words come from the shipped Wordle list (:func:`gem_core.envs.game.wordle.load_words`). A move is one
letter, or the whole word. A letter in the word is revealed everywhere it occurs; a letter not in the
word, or a wrong whole-word guess, costs a life. Guessing a letter twice is a format error (the turn
counts, no life is lost).

Rewards (dense): each newly revealed position earns ``1 / len(word)``; the winning guess (the last
letter, or the whole word) earns whatever the episode has not yet been paid (``k / len(word)`` steps
summed in float fall short of 1.0 for 6-, 7-, 9-letter ... words). A win therefore always returns
exactly :attr:`Hangman.max_return` = 1.0; losing all lives ends the episode with whatever was revealed.

Variants: ``-easy`` 8 lives; ``-v0`` 6 lives; ``-hard`` 5 lives (every variant: 5-letter words, at
most 26 turns). No strategy wins every word: a family such as light/might/night/right/sight/tight
needs more misses than the lives allow; the most-frequent-letter strategy loses about 2% of the list
with 6 lives and about 8% with 5.
"""

from __future__ import annotations

from typing import Any

from gem_core.env import StepResult
from gem_core.envs.game.action_format import BOXED_HINT, extract_boxed
from gem_core.envs.game.turn_based import TurnBasedGame
from gem_core.envs.game.wordle import word_list
from gem_core.vector.calls import check_count

ALPHABET = "abcdefghijklmnopqrstuvwxyz"


class Hangman(TurnBasedGame):
    #: The rewards paid this episode, summed in step order (the win pays ``max_return`` minus this).
    _paid = 0.0

    def __init__(self, lives: int = 6, max_turns: int = 26, word_length: int = 5, words: tuple[str, ...] | None = None):
        self.words = word_list(words, check_count("word_length", word_length), any_length=True)
        self.lives, self.max_turns = check_count("lives", lives), check_count("max_turns", max_turns)
        self.word = ""  # drawn by reset()
        self.lives_left = lives
        self.guessed: list[str] = []
        self.revealed: list[bool] = []

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
        super().reset(seed=seed)
        self.word = self.words[int(self.np_random.integers(len(self.words)))]
        self.lives_left, self.guessed, self._paid = self.lives, [], 0.0
        self.revealed = [False] * len(self.word)
        obs = (
            f"Let's play Hangman. Find the hidden {len(self.word)}-letter English word. Each turn guess one letter "
            f"(or the whole word). A letter in the word is revealed everywhere it occurs; a wrong letter or wrong word "
            f"costs a life. You have {self.lives} lives and at most {self.max_turns} turns. "
            + BOXED_HINT % "e"
            + f"\n{self.render()}"
        )
        return obs, {"max_turns": self.max_turns}

    def step(self, action: str) -> StepResult:
        out_of_turns = self.take_turn()
        move = (extract_boxed(action) or "").lower()
        well_formed = move.isascii() and move.isalpha() and len(move) in (1, len(self.word))
        if not well_formed or move in self.guessed:
            problem = f"you already guessed '{move}'" if well_formed else "that is not a letter or a word of the right length"
            return self.invalid_action(
                f"Invalid guess: {problem}. Expected one new letter (or the whole {len(self.word)}-letter word) inside "
                f"\\boxed{{}}, e.g. \\boxed{{e}}. Turns left: {self.max_turns - self.turn}.\n{self.render()}",
                truncated=out_of_turns,
            )
        self.guessed.append(move)
        before = sum(self.revealed)
        if move == self.word:
            self.revealed = [True] * len(self.word)
            hit = True
        elif len(move) == 1 and move in self.word:
            self.revealed = [r or ch == move for r, ch in zip(self.revealed, self.word, strict=True)]
            hit = True
        else:
            hit = False
            self.lives_left -= 1
        reward = self.max_return - self._paid if all(self.revealed) else (sum(self.revealed) - before) / len(self.word)
        self._paid += reward
        feedback = f"'{move}' is {'in' if hit else 'not in'} the word." if len(move) == 1 else f"'{move}' is {'right' if hit else 'wrong'}."
        if all(self.revealed):
            return f"{feedback}\n{self.render()}\nSolved! The word was {self.word}.", reward, True, False, {"success": True}
        if self.lives_left == 0:
            return f"{feedback}\n{self.render()}\nOut of lives: the word was {self.word}.", reward, True, False, {"success": False}
        if out_of_turns:
            return f"{feedback}\n{self.render()}\nOut of turns: the word was {self.word}.", reward, False, True, {"success": False}
        return f"{feedback}\n{self.render()}", reward, False, False, {}

    def sample_random_action(self) -> str:
        unused = [ch for ch in ALPHABET if ch not in self.guessed] or list(ALPHABET)
        return f"\\boxed{{{unused[int(self.np_random.integers(len(unused)))]}}}"

    def render(self) -> str:
        if not self.word:
            return "(no game yet)"
        pattern = " ".join(ch if shown else "_" for ch, shown in zip(self.word, self.revealed, strict=True))
        return f"Word: {pattern}   Lives: {self.lives_left}   Guessed: {' '.join(self.guessed) or '-'}"
