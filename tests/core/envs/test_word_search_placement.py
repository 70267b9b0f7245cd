"""WordSearch places a word where the plain scan over every direction and cell would (its faster scan reads
the grid as lists and skips lines that leave it), so a seed deals the board it always dealt."""

from __future__ import annotations

import copy

import numpy as np
import pytest

from gem_core.envs.game.word_search import WordSearch


def place_by_plain_scan(env: WordSearch, word: str, grid: np.ndarray) -> bool:
    """The reference: every direction, row and column in order, each line checked cell by cell."""
    options = []
    for dr, dc in env.directions:
        for r in range(env.size):
            for c in range(env.size):
                cells = [(r + dr * k, c + dc * k) for k in range(len(word))]
                if all(0 <= x < env.size and 0 <= y < env.size and grid[x, y] in ("", ch) for (x, y), ch in zip(cells, word, strict=True)):
                    options.append(cells)
    if not options:
        return False
    for (x, y), ch in zip(options[int(env.np_random.integers(len(options)))], word, strict=True):
        grid[x, y] = ch
    return True


@pytest.mark.parametrize("size, directions", [(5, 2), (6, 8), (8, 3), (10, 8)])
def test_a_word_lands_where_the_plain_scan_puts_it(size, directions):
    env = WordSearch(size=size, words=1, directions=directions)
    env.reset(seed=0)
    rng = np.random.default_rng(size * 10 + directions)
    for trial in range(60):
        grid = np.full((size, size), "", dtype="<U1")
        filled = rng.random((size, size)) < rng.choice([0.0, 0.2, 0.5, 0.9])
        grid[filled] = rng.choice(list("abcde"), size=int(filled.sum()))
        word = "".join(rng.choice(list("abcde"), size=5))
        ours, reference = copy.deepcopy(env), copy.deepcopy(env)
        grid_ours, grid_reference = grid.copy(), grid.copy()
        assert ours._place(word, grid_ours) == place_by_plain_scan(reference, word, grid_reference), trial
        assert (grid_ours == grid_reference).all(), trial
        assert ours.np_random.integers(2**31) == reference.np_random.integers(2**31), trial  # the same draws taken
