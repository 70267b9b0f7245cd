"""Mastermind: crack a hidden code of digits; each guess is answered with black and white pegs.

The code has ``code_length`` positions, each a digit ``1..num_colors`` (repeats allowed). After a
guess the env says how many digits are right and in the right place (black pegs) and how many more
are in the code but elsewhere (white pegs), as in the board game.

Rewards (dense): the best black-peg count so far is the progress signal; each turn earns the rise of
that best count divided by ``code_length``; the winning guess earns whatever the episode has not yet
been paid (``k / code_length`` steps summed in float fall short of 1.0 for 6, 7, 9, ... positions), so a
win always returns exactly :attr:`Mastermind.max_return` = 1.0. A malformed guess earns the format
penalty and costs the turn.

Variants (registered in :mod:`gem_core.envs.game`): ``-easy`` 3 positions x 4 colours, 8 turns;
``-v0`` 4 x 6, 10 turns (Knuth's bound is 5); ``-hard`` 5 x 8, 12 turns.
"""

from __future__ import annotations

import functools
from operator import eq
from typing import Any

from gem_core.env import StepResult
from gem_core.envs.game.action_format import BOXED_HINT, extract_boxed
from gem_core.envs.game.turn_based import TurnBasedGame
from gem_core.vector.calls import check_count


def score_code(guess: tuple[int, ...], code: tuple[int, ...]) -> tuple[int, int]:
    """``(black, white)`` pegs for ``guess`` against ``code``."""
    colours = set(code)
    black = sum(map(eq, guess, code))  # (map over C functions: this runs on every step)
    common = sum(map(min, map(guess.count, colours), map(code.count, colours)))  # multiset overlap
    return black, common - black


@functools.cache
def _rules(code_length: int, num_colors: int, max_turns: int) -> str:
    """The first observation (the same for every episode of a configuration)."""
    example = " ".join(str(1 + i % num_colors) for i in range(code_length))
    return (
        f"Let's play Mastermind. I hide a code of {code_length} digits, each from 1 to {num_colors} "
        f"(digits may repeat). Crack it in at most {max_turns} guesses. After each guess I say how many "
        "digits are right and in the right place (black) and how many more are in the code but in another "
        "place (white). " + BOXED_HINT % example
    )


#: The longest code: every guess and every line of the history shows all its digits.
MAX_CODE_LENGTH = 100


class Mastermind(TurnBasedGame):
    #: The rewards paid this episode, summed in step order (the win pays ``max_return`` minus this).
    _paid = 0.0

    def __init__(self, code_length: int = 4, num_colors: int = 6, max_turns: int = 10):
        """A code of ``code_length`` digits, each one of ``num_colors`` colours.

        Raises:
            InvalidArgument: if ``num_colors`` is not a whole number from 1 to 9 (one digit per colour),
                ``code_length`` not one from 1 to :data:`MAX_CODE_LENGTH`, or ``max_turns`` not one from 1.
        """
        check_count("num_colors", num_colors, most=9)  # one digit per colour
        check_count("code_length", code_length, most=MAX_CODE_LENGTH)
        check_count("max_turns", max_turns)
        self.code_length, self.num_colors, self.max_turns = code_length, num_colors, max_turns
        self.code: tuple[int, ...] = ()  # drawn by reset()
        self.best_black = 0
        self.history: list[tuple[tuple[int, ...], int, int]] = []
        self._lines: list[str] = []  # the rendered history, one line per guess, grown as guesses come
        self._colours = "".join(str(d) for d in range(1, num_colors + 1))

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
        super().reset(seed=seed)
        self.code = tuple(self.np_random.integers(1, self.num_colors + 1, size=self.code_length).tolist())
        self.best_black, self.history, self._lines, self._paid = 0, [], [], 0.0
        return _rules(self.code_length, self.num_colors, self.max_turns), {"max_turns": self.max_turns}

    def _parse(self, move: str | None) -> str | None:
        """The guess's digits as a string, or None when it is no guess."""
        if move is None:
            return None
        digits = move.replace(" ", "").replace(",", "")
        if len(digits) != self.code_length or digits.strip(self._colours):  # a character that is no colour
            return None
        return digits

    def step(self, action: str) -> StepResult:
        out_of_turns = self.take_turn()
        digits = self._parse(extract_boxed(action))
        if digits is None:
            return self.invalid_action(
                f"Invalid guess: expected {self.code_length} digits from 1 to {self.num_colors} inside \\boxed{{}}, "
                f"e.g. \\boxed{{{' '.join(['1'] * self.code_length)}}}. Guesses left: {self.max_turns - self.turn}.",
                truncated=out_of_turns,
            )
        guess = tuple(map(int, digits))
        black, white = score_code(guess, self.code)
        self.history.append((guess, black, white))
        self._lines.append(f"{' '.join(digits)}   black={black} white={white}")
        won = black == self.code_length
        reward = self.max_return - self._paid if won else max(0, black - self.best_black) / self.code_length
        self._paid += reward
        self.best_black = max(self.best_black, black)
        board = self.render()
        if won:
            return f"{board}\nCracked! The code was {' '.join(map(str, self.code))}.", reward, True, False, {"success": True}
        if out_of_turns:
            return f"{board}\nOut of guesses: the code was {' '.join(map(str, self.code))}.", reward, False, True, {"success": False}
        return f"{board}\nGuesses left: {self.max_turns - self.turn}.", reward, False, False, {}

    def sample_random_action(self) -> str:
        n, colours = self.num_colors, self._colours
        digits = [colours[min(int(x * n), n - 1)] for x in self.np_random.random(self.code_length).tolist()]  # one draw call
        return f"\\boxed{{{' '.join(digits)}}}"

    def render(self) -> str:
        return "\n".join(self._lines) or "(no guesses yet)"
