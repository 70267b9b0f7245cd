"""Scripted solvers for the game suite: real strategies that prove each game winnable.

A solver sees what a player sees: the observations and :meth:`Env.render` (the board as text), plus
the game's public settings and shipped word/clue lists. It never reads hidden state (the secret word,
the mine positions, the Sudoku solution). ``make_solver(env)`` is called right after ``reset`` and
returns a policy ``observation -> action``.

Also used by ``bench/games_table.py``.
"""

from __future__ import annotations

import heapq
import itertools
import re
from collections import Counter, deque
from collections.abc import Callable
from functools import cache
from typing import Any

import numpy as np

from gem_core.env import Env
from gem_core.envs.game.crosswords import load_clues
from gem_core.envs.game.game_2048 import DIRECTIONS
from gem_core.envs.game.wordle import score_guess

Policy = Callable[[str], str]


def boxed(move: Any) -> str:
    return f"\\boxed{{{move}}}"


# --- GuessTheNumber: binary search ------------------------------------------------------------------


def guess_the_number_solver(env: Env) -> Policy:
    low, high = env.min_number, env.max_number
    last = None

    def act(obs: str) -> str:
        nonlocal low, high, last
        if last is not None:
            if "higher" in obs:
                low = last + 1
            elif "lower" in obs:
                high = last - 1
        last = (low + high) // 2
        return boxed(last)

    return act


# --- Wordle: constraint filtering, most informative guess --------------------------------------------


@cache
def _wordle_feedback_matrix(words: tuple[str, ...]) -> np.ndarray:
    """``m[i, j]`` = feedback code of guessing ``words[i]`` when the answer is ``words[j]``."""
    codes: dict[str, int] = {}
    return np.array([[codes.setdefault(score_guess(g, t), len(codes)) for t in words] for g in words])


def _most_informative(matrix: np.ndarray, candidates: np.ndarray) -> int:
    """Guess index whose feedback splits ``candidates`` into the most even parts (max entropy);
    a candidate wins ties, so the guess might also be the answer."""
    best, best_key = 0, None
    is_candidate = np.zeros(matrix.shape[0], dtype=bool)
    is_candidate[candidates] = True
    for g in range(matrix.shape[0]):
        counts = np.unique(matrix[g, candidates], return_counts=True)[1]
        p = counts / counts.sum()
        key = (float(-(p * np.log(p)).sum()), is_candidate[g])
        if best_key is None or key > best_key:
            best, best_key = g, key
    return best


def wordle_solver(env: Env) -> Policy:
    words = env.words
    matrix = _wordle_feedback_matrix(words)
    candidates = np.arange(len(words))
    last: int | None = None

    def act(obs: str) -> str:
        nonlocal candidates, last
        rows = re.findall(r"^((?:[A-Z] ){4}[A-Z])\s+((?:[GYX] ){4}[GYX])$", obs, re.MULTILINE)
        if last is not None and rows:
            guess, feedback = rows[-1][0].replace(" ", "").lower(), rows[-1][1].replace(" ", "")
            candidates = candidates[[score_guess(guess, words[t]) == feedback for t in candidates]]
        last = int(candidates[0]) if len(candidates) <= 2 else _most_informative(matrix, candidates)
        return boxed(words[last])

    return act


# --- Mastermind: Knuth-style minimax over the consistent codes ---------------------------------------


@cache
def _all_codes(length: int, colors: int) -> tuple[np.ndarray, np.ndarray]:
    """Every code, and how often each colour occurs in it."""
    codes = np.array(list(itertools.product(range(1, colors + 1), repeat=length)))
    return codes, np.stack([(codes == c).sum(axis=1) for c in range(1, colors + 1)], axis=1)


