"""GEM's Mastermind: find a secret code of ``code_length`` digits from 1 to ``num_numbers`` from peg counts."""

from __future__ import annotations

import re
from typing import Any

from gem.envs.game_env.base import INVALID_ACTION_REWARD, GameEnv
from gem_core.errors import InvalidArgument
from gem_core.vector.calls import check_count

_GUESS = re.compile(r"\\boxed{(\d+(?:\s+\d+)*)}")


def score_guess(code: list[int], guess: list[int]) -> tuple[int, int]:
    """``(black, white)`` pegs: right digit in the right place, right digit in another place."""
    black = sum(c == g for c, g in zip(code, guess, strict=True))
    unmatched_code = [c for c, g in zip(code, guess, strict=True) if c != g]
    white = 0
    for digit in (g for c, g in zip(code, guess, strict=True) if c != g):
        if digit in unmatched_code:
            unmatched_code.remove(digit)
            white += 1
    return black, white


class MastermindEnv(GameEnv):
    """Each guess earns the new black pegs beyond the best so far, over ``code_length`` (so a win sums to 1).

    Raises:
        InvalidArgument: ``code_length``/``num_numbers`` is not a whole number from 1, or, without
            ``duplicate_numbers``, the code is longer than the digits it is drawn from.
    """

    def __init__(self, code_length: int | None = 4, num_numbers: int | None = 6, duplicate_numbers: bool | None = False,
                 max_turns: int | None = 20, seed: int | None = None, **_: Any) -> None:
        super().__init__(seed)
        if code_length is not None and num_numbers is not None:
            code_length, num_numbers = check_count("code_length", code_length), check_count("num_numbers", num_numbers)
            if not duplicate_numbers and code_length > num_numbers:
                raise InvalidArgument(
                    f"code_length={code_length} is longer than the num_numbers={num_numbers} digits a code without "
                    f"duplicates is drawn from: pass code_length=1 to {num_numbers}, more num_numbers, or duplicate_numbers=True."
                )
        # None anywhere: each episode draws the level (GEM's rule); otherwise reset() takes this one.
        self._level = None if code_length is None or num_numbers is None or max_turns is None else (code_length, num_numbers, max_turns)
        self.duplicate_numbers = duplicate_numbers
        self.reset()

    def _instructions(self) -> str:
        return (
            "You are playing Mastermind.\n"
            f"You have to guess the secret {self.code_length} digit code within {self.max_turns} turns.\n"
            f"The code consists of digits from 1 to {self.num_numbers} (inclusive). "
            f"Duplicate numbers are {'allowed' if self.duplicate_numbers else 'not allowed'}.\n"
            "After you enter your guess, I will say mark your guess with black and white pegs, where a black peg indicates a correct digit in the correct position, while a white peg indicates a correct digit in the wrong position.\n"
            "After thinking, format your final answer inside \\boxed{...},"
            f" for example, {self.sample_random_action()}.\n"
            "As you play, the history of your guesses will be appended below. Use the information to complete the game before you run out of guesses.\n"
            "Enter your first guess to start the game.\n"
        )

    def get_task_suffix(self) -> str:
        return "Enter your guess."

    def reset(self, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
        super().reset(seed, options)
        self.code_length, self.num_numbers, self.max_turns = self._level or self.rng.choice([(2, 4, 10), (4, 6, 20), (4, 8, 30)])
        digits = list(range(1, self.num_numbers + 1))
        draw = self.rng.choices if self.duplicate_numbers else self.rng.sample
        self.game_code = draw(digits, k=self.code_length)
        self.previous_guesses: set[tuple[int, ...]] = set()
        self.turn_count = 0
        self.milestone = 0
        return self._instructions(), {}  # GEM's first info carries no suffix for this game

    def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        self.turn_count += 1
        found = _GUESS.findall(action)
        if not found:
            return self.format_error(f"At turn {self.turn_count}, you did not provide a valid guess.")
        guess = [int(digit) for digit in found[-1].split()]
        info = {"suffix": self.get_task_suffix()}
        reward = INVALID_ACTION_REWARD
        if len(guess) != self.code_length:
            observation = (f"At turn {self.turn_count}, you guessed {guess} which has {len(guess)} entries "
                           f"but the code has length {self.code_length}.")
        elif any(not 1 <= digit <= self.num_numbers for digit in guess):
            observation = f"At turn {self.turn_count}, you guessed {guess}, which has numbers outside the range 1 to {self.num_numbers}."
        elif tuple(guess) in self.previous_guesses:
            observation = f"At turn {self.turn_count}, you guessed {guess}, which has been already guessed before."
        else:
            self.previous_guesses.add(tuple(guess))
            black, white = score_guess(self.game_code, guess)
            observation = (f"At turn {self.turn_count}, you guessed {guess}. "
                           f"This guess receives {black} black peg(s) and {white} white peg(s).")
            reward = max(black - self.milestone, 0) / self.code_length
            self.milestone = max(self.milestone, black)
            if black == self.code_length:
                return f"Congratulations! You guessed the correct code {self.game_code} in {self.turn_count} turns.", reward, True, False, info
        if self.turn_count >= self.max_turns:
            return "You have reached the maximum number of turns.", reward, True, True, info
        return observation, reward, False, False, info

    def sample_random_action(self) -> str:
        return "\\boxed{" + " ".join(map(str, self.rng.sample(range(1, self.num_numbers + 1), self.code_length))) + "}"
