"""Word search: find the listed words hidden in a grid of letters.

Words come from the shipped Wordle list and are placed from the env's RNG along the variant's
directions (crossing only where letters agree); the other squares get random letters. A move marks a
word by its first and last letter, ``\\boxed{ROW1 COL1 ROW2 COL2}`` (from 1). The letters on that
straight line are read, so any occurrence of a listed word counts.

Rewards (dense): each newly found word earns ``1 / words``; so finding them all always returns exactly
:attr:`WordSearch.max_return` = 1.0. A line that spells no listed word gets 0; a malformed move, a
line that is not straight (across, down or diagonal) or off the grid, and a word already found earn
the format penalty.

Variants: ``-easy`` 6x6 with 3 words, left-to-right and top-to-bottom only, 6 turns; ``-v0`` 8x8 with
5 words, plus the down-right diagonal, 10 turns; ``-hard`` 10x10 with 7 words, all eight directions
(backwards too), 12 turns.
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np

from gem_core.env import StepResult
from gem_core.envs.game.action_format import BOXED_HINT, extract_boxed
from gem_core.envs.game.turn_based import TurnBasedGame
from gem_core.envs.game.wordle import load_words
from gem_core.errors import InvalidArgument
from gem_core.vector.calls import check_count

#: The largest grid side: past it a reset's search for free lines grows with its fourth power (0.2 s at 20x20
#: with the most words, 2 s at 30x30).
MAX_SIZE = 20
#: The share of the squares the words' letters may fill: past it a random placement seldom fits them all (an 8x8
#: grid took hundreds of draws for 12 words, never found 13); within it a few draws do.
MAX_FILL = 0.8
#: Fresh draws of words and places a reset makes before it gives up on the settings.
PLACE_ATTEMPTS = 100
_MOVE = re.compile(r"^([0-9]{1,6})[\s,]+([0-9]{1,6})[\s,]+([0-9]{1,6})[\s,]+([0-9]{1,6})$")
ALL_DIRECTIONS = ((0, 1), (1, 0), (1, 1), (-1, 1), (0, -1), (-1, 0), (-1, -1), (1, -1))


class WordSearch(TurnBasedGame):
    def __init__(self, size: int = 8, words: int = 5, directions: int = 3, max_turns: int = 10):
        """``directions`` is how many of :data:`ALL_DIRECTIONS` are used: 2 (right, down), 3 (+ down-right
        diagonal), 4 (+ up-right diagonal) ... 8 (every direction, backwards too).

        Raises:
            InvalidArgument: if a setting is not a whole number in range: ``directions`` 2 to 8, ``size`` 5 (words
                have 5 letters) to :data:`MAX_SIZE`, ``words`` from 1 until their letters fill :data:`MAX_FILL` of
                the grid (or the word list runs out).
        """
        if not 2 <= check_count("directions", directions) <= 8:
            raise InvalidArgument(f"directions={directions} must be between 2 and 8.")
        if not 5 <= check_count("size", size) <= MAX_SIZE:
            raise InvalidArgument(f"size={size} must be between 5 (words have 5 letters) and {MAX_SIZE} (a larger grid is slow to fill).")
        self.vocabulary = load_words(5)
        most = min(int(size * size * MAX_FILL) // 5, len(self.vocabulary))
        if check_count("words", words) > most:
            raise InvalidArgument(
                f"words={words} must be at most {most} on the {size}x{size} grid: more words than fill {MAX_FILL:.0%} of "
                "its squares seldom all fit, so a reset could not place them."
            )
        self.size, self.num_words, self.max_turns = size, words, check_count("max_turns", max_turns)
        self.directions = ALL_DIRECTIONS[:directions]
        self.grid = np.full((size, size), "", dtype="<U1")
        self.words: list[str] = []
        self.found: set[str] = set()

    def _place(self, word: str, grid: np.ndarray) -> bool:
        # Every line the word fits on, in direction, row, column order, then one drawn. A line is straight, so
        # it stays on the grid when both its ends do; cells are read from lists (a numpy item read costs ~10x).
        # A reset ~4x faster (hostile-action fuzz over the four levels: 16 s of resets -> 4 s); the same lines in the
        # same order, so a seed deals the same board (tests/core/envs/test_word_search_placement.py).
        size, last = self.size, len(word) - 1
        rows = grid.tolist()
        options = []
        for dr, dc in self.directions:
            for r in range(size):
                if not 0 <= r + dr * last < size:
                    continue
                for c in range(size):
                    if not 0 <= c + dc * last < size:
                        continue
                    for k, ch in enumerate(word):
                        if rows[r + dr * k][c + dc * k] not in ("", ch):
                            break
                    else:
                        options.append([(r + dr * k, c + dc * k) for k in range(last + 1)])
        if not options:
            return False
        for (x, y), ch in zip(options[int(self.np_random.integers(len(options)))], word, strict=True):
            grid[x, y] = ch
        return True

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
        """A new grid: words drawn and placed, redrawn while they do not all fit.

        Raises:
            InvalidArgument: if none of :data:`PLACE_ATTEMPTS` draws fits the words (the message names the settings).
        """
        super().reset(seed=seed)
        for _ in range(PLACE_ATTEMPTS):
            grid = np.full((self.size, self.size), "", dtype="<U1")
            picks = self.np_random.choice(len(self.vocabulary), size=self.num_words, replace=False)
            words = [self.vocabulary[int(i)] for i in picks]
            if all(self._place(w, grid) for w in words):
                break
        else:
            raise InvalidArgument(
                f"No grid held words={self.num_words} on size={self.size} with directions={len(self.directions)} in "
                f"{PLACE_ATTEMPTS} draws; use fewer words or a larger size."
            )
        empty = grid == ""
        grid[empty] = [chr(97 + int(i)) for i in self.np_random.integers(26, size=int(empty.sum()))]
        self.grid, self.words, self.found = grid, sorted(words), set()
        obs = (
            f"Let's play Word Search. Find these {self.num_words} words hidden in the {self.size}x{self.size} grid, "
            f"written in a straight line (across, down or diagonally{', also backwards' if len(self.directions) > 4 else ''}). "
            f"Mark a word by its first and last letter as \\boxed{{ROW1 COL1 ROW2 COL2}} (rows and columns from 1). You "
            f"have at most {self.max_turns} turns. " + BOXED_HINT % "1 1 1 5" + f"\n{self.render()}"
        )
        return obs, {"max_turns": self.max_turns}

    def _read_line(self, r1: int, c1: int, r2: int, c2: int) -> str | None:
        dr, dc = r2 - r1, c2 - c1
        steps = max(abs(dr), abs(dc))
        if steps == 0 or (dr and dc and abs(dr) != abs(dc)):
            return None
        if not all(0 <= v < self.size for v in (r1, c1, r2, c2)):
            return None
        dr, dc = dr // steps, dc // steps
        return "".join(str(self.grid[r1 + dr * k, c1 + dc * k]) for k in range(steps + 1))

    def step(self, action: str) -> StepResult:
        out_of_turns = self.take_turn()
        match = _MOVE.match(extract_boxed(action) or "")
        text = self._read_line(*(int(x) - 1 for x in match.groups())) if match else None
        problem = None
        if match is None:
            problem = "expected \\boxed{ROW1 COL1 ROW2 COL2}, e.g. \\boxed{1 1 1 5}"
        elif text is None:
            problem = f"the two squares must be on the {self.size}x{self.size} grid and on one straight line"
        elif text in self.found:
            problem = f"'{text}' is already found"
        if problem is not None:
            return self.invalid_move(problem, out_of_turns)
        reward = 0.0
        if text in self.words:
            self.found.add(text)
            reward = 1.0 / self.num_words
            feedback = f"Found '{text}'!"
        else:
            feedback = f"'{text}' is not on the list."
        return self.end_turn(reward, out_of_turns, won=len(self.found) == self.num_words, win_message="All words found!", feedback=feedback)

    def sample_random_action(self) -> str:
        while True:  # a straight line of 2 to 5 squares inside the grid
            r, c, length = (int(x) for x in self.np_random.integers((self.size, self.size, 4)))
            dr, dc = self.directions[int(self.np_random.integers(len(self.directions)))]
            r2, c2 = r + (length + 1) * dr, c + (length + 1) * dc
            if 0 <= r2 < self.size and 0 <= c2 < self.size:
                return f"\\boxed{{{r + 1} {c + 1} {r2 + 1} {c2 + 1}}}"

    def render(self) -> str:
        """The letter grid with row and column numbers, then the words still to find and those found."""
        header = "    " + " ".join(f"{c + 1:>2}" for c in range(self.size))
        rows = [f"{r + 1:>2}  " + " ".join(f"{ch.upper():>2}" for ch in row) for r, row in enumerate(self.grid)]
        todo = [w for w in self.words if w not in self.found]
        return "\n".join([header, *rows, f"Find: {' '.join(todo) or '-'}", f"Found: {' '.join(sorted(self.found)) or '-'}"])
