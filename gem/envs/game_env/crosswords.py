"""GEM's Crosswords: fill a small crossword letter by letter from one clue per word.

Rewards (GEM's): each correct letter earns ``1 / letter cells``. A cell off the grid, a black cell or a
filled cell scores 0, as does a wrong letter; every one uses a turn. Cells are 0-based ``row col letter``.

GEM reads its clue file (``{"word", "hardcore", "clues": {"1": ...}}`` records) with pandas and keeps the
records of the level's ``hardcore`` flag. Here the records are the caller's ``clues=`` (GEM's record shape;
its file is not shipped), else ``gem_core``'s shipped clues (word and one clue, used for both levels).
The grid is laid out as GEM lays it, with the same draws from the same seed: the words placed longest
first, the first in the middle, each later one across a shared letter where it fits, else at the first
free place, else left out (its clue too).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from importlib import resources
from typing import Any

from gem.envs.game_env.base import INTERNAL_STEP_REWARD, INVALID_ACTION_REWARD, GameEnv
from gem.envs.game_env.word_search import Placement, crossings, fits, write
from gem_core.errors import InvalidArgument

_GUESS = re.compile(r"\\boxed\{(\d+)\s+(\d+)\s+([a-zA-Z])\}")


def shipped_clue_records() -> list[dict[str, Any]]:
    """``gem_core``'s crossword clues as GEM's records (not split by level: ``hardcore`` None)."""
    text = resources.files("gem_core.envs.game").joinpath("data/crossword_clues.tsv").read_text(encoding="utf-8")
    records = []
    for line in text.splitlines():
        if line and not line.startswith("#"):
            word, clue = line.split("\t", 1)
            records.append({"word": word, "hardcore": None, "clues": {"1": clue}})
    return records


class CrosswordsEnv(GameEnv):
    """``hardcore`` picks the records of that level; None (GEM's ``-random``, which GEM 0.1.0 itself cannot
    build) draws it per episode, with 3 words and 20 turns. ``clues``: the records to draw from."""

    def __init__(self, hardcore: bool | None = False, max_turns: int | None = 100, num_words: int | None = 5,
                 clues: Sequence[Mapping[str, Any]] | None = None, seed: int | None = None, **_: Any) -> None:
        super().__init__(seed)
        # None anywhere: each episode draws the level (GEM's rule); otherwise reset() takes this one.
        self._level = None if hardcore is None or max_turns is None or num_words is None else (hardcore, max_turns, num_words)
        self._records = list(clues) if clues is not None else shipped_clue_records()
        if self._level is not None:
            self.word_data = self._level_records(self._level[0])
        self.reset()

    def _level_records(self, hardcore: bool) -> list[Mapping[str, Any]]:
        found = [r for r in self._records if r.get("hardcore") in (hardcore, None)]
        if not found:
            raise InvalidArgument(f"No crossword records with hardcore={hardcore}: pass clues=[{{'word': ..., "
                                  f"'hardcore': {hardcore}, 'clues': {{'1': ...}}}}, ...].")
        return found

    def _instructions(self) -> str:
        return (
            "You are playing Crosswords.\n"
            "Here is the current state of the Crosswords grid. Each row and column are numbered.\n"
            "The cells that need to be populated with letters are represented by '_', and those that do not need words are represented by '.'.\n\n"
            "You can only provide one response per turn. Hence, plan your approach and risk appetite.\n"
            "Only guesses in the format of \\boxed{row column letter} will be fetched from your response, e.g. \\boxed{0 0 d}, \\boxed{1 2 G}.\n"
            f"you have to finish the game in a maximum of {self.max_turns} turns.\n"
            "As you play, the history of your choices will be appended below. Use the information to complete the game."
        )

    def get_task_suffix(self) -> str:
        return (f"Current Board:\n{self._render_board()}\n"
                f"Here are the clues for the words you need to find:\n{self._clue_lines()}\nEnter your guess.")

    def reset(self, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
        super().reset(seed, options)
        if self._level is None:
            self.hardcore = self.rng.choice([False, True])
            self.num_words, self.max_turns = 3, 20
            self.word_data = self._level_records(self.hardcore)
        else:
            self.hardcore, self.max_turns, self.num_words = self._level
        self.solution, self.placed_words, self.clues = self._build_grid()
        self.board = [["." if cell == "." else "_" for cell in row] for row in self.solution]
        self.total_letter_cells = sum(cell != "." for row in self.board for cell in row)
        self.turn_count = 0
        return self._instructions(), {"suffix": self.get_task_suffix()}

    def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        self.turn_count += 1
        found = list(_GUESS.finditer(action))
        if not found:
            return self.format_error(f"At turn {self.turn_count}, you did not provide a valid guess in \\boxed{{row column letter}} format.")
        row, col, letter = int(found[-1].group(1)), int(found[-1].group(2)), found[-1].group(3).upper()
        tried = f"At turn {self.turn_count}, you tried to place {letter} at ({row}, {col})"
        if row >= len(self.board) or col >= len(self.board[0]):
            observation, reward = f"{tried}, which is out of bounds.", INVALID_ACTION_REWARD
        elif self.board[row][col] == ".":
            observation, reward = f"{tried}, which is a black dot and cannot be filled.", INVALID_ACTION_REWARD
        elif self.board[row][col] != "_":
            observation, reward = f"{tried}, but the cell is already filled.", INVALID_ACTION_REWARD
        elif self.solution[row][col].upper() != letter:
            observation, reward = f"{tried}, but it is incorrect.", INTERNAL_STEP_REWARD
        else:
            self.board[row][col] = letter
            observation, reward = f"At turn {self.turn_count}, you placed {letter} at ({row}, {col}) correctly.", 1 / self.total_letter_cells
        info = {"suffix": self.get_task_suffix()}
        if all("_" not in line for line in self.board):
            return "Congratulations! You completed the Crosswords puzzle!", reward, True, False, info
        if self.turn_count >= self.max_turns:
            return "You have reached the maximum number of turns.", reward, True, True, info
        return observation, reward, False, False, info

    # --- the grid, drawn in GEM's order: sample, directions, one shuffle per later word

    def _build_grid(self) -> tuple[list[list[str]], dict[str, Placement], dict[str, str]]:
        sampled = sorted(self.rng.sample(self.word_data, min(self.num_words, len(self.word_data))),
                         key=lambda r: len(r["word"]), reverse=True)
        chosen = [r["word"] for r in sampled]
        directions = {r["word"]: self.rng.choice(["across", "down"]) for r in sampled}
        clues = {r["word"]: next(iter(r["clues"].values())) for r in sampled}
        size = round(max(len(w) for w in chosen) * 1.5)
        grid = [["."] * size for _ in range(size)]
        placed: dict[str, Placement] = {}
        for word in chosen:
            direction = directions[word]
            if not placed:
                middle = (size // 2, (size - len(word)) // 2) if direction == "across" else ((size - len(word)) // 2, size // 2)
                candidates = [p for p in [(*middle, direction)] if fits(grid, word, p)]
            else:
                # unlike Word Search, GEM keeps only the crossings that fit before it shuffles them
                candidates = [p for p in crossings(word, size, placed, direction) if fits(grid, word, p)]
                self.rng.shuffle(candidates)
            if not candidates:
                candidates = [(r, c, direction) for r in range(size) for c in range(size) if fits(grid, word, (r, c, direction))][:1]
            if candidates:
                write(grid, word, candidates[0])
                placed[word] = candidates[0]
        return grid, placed, clues

    def _clue_lines(self) -> str:
        # numbered among all drawn words: a word left off the grid leaves a gap in the numbers, as in GEM
        return "\n".join(f"{i + 1}. {clue} ({self.placed_words[word][2]}): {len(word)} letters"
                         for i, (word, clue) in enumerate(self.clues.items()) if word in self.placed_words)

    def _render_board(self) -> str:
        lines = ["   " + " ".join(f"C{i:02}" for i in range(len(self.board)))]
        lines += [f"R{i:02} " + "".join(f" {cell}  " for cell in row) for i, row in enumerate(self.board)]
        return "\n".join(lines)

    def sample_random_action(self) -> str:
        empty = [(r, c) for r, row in enumerate(self.board) for c, cell in enumerate(row) if cell == "_"]
        if not empty:
            return "\\boxed{[0 0 A]}"
        row, col = self.rng.choice(empty)
        return f"\\boxed{{[{row} {col} {self.rng.choice('ABCDEFGHIJKLMNOPQRSTUVWXYZ')}]}}"
