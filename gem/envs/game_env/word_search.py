"""GEM's Word Search: find the words hidden across or down in a letter grid, by their end cells.

Rewards (GEM's): each word found earns ``1 / words placed``. An out-of-grid, repeated or diagonal guess
scores 0, as does a miss; every one uses a turn. Coordinates are 0-based ``row col row col``; a word may
be named from either end.

The grid is built as GEM builds it (the same draws from the same seed): the words are drawn from the
whole list (unfiltered, upper-cased), placed longest first, the first in the middle, each later one
across a letter it shares with a placed word where it fits, else at the first free place, else dropped.
"""

from __future__ import annotations

import re
import string
from collections.abc import Sequence
from typing import Any

from gem.envs.game_env.base import INTERNAL_STEP_REWARD, INVALID_ACTION_REWARD, GameEnv
from gem.envs.game_env.words import load_words

_GUESS = re.compile(r"\\boxed\{(\d+)\s+(\d+)\s+(\d+)\s+(\d+)\}")

Placement = tuple[int, int, str]  # row, column, "across" or "down"


class WordSearchEnv(GameEnv):
    """``hardcore``: draw from NLTK's full ``en`` list instead of ``en-basic``; None (GEM's ``-random``)
    draws it per episode, with 5 words and 20 turns. ``words``: the list to draw from (see
    :mod:`gem.envs.game_env.words`)."""

    def __init__(self, hardcore: bool | None = False, max_turns: int | None = 20, num_words: int | None = 5,
                 words: Sequence[str] | None = None, seed: int | None = None, **_: Any) -> None:
        super().__init__(seed)
        # None anywhere: each episode draws the level (GEM's rule); otherwise reset() takes this one.
        self._level = None if hardcore is None or max_turns is None or num_words is None else (hardcore, max_turns, num_words)
        self._words = words
        self._lists: dict[str, list[str]] = {}
        self.reset()

    def _word_list(self) -> list[str]:
        kind = "en" if self.hardcore else "en-basic"
        if kind not in self._lists:
            self._lists[kind] = load_words(kind, self._words)
        return self._lists[kind]

    def _instructions(self) -> str:
        return (
            f"You are participating in a Word Search challenge ({'Hardcore' if self.hardcore else 'Basic'}).\n"
            "The objective is to find and highlight hidden words on the grid below.\n"
            "The rows and columns are numbered for your reference.\n\n"
            "Words you have already found are marked in square brackets [ ].\n"
            "Each row and column is numbered for clarity.\n\n"
            "To locate a word, specify the row and column of its start and end letters.\n"
            "Note that words are either across (horizontal) or down (vertical).\n"
            "Use the format \\boxed{start_row start_col end_row end_col} for submission.\n"
            "For instance: \\boxed{1 1 1 5} to find a word from row 1, col 1 to row 1, col 5.\n\n"
            "Guidelines:\n"
            f"- you have a maximum of {self.max_turns} turns to find all the words.\n"
            "- Each guess must be unique; you cannot repeat the same guess.\n"
            "- The history of your attempts will be recorded below.\n"
            "- Make your guesses carefully and strategically!"
        )

    def get_task_suffix(self) -> str:
        return (f"Current Board:\n{self._render_board()}\n"
                f"Words Found: {len(self.correct_words)}/{len(self.placed_words)}\nEnter your guess.")

    def reset(self, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
        super().reset(seed, options)
        if self._level is None:
            self.hardcore = self.rng.choice([False, True])
            self.num_words, self.max_turns = 5, 20
        else:
            self.hardcore, self.max_turns, self.num_words = self._level
        self.game_board, self.placed_words = self._build_grid(self._word_list())
        self.highlighted_positions: set[tuple[int, int]] = set()
        self.correct_words: set[str] = set()
        self.attempts: list[tuple[int, int, int, int]] = []
        self.turn_count = 0
        return self._instructions(), {"suffix": self.get_task_suffix()}

    def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        self.turn_count += 1
        found = list(_GUESS.finditer(action))
        if not found:
            return self.format_error(f"At turn {self.turn_count}, you did not provide a valid guess in "
                                     "\\boxed{start_row start_col end_row end_col} format.")
        r0, c0, r1, c1 = (int(x) for x in found[-1].groups())
        guess = (r0, c0, r1, c1)
        where = f"({r0}, {c0}) to ({r1}, {c1})"
        size = len(self.game_board)
        word = self._word_at(guess)
        if not all(0 <= x < size for x in guess):
            observation, reward = f"At turn {self.turn_count}, your tried coordinates {where} are out of bounds.", INVALID_ACTION_REWARD
        elif guess in self.attempts:
            observation, reward = f"At turn {self.turn_count}, you have already tried the coordinates {where}.", INVALID_ACTION_REWARD
        elif r0 != r1 and c0 != c1:
            observation = (f"At turn {self.turn_count}, you tried {where}, which is not valid because words must be "
                           "either across (horizontal) or down (vertical).")
            reward = INVALID_ACTION_REWARD
        elif word is not None:
            self.correct_words.add(word)
            self._highlight(guess)
            observation = f"At turn {self.turn_count}, correct! You found the word '{word}' at coordinates {where}."
            reward = 1 / len(self.placed_words)  # naming a found word from its other end scores again, as in GEM
        else:
            observation = f"At turn {self.turn_count}, incorrect attempt. No word found at coordinates {where}."
            reward = INTERNAL_STEP_REWARD
        self.attempts.append(guess)
        info = {"suffix": self.get_task_suffix()}
        if len(self.correct_words) == len(self.placed_words):
            return "Congratulations! You completed the Word Search puzzle!", reward, True, False, info
        if self.turn_count >= self.max_turns:
            return "You have reached the maximum number of turns.", reward, True, True, info
        return observation, reward, False, False, info

    def _word_at(self, guess: tuple[int, int, int, int]) -> str | None:
        """The placed word whose end cells are the guess's, in either order."""
        start, end = guess[:2], guess[2:]
        for word, (row, col, direction) in self.placed_words.items():
            last = (row, col + len(word) - 1) if direction == "across" else (row + len(word) - 1, col)
            if (start, end) in (((row, col), last), (last, (row, col))):
                return word
        return None

    def _highlight(self, guess: tuple[int, int, int, int]) -> None:
        r0, c0, r1, c1 = guess
        if r0 == r1:
            self.highlighted_positions.update((r0, c) for c in range(min(c0, c1), max(c0, c1) + 1))
        else:
            self.highlighted_positions.update((r, c0) for r in range(min(r0, r1), max(r0, r1) + 1))

    # --- the grid, drawn in GEM's order: sample, directions, one shuffle per later word, filler letters

    def _build_grid(self, word_list: list[str]) -> tuple[list[list[str]], dict[str, Placement]]:
        chosen = sorted((w.upper() for w in self.rng.sample(word_list, min(self.num_words, len(word_list)))),
                        key=len, reverse=True)
        directions = {word: self.rng.choice(["across", "down"]) for word in chosen}
        size = round(max(len(w) for w in chosen) * 1.5)
        grid = [["."] * size for _ in range(size)]
        placed: dict[str, Placement] = {}
        for word in chosen:
            direction = directions[word]
            if not placed:
                middle = (size // 2, (size - len(word)) // 2) if direction == "across" else ((size - len(word)) // 2, size // 2)
                candidates = [(*middle, direction)]
            else:
                candidates = crossings(word, size, placed, direction)
                self.rng.shuffle(candidates)
            spot = [c for c in candidates if fits(grid, word, c)][:1]
            if not spot:  # GEM falls back to the first free place, scanning row by row
                spot = [(r, c, direction) for r in range(size) for c in range(size) if fits(grid, word, (r, c, direction))][:1]
            if spot:
                write(grid, word, spot[0])
                placed[word] = spot[0]
        for row in grid:
            for c, cell in enumerate(row):
                if cell == ".":
                    row[c] = self.rng.choice(string.ascii_uppercase)
        return grid, placed

    def _render_board(self) -> str:
        lines = ["   " + " ".join(f"C{i:02}" for i in range(len(self.game_board)))]
        for i, row in enumerate(self.game_board):
            lines.append(f"R{i:02} " + "".join(f"[{v}] " if (i, j) in self.highlighted_positions else f" {v}  " for j, v in enumerate(row)))
        return "\n".join(lines)

    def sample_random_action(self) -> str:
        size = len(self.game_board)
        return "\\boxed{" + " ".join(str(self.rng.randint(0, size - 1)) for _ in range(4)) + "}"


def crossings(word: str, size: int, placed: dict[str, Placement], direction: str) -> list[Placement]:
    """Places where ``word`` would cross a placed word at a shared letter (start cell inside the grid), in
    GEM's order (also Crosswords')."""
    found = []
    for other, (row, col, other_direction) in placed.items():
        for i, letter in enumerate(word):
            for j, other_letter in enumerate(other):
                if letter != other_letter or other_direction == direction:
                    continue
                start = (row - i, col + j) if other_direction == "across" else (row + j, col - i)
                if 0 <= start[0] < size and 0 <= start[1] < size:
                    found.append((*start, direction))
    return found


def fits(grid: list[list[str]], word: str, placement: Placement) -> bool:
    row, col, direction = placement
    cells = [(row, col + i) for i in range(len(word))] if direction == "across" else [(row + i, col) for i in range(len(word))]
    if cells[-1][0] >= len(grid) or cells[-1][1] >= len(grid[0]):
        return False
    return all(grid[r][c] in (".", letter) for (r, c), letter in zip(cells, word, strict=True))


def write(grid: list[list[str]], word: str, placement: Placement) -> None:
    row, col, direction = placement
    for i, letter in enumerate(word):
        if direction == "across":
            grid[row][col + i] = letter
        else:
            grid[row + i][col] = letter
