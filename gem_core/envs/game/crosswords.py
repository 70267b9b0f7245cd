"""Crosswords: fill a small generated crossword from its clues.

Each puzzle draws words from the shipped clue list (``data/crossword_clues.tsv``, written for this
project) and lays them out from the env's RNG: the first word across, each next one crossing a letter
already on the grid, with no two parallel words touching side by side. Clues are numbered in reading
order like a printed crossword, and each says where its word starts and how long it is.

A move answers one clue: ``\\boxed{3 down: apple}`` (``3 down apple`` and ``3d apple`` also work). A
right answer writes the word into the grid; a wrong word of the right length gets 0 and "not right".
An unknown clue number, a word of the wrong length or a clue already solved earns the format penalty.

Rewards (dense): each solved clue earns ``1 / words``, so a finished grid always returns exactly
:attr:`Crosswords.max_return` = 1.0.

Variants: ``-easy`` 3 words, 6 turns; ``-v0`` 5 words, 10 turns; ``-hard`` 8 words, 12 turns.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any

import numpy as np

from gem_core.env import StepResult
from gem_core.envs.game.action_format import BOXED_HINT, extract_boxed
from gem_core.envs.game.turn_based import TurnBasedGame
from gem_core.errors import InvalidArgument
from gem_core.vector.calls import check_count

_MOVE = re.compile(r"^([0-9]{1,6})\s*-?\s*(across|down|a|d)\s*[:=\-]?\s*([a-z]+)$", re.IGNORECASE)
ACROSS, DOWN = (0, 1), (1, 0)


@cache
def load_clues() -> tuple[tuple[str, str], ...]:
    """``(word, clue)`` pairs from the shipped clue file (read once per process)."""
    text = resources.files("gem_core.envs.game").joinpath("data/crossword_clues.tsv").read_text(encoding="utf-8")
    pairs = (line.split("\t", 1) for line in text.splitlines() if line.strip() and not line.startswith("#"))
    return tuple((word.strip().lower(), clue.strip()) for word, clue in pairs)


@dataclass
class Entry:
    word: str
    clue: str
    row: int
    col: int
    direction: tuple[int, int]
    number: int = 0

    @property
    def name(self) -> str:
        return f"{self.number} {'across' if self.direction == ACROSS else 'down'}"

    def cells(self) -> list[tuple[int, int]]:
        dr, dc = self.direction
        return [(self.row + dr * k, self.col + dc * k) for k in range(len(self.word))]


def _fits(word: str, row: int, col: int, direction: tuple[int, int], letters: dict, directions: dict) -> bool:
    dr, dc = direction
    if (row - dr, col - dc) in letters or (row + dr * len(word), col + dc * len(word)) in letters:
        return False
    crossings = 0
    for k, ch in enumerate(word):
        cell = (row + dr * k, col + dc * k)
        if cell in letters:
            if letters[cell] != ch or direction in directions[cell]:
                return False
            crossings += 1
        elif (cell[0] + dc, cell[1] + dr) in letters or (cell[0] - dc, cell[1] - dr) in letters:
            return False  # would touch a parallel neighbour side by side
    return 0 < crossings < len(word)


#: The share of the clue list one puzzle may use: each word must cross those already laid, and past it a
#: layout seldom takes them all (with 140 of the 160 clues a few draws do, all 160 never fit).
MAX_SHARE = 0.75
#: Fresh layouts a reset draws before it gives up on the settings.
LAYOUT_ATTEMPTS = 50


def generate_layout(rng: np.random.Generator, count: int, clues: tuple[tuple[str, str], ...]) -> list[Entry]:
    """``count`` crossing entries, numbered, coordinates from (0, 0).

    Raises:
        InvalidArgument: if none of :data:`LAYOUT_ATTEMPTS` layouts crosses ``count`` of the clues' words.
    """
    for _ in range(LAYOUT_ATTEMPTS):
        entries: list[Entry] = []
        letters: dict[tuple[int, int], str] = {}
        directions: dict[tuple[int, int], set] = {}
        for i in rng.permutation(len(clues)):
            word, clue = clues[int(i)]
            if entries:
                options = sorted(
                    {
                        (r - direction[0] * k, c - direction[1] * k, direction)
                        for (r, c), ch in letters.items()
                        for k, w in enumerate(word)
                        if w == ch
                        for direction in (ACROSS, DOWN)
                        if _fits(word, r - direction[0] * k, c - direction[1] * k, direction, letters, directions)
                    }
                )
                if not options:
                    continue
                row, col, direction = options[int(rng.integers(len(options)))]
            else:
                row, col, direction = 0, 0, ACROSS
            entry = Entry(word, clue, row, col, direction)
            entries.append(entry)
            for cell, ch in zip(entry.cells(), word, strict=True):
                letters[cell] = ch
                directions.setdefault(cell, set()).add(direction)
            if len(entries) == count:
                break
        if len(entries) == count:
            break
    else:
        raise InvalidArgument(f"No crossword crossed words={count} of {len(clues)} clues in {LAYOUT_ATTEMPTS} layouts; use fewer words.")
    top, left = min(e.row for e in entries), min(e.col for e in entries)
    starts = sorted({(e.row - top, e.col - left) for e in entries})
    for e in entries:
        e.row, e.col = e.row - top, e.col - left
        e.number = starts.index((e.row, e.col)) + 1
    return sorted(entries, key=lambda e: (e.direction != ACROSS, e.number))


class Crosswords(TurnBasedGame):
    def __init__(self, words: int = 5, max_turns: int = 10):
        """Each puzzle lays out ``words`` words of the shipped clue list.

        Raises:
            InvalidArgument: if ``words`` or ``max_turns`` is not a whole number from 1, or ``words`` is past
                :data:`MAX_SHARE` of the clue list.
        """
        most = int(len(load_clues()) * MAX_SHARE)
        if check_count("words", words) > most:
            raise InvalidArgument(
                f"words={words} must be at most {most}: each word must cross those already laid, and a layout "
                f"seldom takes more than {MAX_SHARE:.0%} of the {len(load_clues())} clues."
            )
        self.num_words, self.max_turns = words, check_count("max_turns", max_turns)
        self.entries: list[Entry] = []
        self.solved: set[str] = set()

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
        super().reset(seed=seed)
        self.entries = generate_layout(self.np_random, self.num_words, load_clues())
        self.solved = set()
        obs = (
            f"Let's solve a crossword with {self.num_words} words. Answer one clue per turn as \\boxed{{NUMBER across: WORD}} "
            f"or \\boxed{{NUMBER down: WORD}}. Solved words are written into the grid (# is not part of the puzzle, _ is "
            f"an empty square; rows and columns count from 1). You have at most {self.max_turns} turns. "
            + BOXED_HINT % f"{self.entries[0].name}: answer"
            + f"\n{self.render()}"
        )
        return obs, {"max_turns": self.max_turns}

    def step(self, action: str) -> StepResult:
        out_of_turns = self.take_turn()
        match = _MOVE.match(extract_boxed(action) or "")
        entry, problem = None, None
        if match is None:
            problem = "expected \\boxed{NUMBER across: WORD} or \\boxed{NUMBER down: WORD}"
        else:
            name = f"{int(match[1])} {'across' if match[2].lower().startswith('a') else 'down'}"
            entry = next((e for e in self.entries if e.name == name), None)
            if entry is None:
                problem = f"there is no clue {name}"
            elif name in self.solved:
                problem = f"{name} is already solved"
            elif len(match[3]) != len(entry.word):
                problem = f"{name} has {len(entry.word)} letters, '{match[3]}' has {len(match[3])}"
        if problem is not None or entry is None or match is None:
            return self.invalid_move(problem or f"'{action}' is not a move", out_of_turns)
        reward = 0.0
        if match[3].lower() == entry.word:
            self.solved.add(entry.name)
            reward = 1.0 / self.num_words
            feedback = f"Right: {entry.name} is {entry.word}."
        else:
            feedback = f"'{match[3].lower()}' is not right for {entry.name}."
        return self.end_turn(reward, out_of_turns, won=len(self.solved) == self.num_words, feedback=feedback)

    def sample_random_action(self) -> str:
        open_entries = [e for e in self.entries if e.name not in self.solved] or self.entries
        entry = open_entries[int(self.np_random.integers(len(open_entries)))]
        word = "".join(chr(97 + int(i)) for i in self.np_random.integers(26, size=len(entry.word)))
        return f"\\boxed{{{entry.name}: {word}}}"

    def render(self) -> str:
        """The grid, then the clues (with start square and length) still to solve and those solved."""
        if not self.entries:
            return "(no puzzle yet)"
        cells = {cell: "_" for e in self.entries for cell in e.cells()}
        for e in self.entries:
            if e.name in self.solved:
                cells.update(zip(e.cells(), e.word.upper(), strict=True))
        rows, cols = 1 + max(r for r, _ in cells), 1 + max(c for _, c in cells)
        grid = ["".join(cells.get((r, c), "#") for c in range(cols)) for r in range(rows)]
        clues = [
            f"{e.name} (row {e.row + 1}, col {e.col + 1}, {len(e.word)} letters): {e.clue}"
            + (f" = {e.word.upper()}" if e.name in self.solved else "")
            for e in self.entries
        ]
        return "\n".join(grid + ["Clues:"] + clues)
