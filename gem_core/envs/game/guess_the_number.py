"""Guess a hidden integer; after each guess the env says "higher" or "lower".

Rewards: 1.0 for the right guess (the episode ends); 0.0 for a wrong but valid guess; the format
penalty for anything that is not one integer inside ``\\boxed{}`` (the turn still counts). The most
an episode can return is 1.0. A binary search wins within ``ceil(log2(max - min + 1))`` turns.
"""

from __future__ import annotations

import numbers
from typing import Any

from gem_core.env import StepResult
from gem_core.envs.game.action_format import BOXED_HINT, extract_boxed, read_number
from gem_core.envs.game.turn_based import TurnBasedGame
from gem_core.errors import InvalidArgument
from gem_core.vector.calls import check_count

#: The widest range: the target is drawn as a 64-bit integer.
NUMBER_BOUND = 10**18


class GuessTheNumber(TurnBasedGame):
    def __init__(self, min_number: int = 1, max_number: int = 20, max_turns: int = 8):
        """The target is drawn from ``min_number`` to ``max_number``, both included.

        Raises:
            InvalidArgument: if a bound is not a whole number within +-:data:`NUMBER_BOUND`, ``min_number`` is not
                below ``max_number``, or ``max_turns`` is not a whole number from 1.
        """
        for name, value in (("min_number", min_number), ("max_number", max_number)):
            if isinstance(value, bool) or not isinstance(value, numbers.Integral) or abs(value) > NUMBER_BOUND:
                raise InvalidArgument(f"{name}={value!r:.80} must be a whole number between -{NUMBER_BOUND} and {NUMBER_BOUND}.")
        if min_number >= max_number:
            raise InvalidArgument(f"min_number ({min_number}) must be below max_number ({max_number}).")
        self.min_number, self.max_number, self.max_turns = int(min_number), int(max_number), check_count("max_turns", max_turns)
        self.target = 0  # drawn by reset(); step() before it is refused
        self.guesses: list[int] = []

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
        super().reset(seed=seed)
        self.target = int(self.np_random.integers(self.min_number, self.max_number + 1))
        self.guesses = []
        obs = (
            f"I am thinking of an integer between {self.min_number} and {self.max_number} (inclusive). "
            f"Guess it in at most {self.max_turns} turns; after each guess I say whether the number is higher or lower. "
            + BOXED_HINT % ((self.min_number + self.max_number) // 2)
        )
        return obs, {"max_turns": self.max_turns}

    def step(self, action: str) -> StepResult:
        out_of_turns = self.take_turn()
        guess = read_number(extract_boxed(action), signed=True)
        if guess is None:
            return self.invalid_action(
                f"Invalid move: expected one integer inside \\boxed{{}}, e.g. \\boxed{{{self.min_number}}}. "
                f"Turns left: {self.max_turns - self.turn}.",
                truncated=out_of_turns,
            )
        self.guesses.append(guess)
        if guess == self.target:
            return f"Correct! The number was {self.target}.", 1.0, True, False, {"success": True}
        if guess < self.min_number or guess > self.max_number:
            hint = f"{guess} is outside the range {self.min_number}-{self.max_number}."
        else:
            hint = f"The number is {'higher' if self.target > guess else 'lower'} than {guess}."
        if out_of_turns:
            return f"{hint} Out of turns: the number was {self.target}.", 0.0, False, True, {"success": False}
        # The hint comes last, right before the agent's next move.
        return f"Turns left: {self.max_turns - self.turn}. {hint}", 0.0, False, False, {}

    def sample_random_action(self) -> str:
        return f"\\boxed{{{int(self.np_random.integers(self.min_number, self.max_number + 1))}}}"

    def render(self) -> str:
        return f"GuessTheNumber [{self.min_number}, {self.max_number}] guesses={self.guesses} turn={self.turn}/{self.max_turns}"
