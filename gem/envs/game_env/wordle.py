"""GEM's Wordle: find a secret word from green/yellow/grey marks within ``max_turns`` guesses.

Rewards (GEM's): each position first marked green earns ``0.5 / length``; solving adds 0.5, so a solved
game returns 1.0 in all. A guess of the wrong length or a repeated guess scores 0 and uses a turn.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from gem.envs.game_env.base import INVALID_ACTION_REWARD, SUCCESS_REWARD, GameEnv
from gem.envs.game_env.words import load_words, words_of_length

_GUESS = re.compile(r"\\boxed{([a-zA-Z]+(?:\s+[a-zA-Z]+)*)}")


class WordleEnv(GameEnv):
    """``word_length``/``max_turns`` None: each episode draws 3-5 letters and ``5 * length`` turns (GEM's
    ``-random``). ``words``: the list to draw from (see :mod:`gem.envs.game_env.words`)."""

    def __init__(self, word_length: int | None = 5, only_real_words: bool | None = True, max_turns: int | None = 20,
                 words: Sequence[str] | None = None, seed: int | None = None, **_: Any) -> None:
        super().__init__(seed)
        self.only_real_words = only_real_words
        # None anywhere: each episode draws the level (GEM's rule); otherwise reset() takes this one.
        self._level = None if word_length is None or max_turns is None else (word_length, max_turns)
        self.all_words = load_words("en-basic", words)
        self.reset()

    def _instructions(self) -> str:
        return (
            "You are playing Wordle.\n"
            f"You have to guess the secret {self.word_length}-letter word within {self.max_turns} turns.\n"
            "After you enter your guess, I will say mark your guess as follows:\n"
            "  - G (green): correct letter in the correct position\n"
            "  - Y (yellow): letter exists in the word but in the wrong position\n"
            "  - X (wrong): letter is not in the word\n"
            "After thinking, format your final answer inside \\boxed{...},"
            f" for example, {self.sample_random_action()}.\n"
            "As you play, the history of your guesses will be appended below. Use the information to complete the game before you run out of guesses.\n"
        )

    def get_task_suffix(self) -> str:
        return "Enter your guess."

    def reset(self, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
        super().reset(seed, options)
        if self._level is None:
            self.word_length = self.rng.randint(3, 5)
            self.max_turns = self.word_length * 5
        else:
            self.word_length, self.max_turns = self._level
        self.available_words = words_of_length(self.all_words, self.word_length)
        self.secret_word = self.rng.choice(self.available_words).upper()
        self.previous_guesses: set[str] = set()
        self.milestones = [0] * len(self.secret_word)
        self.turn_count = 0
        return self._instructions(), {"suffix": self.get_task_suffix()}

    def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        self.turn_count += 1
        found = list(_GUESS.finditer(action))
        guess = found[-1].group(1).upper().replace(" ", "") if found else ""
        info = {"suffix": self.get_task_suffix()}
        if not guess:
            return self.format_error(f"At turn {self.turn_count}, you did not provide a valid guess.")
        if len(guess) != self.word_length:
            observation = (f"At turn {self.turn_count}, you guessed {guess} which has {len(guess)} letters but the secret word "
                           f"has {self.word_length} letters.")
            reward = INVALID_ACTION_REWARD
        elif guess in self.previous_guesses:
            observation, reward = f"At turn {self.turn_count}, you guessed {guess}, which has been already guessed before.", INVALID_ACTION_REWARD
        else:
            self.previous_guesses.add(guess)
            marks = self._marks(guess)
            reward = self._new_greens_reward(marks)
            # GEM prints the marks as a Python list: a model trained on GEM saw exactly this text
            observation = f"At turn {self.turn_count}, you guessed {guess}\nFeedback:\n{guess}\n{marks}"
            if marks.count("G") == self.word_length:
                won = f"Congratulations! You guessed the secret word {self.secret_word} in {self.turn_count} turns."
                return won, reward + SUCCESS_REWARD * 0.5, True, False, info
        if self.turn_count >= self.max_turns:
            return "You have reached the maximum number of turns.", reward, True, True, info
        return observation, reward, False, False, info

    def _new_greens_reward(self, marks: list[str]) -> float:
        """``0.5 / length`` for each position marked green for the first time this episode."""
        reward = 0.0
        for i, mark in enumerate(marks):
            if mark == "G" and not self.milestones[i]:
                reward += 1 / len(self.milestones) * 0.5
                self.milestones[i] = 1
        return reward

    def _marks(self, guess: str) -> list[str]:
        """G/Y/X per letter; a letter repeated in the guess is yellow only as often as the secret has it spare."""
        spare: list[str | None] = list(self.secret_word)
        marks: list[str] = [""] * self.word_length
        for i, letter in enumerate(guess):
            if letter == spare[i]:
                marks[i], spare[i] = "G", None
        for i, letter in enumerate(guess):
            if marks[i]:
                continue
            if letter in spare:
                marks[i] = "Y"
                spare[spare.index(letter)] = None
            else:
                marks[i] = "X"
        return marks

    def sample_random_action(self) -> str:
        return f"\\boxed{{{self.rng.choice(self.available_words).upper()}}}"
