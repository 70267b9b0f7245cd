"""Sudoku's solution counter and grid filler give what the plain set-based search gave (they search on bit
masks and lists now), so a seed deals the puzzle it always dealt and a puzzle keeps one solution."""

from __future__ import annotations

import numpy as np
import pytest

from gem_core.envs.game.sudoku import count_solutions, random_full_grid


def plain_candidates(grid, r, c, box_rows, box_cols):
    size = grid.shape[0]
    br, bc = r - r % box_rows, c - c % box_cols
    used = set(grid[r].tolist()) | set(grid[:, c].tolist()) | set(grid[br : br + box_rows, bc : bc + box_cols].flat)
    return set(range(1, size + 1)) - used


def plain_count(grid, box_rows, box_cols, limit=2):
    empty = list(zip(*np.nonzero(grid == 0), strict=True))
    if not empty:
        return 1
    best, best_cands = None, None
    for r, c in empty:
        cands = plain_candidates(grid, r, c, box_rows, box_cols)
        if best_cands is None or len(cands) < len(best_cands):
            best, best_cands = (r, c), cands
            if len(cands) <= 1:
                break
    found = 0
    for d in sorted(best_cands):
        grid[best] = d
        found += plain_count(grid, box_rows, box_cols, limit - found)
        grid[best] = 0
        if found >= limit:
            break
    return found


def plain_full_grid(rng, box_rows, box_cols):
    size = box_rows * box_cols
    grid = np.zeros((size, size), dtype=int)

    def fill(i):
        if i == size * size:
            return True
        r, c = divmod(i, size)
        for d in rng.permutation(np.arange(1, size + 1)):
            if d in plain_candidates(grid, r, c, box_rows, box_cols):
                grid[r, c] = d
                if fill(i + 1):
                    return True
        grid[r, c] = 0
        return False

    fill(0)
    return grid


@pytest.mark.parametrize("box_rows, box_cols", [(2, 2), (2, 3), (3, 3)])
def test_a_full_grid_is_the_one_the_plain_filler_draws_and_leaves_the_rng_alike(box_rows, box_cols):
    for seed in range(5):
        ours, theirs = np.random.default_rng(seed), np.random.default_rng(seed)
        assert (random_full_grid(ours, box_rows, box_cols) == plain_full_grid(theirs, box_rows, box_cols)).all(), seed
        assert ours.integers(2**31) == theirs.integers(2**31), seed


@pytest.mark.parametrize("box_rows, box_cols", [(2, 2), (2, 3), (3, 3)])
def test_solutions_are_counted_as_the_plain_search_counts_them(box_rows, box_cols):
    rng = np.random.default_rng(box_rows * 10 + box_cols)
    size = box_rows * box_cols
    for trial in range(12):
        grid = plain_full_grid(rng, box_rows, box_cols)
        blanks = rng.choice(size * size, size=int(rng.integers(1, size * size)), replace=False)
        grid.flat[blanks] = 0
        if trial % 4 == 3:  # a clash among the givens: no completion (or, with none left to fill, the same answer)
            grid.flat[blanks[0]] = grid.flat[[i for i in range(size * size) if grid.flat[i]][0]]
        for limit in (1, 2, 5):
            given = grid.copy()
            assert count_solutions(grid, box_rows, box_cols, limit) == plain_count(grid.copy(), box_rows, box_cols, limit), (trial, limit)
            assert (grid == given).all()  # the caller's grid is left as it was