def mastermind_solver(env: Env) -> Policy:
    length, colors = env.code_length, env.num_colors
    codes, counts = _all_codes(length, colors)
    candidates = np.arange(len(codes))
    last: int | None = None

    def feedback(guess: int, against: np.ndarray) -> np.ndarray:
        black = (codes[against] == codes[guess]).sum(axis=1)
        common = np.minimum(counts[against], counts[guess]).sum(axis=1)
        return black * (length + 1) + (common - black)

    def act(obs: str) -> str:
        nonlocal candidates, last
        pegs = re.findall(r"black=(\d+) white=(\d+)", obs)
        if last is not None and pegs:
            black, white = map(int, pegs[-1])
            candidates = candidates[feedback(last, candidates) == black * (length + 1) + white]
        if last is None:  # Knuth's opening, generalised: two colours per half (1122, 11122, ...)
            opening = [1] * ((length + 1) // 2) + [min(2, colors)] * (length // 2)
            last = int(np.flatnonzero((codes == opening).all(axis=1))[0])
        elif len(candidates) <= 2:
            last = int(candidates[0])
        else:  # the consistent code whose worst-case answer leaves the fewest candidates
            pool = candidates[:: max(1, len(candidates) // 100)]
            worst = [np.bincount(feedback(int(g), candidates)).max() for g in pool]
            last = int(pool[int(np.argmin(worst))])
        return boxed(" ".join(map(str, codes[last])))

    return act


# --- Hangman: most frequent letter among the words that fit ------------------------------------------


def hangman_solver(env: Env) -> Policy:
    words = env.words

    def act(obs: str) -> str:
        state = re.findall(r"Word: ([a-z_ ]+?)\s{3}Lives: \d+\s{3}Guessed: (.*)$", obs, re.MULTILINE)[-1]
        pattern = state[0].split(" ")
        guessed = set() if state[1] == "-" else set(state[1].split())
        shown = {ch for ch in pattern if ch != "_"}
        misses = {g for g in guessed if len(g) == 1 and g not in shown}
        fits = [
            w
            for w in words
            if len(w) == len(pattern)
            and w not in guessed
            and all((p == ch) if p != "_" else (ch not in shown) for p, ch in zip(pattern, w))
            and not misses & set(w)
        ]
        if len(fits) == 1:
            return boxed(fits[0])
        letters = Counter(ch for w in fits for ch in set(w) if ch not in guessed)
        # Ties go to the alphabetically first letter, so the solver plays the same in every process.
        return boxed(min(letters, key=lambda ch: (-letters[ch], ch)) if letters else "e")

    return act


# --- Minesweeper: constraint propagation (single-cell and subset rules, mine count) ------------------


def _parse_minesweeper(text: str) -> list[list[str]]:
    lines = [line.split() for line in text.splitlines() if re.match(r"^\s*\d+ ", line) and not line.startswith("   ")]
    return [row[1:] for row in lines]


def minesweeper_solver(env: Env) -> Policy:
    rows, cols, total_mines = env.rows, env.cols, env.num_mines
    mines: set[tuple[int, int]] = set()

    def around(r: int, c: int) -> list[tuple[int, int]]:
        return [(r + a, c + b) for a in (-1, 0, 1) for b in (-1, 0, 1) if (a or b) and 0 <= r + a < rows and 0 <= c + b < cols]

    def act(obs: str) -> str:
        board = _parse_minesweeper(env.render())
        hidden = {(r, c) for r in range(rows) for c in range(cols) if board[r][c] in "#F"}
        if len(hidden) == rows * cols:
            return boxed(f"reveal {(rows + 1) // 2} {(cols + 1) // 2}")
        while True:
            constraints = []
            for r in range(rows):
                for c in range(cols):
                    if board[r][c] not in "#F*":
                        number = 0 if board[r][c] == "." else int(board[r][c])
                        unknown = frozenset(n for n in around(r, c) if n in hidden and n not in mines)
                        if unknown:
                            constraints.append((unknown, number - sum(n in mines for n in around(r, c))))
            constraints.append((frozenset(hidden - mines), total_mines - len(mines)))
            found_mines: set[tuple[int, int]] = set()
            pairs = itertools.chain(((a, (frozenset(), 0)) for a in constraints), itertools.permutations(constraints, 2))
            for (b_cells, b_need), (a_cells, a_need) in pairs:
                if a_cells <= b_cells:
                    rest, need = b_cells - a_cells, b_need - a_need
                    if rest and need == 0:
                        r, c = min(rest)
                        return boxed(f"reveal {r + 1} {c + 1}")
                    if rest and need == len(rest):
                        found_mines |= rest
            if not found_mines - mines:
                r, c = min(hidden - mines)  # no safe deduction: guess (never needed on generated boards)
                return boxed(f"reveal {r + 1} {c + 1}")
            mines.update(found_mines)

    return act


# --- Sudoku: naked and hidden singles, backtracking when they stall ----------------------------------


def solve_sudoku(grid: list[list[int]], box_rows: int, box_cols: int) -> list[list[int]] | None:
    size = len(grid)
    units = (
        [[(r, c) for c in range(size)] for r in range(size)]
        + [[(r, c) for r in range(size)] for c in range(size)]
        + [
            [(br + r, bc + c) for r in range(box_rows) for c in range(box_cols)]
            for br in range(0, size, box_rows)
            for bc in range(0, size, box_cols)
        ]
    )
    peers = {
        (r, c): {p for unit in units if (r, c) in unit for p in unit} - {(r, c)} for r in range(size) for c in range(size)
    }

    def search(cand: dict[tuple[int, int], set[int]]) -> dict[tuple[int, int], set[int]] | None:
        changed = True
        while changed:  # propagate
            changed = False
            for cell, options in cand.items():
                if not options:
                    return None
                if len(options) == 1:
                    for p in peers[cell]:
                        if options & cand[p]:
                            cand[p] = cand[p] - options
                            changed = True
            for unit in units:
                for d in range(1, size + 1):
                    spots = [cell for cell in unit if d in cand[cell]]
                    if not spots:
                        return None
                    if len(spots) == 1 and len(cand[spots[0]]) > 1:
                        cand[spots[0]] = {d}
                        changed = True
        open_cells = [cell for cell in cand if len(cand[cell]) > 1]
        if not open_cells:
            return cand
        cell = min(open_cells, key=lambda x: len(cand[x]))
        for d in sorted(cand[cell]):
            result = search({**cand, cell: {d}})
            if result is not None:
                return result
        return None

    start = {(r, c): ({grid[r][c]} if grid[r][c] else set(range(1, size + 1))) for r in range(size) for c in range(size)}
    solved = search(start)
    if solved is None:
        return None
    return [[next(iter(solved[r, c])) for c in range(size)] for r in range(size)]


def sudoku_solver(env: Env) -> Policy:
    rows = [line.replace("|", " ").split() for line in env.render().splitlines() if not line.startswith("-")]
    grid = [[0 if v == "." else int(v) for v in row] for row in rows]
    solution = solve_sudoku(grid, env.box_rows, env.box_cols)
    assert solution is not None, "the generated puzzle has no solution"
    moves = iter([(r, c, solution[r][c]) for r in range(len(grid)) for c in range(len(grid)) if not grid[r][c]])

    def act(obs: str) -> str:
        r, c, d = next(moves)
        return boxed(f"{r + 1} {c + 1} {d}")

    return act


# --- Tower of Hanoi: the recursion -------------------------------------------------------------------


def hanoi_moves(n: int, src: str = "A", dst: str = "C", via: str = "B") -> list[tuple[str, str]]:
    if n == 0:
        return []
    return hanoi_moves(n - 1, src, via, dst) + [(src, dst)] + hanoi_moves(n - 1, via, dst, src)


def tower_of_hanoi_solver(env: Env) -> Policy:
    disks = len(env.render().splitlines()[0].split(":")[1].split())
    moves = iter(hanoi_moves(disks))
    return lambda obs: boxed(" ".join(next(moves)))


# --- Fifteen puzzle: A* on Manhattan distance --------------------------------------------------------


def solve_sliding(board: tuple[int, ...], size: int, weight: float = 1.0) -> list[int]:
    """Tiles to slide: A* on the Manhattan distance (updated per move, only one tile moves). ``weight``
    > 1 inflates the heuristic (weighted A*): much faster on 4x4, at most ``weight`` x the shortest."""

    def home_distance(tile: int, index: int) -> int:
        return abs(index // size - (tile - 1) // size) + abs(index % size - (tile - 1) % size)

    goal = tuple(list(range(1, size * size)) + [0])
    start_h = sum(home_distance(t, i) for i, t in enumerate(board) if t)
    frontier: list[tuple[float, int, int, tuple[int, ...], tuple[int, ...]]] = [(weight * start_h, 0, start_h, board, ())]
    seen = {board: 0}
    while frontier:
        _, cost, h, state, path = heapq.heappop(frontier)
        if state == goal:
            return list(path)
        gap = state.index(0)
        r, c = divmod(gap, size)
        for nr, nc in ((r - 1, c), (r + 1, c), (r, c - 1), (r, c + 1)):
            if 0 <= nr < size and 0 <= nc < size:
                spot = nr * size + nc
                tile = state[spot]
                nxt = list(state)
                nxt[gap], nxt[spot] = tile, 0
                nxt_t = tuple(nxt)
                if seen.get(nxt_t, 1 << 30) > cost + 1:
                    seen[nxt_t] = cost + 1
                    nh = h - home_distance(tile, spot) + home_distance(tile, gap)
                    heapq.heappush(frontier, (cost + 1 + weight * nh, cost + 1, nh, nxt_t, (*path, tile)))
    raise ValueError("unsolvable board")


def fifteen_puzzle_solver(env: Env) -> Policy:
    rows = [list(map(int, line.split())) for line in env.render().splitlines()]
    # Optimal A* on 3x3; weighted A* (within 2x of optimal) on larger boards keeps the search short.
    moves = iter(solve_sliding(tuple(v for row in rows for v in row), len(rows), weight=1.0 if len(rows) <= 3 else 2.0))
    return lambda obs: boxed(next(moves))


# --- 2048: expectimax (one move, one random tile) on a line heuristic, greedy while the board is open ---


@cache
def _slide_line(line: tuple[int, ...]) -> tuple[int, ...]:
    """A line of tile exponents (0 = empty) slid towards its start, equal neighbours merged once."""
    tiles, out, i = [v for v in line if v], [], 0
    while i < len(tiles):
        if i + 1 < len(tiles) and tiles[i] == tiles[i + 1]:
            out.append(tiles[i] + 1)
            i += 2
        else:
            out.append(tiles[i])
            i += 1
    return tuple(out + [0] * (len(line) - len(out)))


@cache
def _line_value(line: tuple[int, ...]) -> float:
    """Empty squares and merges are good; a line that is not monotonic and big tiles away from the
    ends are bad (the well-known hand-tuned weights of 2048 AIs)."""
    merges, previous, run = 0, 0, 0
    for v in line:
        if v and v == previous:
            run += 1
        elif v:
            merges, run = merges + (1 + run if run else 0), 0
            previous = v
    merges += 1 + run if run else 0
    rising = sum(b**4 - a**4 for a, b in zip(line, line[1:]) if b > a)
    falling = sum(a**4 - b**4 for a, b in zip(line, line[1:]) if a > b)
    return 270.0 * line.count(0) + 700.0 * merges - 47.0 * min(rising, falling) - 11.0 * sum(v**3.5 for v in line)


@cache
def _slide_line_back(line: tuple[int, ...]) -> tuple[int, ...]:
    return _slide_line(line[::-1])[::-1]


#: A board as a tuple of rows of tile exponents: a move or a value is a handful of cached line lookups
#: (a flat board cost a regrouping per move, and the search makes ~80 000 moves per won extreme-hard game).
Board = tuple[tuple[int, ...], ...]


def _move(board: Board, direction: str) -> Board:
    if direction == "left":
        return tuple(_slide_line(row) for row in board)
    if direction == "right":
        return tuple(_slide_line_back(row) for row in board)
    slide_line = _slide_line if direction == "up" else _slide_line_back
    return tuple(zip(*(slide_line(column) for column in zip(*board))))


def _value(board: Board) -> float:
    return sum(_line_value(row) for row in board) + sum(_line_value(column) for column in zip(*board))


_LOST = -1e9  # the value of a board with no move left


def _after_random_tile(board: Board) -> float:
    """Expected value of the best next move over where the new tile lands (2: 0.9, 4: 0.1)."""
    empty = [(r, c) for r, row in enumerate(board) for c, v in enumerate(row) if not v]
    total = 0.0
    for r, c in empty:
        row = board[r]
        for exponent, p in ((1, 0.9), (2, 0.1)):
            spawned = board[:r] + (row[:c] + (exponent,) + row[c + 1 :],) + board[r + 1 :]
            moves = [_move(spawned, d) for d in DIRECTIONS]
            total += p * max((_value(m) for m in moves if m != spawned), default=_LOST)
    return total / len(empty) if empty else _value(board)


def game_2048_solver(env: Env) -> Policy:
    def act(obs: str) -> str:
        rows = [line.split() for line in env.render().splitlines()[:-1]]
        board = tuple(tuple(0 if v == "." else int(v).bit_length() - 1 for v in row) for row in rows)
        # Looking ahead only pays when the board is nearly full; it is also cheapest then.
        evaluate = _after_random_tile if sum(row.count(0) for row in board) <= 4 else _value
        options = [(evaluate(after), d) for d in DIRECTIONS if (after := _move(board, d)) != board]
        return boxed(max(options)[1] if options else "up")

    return act


# --- Sokoban: breadth-first search over (player, boxes) ----------------------------------------------


def solve_sokoban(text: str) -> list[str]:
    walls, goals, boxes, player = set(), set(), set(), (0, 0)
    for r, line in enumerate(text.splitlines()):
        for c, ch in enumerate(line):
            if ch == "#":
                walls.add((r, c))
            if ch in ".*+":
                goals.add((r, c))
            if ch in "$*":
                boxes.add((r, c))
            if ch in "@+":
                player = (r, c)
    moves = {"up": (-1, 0), "down": (1, 0), "left": (0, -1), "right": (0, 1)}
    start = (player, frozenset(boxes))
    parent: dict[Any, Any] = {start: None}
    queue = deque([start])
    while queue:
        state = queue.popleft()
        pos, bxs = state
        if bxs <= goals:
            path = []
            while parent[state] is not None:
                state, move = parent[state]
                path.append(move)
            return path[::-1]
        for name, (dr, dc) in moves.items():
            ahead = (pos[0] + dr, pos[1] + dc)
            if ahead in walls:
                continue
            new_boxes = bxs
            if ahead in bxs:
                beyond = (ahead[0] + dr, ahead[1] + dc)
                if beyond in walls or beyond in bxs:
                    continue
                new_boxes = (bxs - {ahead}) | {beyond}
            nxt = (ahead, new_boxes)
            if nxt not in parent:
                parent[nxt] = (state, name)
                queue.append(nxt)
    raise ValueError("unsolvable room")


def sokoban_solver(env: Env) -> Policy:
    moves = iter(solve_sokoban(env.render()))
    return lambda obs: boxed(next(moves))


# --- Crosswords: look the clues up in the reference list, checking length and crossings --------------


def crosswords_solver(env: Env) -> Policy:
    by_clue: dict[str, list[str]] = {}
    for word, clue in load_clues():
        by_clue.setdefault(clue, []).append(word)

    def act(obs: str) -> str:
        for name, length, clue in re.findall(r"^(\d+ (?:across|down)) \(row \d+, col \d+, (\d+) letters\): (.+)$", env.render(), re.MULTILINE):
            if " = " in clue and clue.rsplit(" = ", 1)[0] in by_clue:
                continue  # solved
            words = [w for w in by_clue.get(clue, []) if len(w) == int(length)]
            if words:
                return boxed(f"{name}: {words[0]}")
        return boxed("1 across: a")

    return act


# --- Word search: scan every line of the grid --------------------------------------------------------


def word_search_solver(env: Env) -> Policy:
    def act(obs: str) -> str:
        lines = env.render().splitlines()
        grid = [line.split()[1:] for line in lines[1:] if re.match(r"^\s*\d+\s", line)]
        todo = lines[-2].removeprefix("Find: ").split()
        size = len(grid)
        for word in todo:
            for r, c in itertools.product(range(size), repeat=2):
                for dr, dc in itertools.product((-1, 0, 1), repeat=2):
                    end = (r + dr * (len(word) - 1), c + dc * (len(word) - 1))
                    if (dr or dc) and 0 <= end[0] < size and 0 <= end[1] < size:
                        if all(grid[r + dr * k][c + dc * k].lower() == ch for k, ch in enumerate(word)):
                            return boxed(f"{r + 1} {c + 1} {end[0] + 1} {end[1] + 1}")
        return boxed("1 1 1 2")

    return act


def wiki_game_solver(env: Env) -> Policy:
    """Clicks along a shortest path of the shipped link graph (its map), reading the page it is on from the text."""
    from gem_core.envs.game.wiki_game import load_link_graph

    graph = load_link_graph()
    target = env.target  # named in the first observation; the solver is made right after reset

    def act(obs: str) -> str:
        page = re.findall(r"You are on '([^']+)'", obs)[-1]
        return boxed(graph.shortest_path(page, target)[1])

    return act


SOLVERS: dict[str, Callable[[Env], Policy]] = {
    "GuessTheNumber": guess_the_number_solver,
    "Wordle": wordle_solver,
    "Mastermind": mastermind_solver,
    "Hangman": hangman_solver,
    "Minesweeper": minesweeper_solver,
    "Sudoku": sudoku_solver,
    "TowerOfHanoi": tower_of_hanoi_solver,
    "FifteenPuzzle": fifteen_puzzle_solver,
    "2048": game_2048_solver,
    "Sokoban": sokoban_solver,
    "Crosswords": crosswords_solver,
    "WordSearch": word_search_solver,
    "WikiGame": wiki_game_solver,
}


def game_name(env_id: str) -> str:
    """``"game:Sokoban-v0-hard"`` -> ``"Sokoban"``."""
    return env_id.split(":", 1)[1].split("-v", 1)[0]


def make_solver(env_id: str, env: Env) -> Policy:
    """The scripted policy for ``env`` (call right after ``env.reset``)."""
    game = getattr(env, "current_game", env)  # a -random variant plays one drawn level per episode
    return SOLVERS[game_name(env_id)](game)


def random_policy(env: Env) -> Policy:
    return lambda obs: env.sample_random_action()


def play(env_id: str, env: Env, seed: int, policy_factory: Callable[[str, Env], Policy]) -> dict[str, Any]:
    """One episode; returns the per-turn rewards, ``success`` and the episode length."""
    obs, _ = env.reset(seed=seed)
    policy = policy_factory(env_id, env)
    rewards: list[float] = []
    info: dict[str, Any] = {}
    terminated = truncated = False
    while not (terminated or truncated):
        obs, reward, terminated, truncated, info = env.step(policy(obs))
        rewards.append(float(reward))
    return {
        "rewards": rewards,
        "return": sum(rewards),
        "length": len(rewards),
        "success": bool(info.get("success")),
        "max_turns": env.max_turns,  # of this episode's level, for a -random variant
    }
