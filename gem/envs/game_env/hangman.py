"""GEM's Hangman: find a secret word one letter (or a whole-word guess) at a time within ``max_turns``.

Rewards (GEM's): a letter in the word earns ``0.5 * revealed / length``; guessing the whole word earns
``0.5 * still-hidden / length + 0.5``, so a won game returns 1.0 in all. A miss scores 0, as does a
repeated letter or a whole-word guess of the wrong length (both still use a turn).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from gem.envs.game_env.base import INTERNAL_STEP_REWARD, INVALID_ACTION_REWARD, SUCCESS_REWARD, GameEnv
from gem.envs.game_env.words import load_words, words_of_length

_GUESS = re.compile(r"\\boxed{([a-zA-Z]+)}", re.IGNORECASE)
_LEVELS = [(3, 10), (5, 15), (7, 20)]  # GEM's -random draws one (word length, turns) pair per episode


class HangmanEnv(GameEnv):
    """``hardcore``: draw from NLTK's full ``en`` list instead of ``en-basic``. ``words``: the list to
    draw from (see :mod:`gem.envs.game_env.words`)."""

    def __init__(self, word_length: int | None = 5, hardcore: bool | None = False, max_turns: int | None = 20,
                 words: Sequence[str] | None = None, seed: int | None = None, **_: Any) -> None:
        super().__init__(seed)
        self.hardcore = hardcore
        # None anywhere: each episode draws the level (GEM's rule); otherwise reset() takes this one.
        self._level = None if word_length is None or max_turns is None else (word_length, max_turns)
        self.all_words = load_words("en" if hardcore else "en-basic", words)
        self.reset()

    def _instructions(self) -> str:
        # GEM's text names the word example "letter" format and vice versa; kept, as GEM's models saw it
        return (
            "You are playing Hangman.\n"
            f"The objective of the game is to guess the {self.word_length}-letter word by providing one letter guesses or the entire word.\n"
            "The cells that need to be populated with letters are represented by '_'.\n\n"
            f"There are two ways you can answer. You can provide one letter guesses in the format of {self.sample_random_word()}, "
            f"or you can guess the entire word in the format of {self.sample_random_letter()}.\n"
            "If the given letter is in the word, it will be revealed in the grid.\n"
            "If the given word is correct, you win.\n"
            "As you play, the history of your choices will be appended below. Use the information to figure out the word and win.\n"
            "Some rules:\n"
            "1. You can only guess one letter/word at a time.\n"
            f"2. You have to win within {self.max_turns} turns.\n\n"
        )

    def get_task_suffix(self) -> str:
        return f"Here is the current state of the Hangman grid:\n{self._render_board()}\n\nEnter your guess."

    def reset(self, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
        super().reset(seed, options)
        self.word_length, self.max_turns = self._level or self.rng.choice(_LEVELS)
        self.available_words = words_of_length(self.all_words, self.word_length)
        self.secret_word = self.rng.choice(self.available_words).upper()
        self.board = ["_"] * len(self.secret_word)
        self.guessed_letters: set[str] = set()
        self.turn_count = 0
        return self._instructions(), {"suffix": self.get_task_suffix()}

    def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        self.turn_count += 1
        found = list(_GUESS.finditer(action))
        guess = found[-1].group(1).upper() if found else ""
        if not guess:
            return self.format_error("You did not provide a valid guess.")
        if len(guess) > 1:
            if guess == self.secret_word:
                hidden = self.board.count("_") / len(self.board)
                won = f"Congratulations! You guessed the word '{self.secret_word}' correctly!"
                return won, hidden * 0.5 + SUCCESS_REWARD * 0.5, True, False, {"suffix": self.get_task_suffix()}
            if len(guess) != len(self.secret_word):
                observation = (f"At turn {self.turn_count}, You guessed '{guess}' which is of length {len(guess)}, "
                               f"but the secret word is of length {len(self.secret_word)}.")
                reward = INVALID_ACTION_REWARD
            else:
                observation, reward = f"At turn {self.turn_count}, You guessed '{guess}' which is incorrect.", INTERNAL_STEP_REWARD
        elif guess in self.guessed_letters:
            observation, reward = f"At turn {self.turn_count}, you guessed '{guess}', which has been already guessed before.", INVALID_ACTION_REWARD
        else:
            self.guessed_letters.add(guess)
            if guess in self.secret_word:
                revealed = self._reveal(guess)
                observation = f"At turn {self.turn_count}, you successfully guessed a letter '{guess}' that is in the secret word."
                reward = revealed / len(self.secret_word) * 0.5
            else:
                observation = f"At turn {self.turn_count}, you guessed a letter '{guess}' that is not in the secret word."
                reward = INTERNAL_STEP_REWARD
        info = {"suffix": self.get_task_suffix()}
        if self.turn_count >= self.max_turns:
            return "You have reached the maximum number of turns.", reward, True, True, info
        return observation, reward, False, False, info

    def _reveal(self, letter: str) -> int:
        """Show ``letter`` wherever the secret has it; how many cells that opened."""
        cells = [i for i, char in enumerate(self.secret_word) if char == letter]
        for i in cells:
            self.board[i] = letter
        return len(cells)

    def _render_board(self) -> str:
        header = " ".join(f"C{i:02}" for i in range(len(self.board)))
        return header + "\n" + "".join(f"  {cell} " for cell in self.board)

    def sample_random_word(self) -> str:
        return f"\\boxed{{{self.rng.choice(self.available_words).upper()}}}"

    def sample_random_letter(self) -> str:
        return f"\\boxed{{{self.rng.choice('abcdefghijklmnopqrstuvwxyz').upper()}}}"

    def sample_random_action(self) -> str:
        return self.rng.choice([self.sample_random_word, self.sample_random_letter])()
