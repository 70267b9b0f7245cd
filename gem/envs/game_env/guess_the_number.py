"""GEM's Guess The Number: find a secret integer from higher/lower hints within ``max_turns`` guesses."""

from __future__ import annotations

import math
import re
from typing import Any

from gem.envs.game_env.base import FORMAT_ERROR_REWARD, INTERNAL_STEP_REWARD, INVALID_ACTION_REWARD, SUCCESS_REWARD, GameEnv
from gem_core.errors import InvalidArgument
from gem_core.vector.calls import check_count

_GUESS = re.compile(r"\\boxed{(\d+)}")


class GuessTheNumberEnv(GameEnv):
    """``min_number``/``max_number`` None: each episode draws its range and turn limit (GEM's ``-random``).

    Running out of turns scores how close the last guess was: ``1 - distance / (max - min)``.

    Raises:
        InvalidArgument: ``min_number``/``max_number`` is not a whole number from 0, or the range is empty or one
            number (GEM could not draw the secret, or would divide by zero scoring the last guess).
    """

    def __init__(self, min_number: int | None = 1, max_number: int | None = 20, max_turns: int | None = 20,
                 seed: int | None = None, **_: Any) -> None:
        super().__init__(seed)
        if min_number is not None and max_number is not None:
            min_number, max_number = check_count("min_number", min_number, least=0), check_count("max_number", max_number, least=0)
            if min_number >= max_number:
                raise InvalidArgument(f"min_number={min_number} must be below max_number={max_number}: pass a range of at "
                                      "least two numbers, e.g. min_number=1, max_number=20.")
        # None anywhere: each episode draws the range and turn limit (GEM's rule; GEM itself fails later on a
        # max_turns=None beside a fixed range, where this draws); otherwise reset() takes this level.
        self._level = None if min_number is None or max_number is None or max_turns is None else (min_number, max_number, max_turns)
        self.reset()

    def _instructions(self) -> str:
        return (
            "You are playing Guess The Number.\n"
            f"You have to guess the number between {self.min_number} and {self.max_number} (inclusive) within {self.max_turns} turns.\n"
            "As you enter your guess, the game will provide you with hints such as the target number is 'higher' or 'lower'.\n"
            "You may provide your response in any manner. Only the number that is wrapped inside \\boxed{} will be considered as your guess,"
            f" for example, {self.sample_random_action()}.\n"
            "As you play, the history of your guesses will be appended below. Use the information to complete the game before you run out of guesses.\n"
            "Enter your first guess to start the game.\n"
        )

    def get_task_suffix(self) -> str:
        return "Enter your next guess."

    def reset(self, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
        super().reset(seed, options)
        if self._level is None:
            self.min_number = self.rng.randint(1, 10)
            self.max_number = self.rng.randint(self.min_number + 5, self.min_number + 50)
            self.max_turns = math.ceil(math.sqrt(self.max_number - self.min_number)) + 1
        else:
            self.min_number, self.max_number, self.max_turns = self._level
        self.game_number = self.rng.randint(self.min_number, self.max_number)
        self.previous_guesses: set[int] = set()
        self.turn_count = 0
        return self._instructions(), {"suffix": self.get_task_suffix()}

    def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        self.turn_count += 1
        found = _GUESS.findall(action)
        guess = int(found[-1]) if found else 0
        info = {"suffix": self.get_task_suffix()}
        if not guess:  # GEM reads a boxed 0 as no guess too
            return f"At turn {self.turn_count}, you did not provide a valid guess.", FORMAT_ERROR_REWARD, True, self.turn_count == self.max_turns, info
        out_of_range = not self.min_number <= guess <= self.max_number
        if out_of_range:
            observation, reward = f"At turn {self.turn_count}, you guessed {guess}, which is outside the range specified.", INVALID_ACTION_REWARD
        elif guess in self.previous_guesses:
            observation, reward = f"At turn {self.turn_count}, you guessed {guess}, which has been already guessed before.", INVALID_ACTION_REWARD
        elif guess == self.game_number:
            return f"Congratulations! You guessed the correct number {self.game_number} in {self.turn_count} turns.", SUCCESS_REWARD, True, False, info
        else:
            self.previous_guesses.add(guess)
            hint = "lower" if guess > self.game_number else "higher"
            observation = f"At turn {self.turn_count}, you guessed {guess}, and the target number is {hint} than {guess}."
            reward = INTERNAL_STEP_REWARD
        if self.turn_count >= self.max_turns:
            if not out_of_range:
                reward = 1 - abs(guess - self.game_number) / (self.max_number - self.min_number)
            return "You have reached the maximum number of turns.", reward, True, True, info
        return observation, reward, False, False, info

    def sample_random_action(self) -> str:
        return "\\boxed{" + str(self.rng.randint(self.min_number, self.max_number)) + "}"
