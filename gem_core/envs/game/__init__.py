"""Language games, ids ``game:<Name>-v0[-easy|-hard|-random]`` (``-random`` draws the level from the
seed). Moves go in ``\\boxed{...}`` (see :mod:`gem_core.envs.game.action_format`)."""

from gem_core.registry import register

_GAMES = "gem_core.envs.game"

register("game:GuessTheNumber-v0", f"{_GAMES}.guess_the_number:GuessTheNumber", min_number=1, max_number=20, max_turns=8)
register("game:GuessTheNumber-v0-easy", f"{_GAMES}.guess_the_number:GuessTheNumber", min_number=1, max_number=10, max_turns=6)
register("game:GuessTheNumber-v0-hard", f"{_GAMES}.guess_the_number:GuessTheNumber", min_number=1, max_number=100, max_turns=7)

register("game:Wordle-v0", f"{_GAMES}.wordle:Wordle", word_length=5, max_turns=6)
register("game:Wordle-v0-easy", f"{_GAMES}.wordle:Wordle", word_length=5, max_turns=10)
register("game:Wordle-v0-hard", f"{_GAMES}.wordle:Wordle", word_length=5, max_turns=4)

# Their "-random" variants (upstream GEM's ids): one of the three levels above drawn per episode. Wordle's
# word list has 5-letter words only, so its levels differ in the guesses allowed, not in the word length.
register(
    "game:GuessTheNumber-v0-random", f"{_GAMES}.random_difficulty:RandomDifficulty",
    game=f"{_GAMES}.guess_the_number:GuessTheNumber",
    levels=[dict(min_number=1, max_number=10, max_turns=6), dict(min_number=1, max_number=20, max_turns=8),
            dict(min_number=1, max_number=100, max_turns=7)],
)
register(
    "game:Wordle-v0-random", f"{_GAMES}.random_difficulty:RandomDifficulty",
    game=f"{_GAMES}.wordle:Wordle",
    levels=[dict(word_length=5, max_turns=10), dict(word_length=5, max_turns=6), dict(word_length=5, max_turns=4)],
)


# name -> (entry point, kwargs per variant); each of these games also gets "-random", a level drawn per
# episode (see random_difficulty.py).
_LEVELS: dict[str, tuple[str, dict[str, dict]]] = {
    "Mastermind": ("mastermind:Mastermind", {
        "easy": dict(code_length=3, num_colors=4, max_turns=8),
        "": dict(code_length=4, num_colors=6, max_turns=10),
        "hard": dict(code_length=5, num_colors=8, max_turns=12),
    }),
    "Hangman": ("hangman:Hangman", {
        "easy": dict(lives=8, max_turns=26),
        "": dict(lives=6, max_turns=26),
        "hard": dict(lives=5, max_turns=26),
    }),
    "Minesweeper": ("minesweeper:Minesweeper", {
        "easy": dict(rows=5, cols=5, mines=3, max_turns=30),
        "": dict(rows=8, cols=8, mines=10, max_turns=80),
        "hard": dict(rows=10, cols=10, mines=18, max_turns=120),
    }),
    "Sudoku": ("sudoku:Sudoku", {
        "easy": dict(box_rows=2, box_cols=2, blanks=8, max_turns=16),
        "": dict(box_rows=3, box_cols=3, blanks=30, max_turns=45),
        "hard": dict(box_rows=3, box_cols=3, blanks=45, max_turns=60),
    }),
    "TowerOfHanoi": ("tower_of_hanoi:TowerOfHanoi", {
        "easy": dict(disks=3, max_turns=10),
        "": dict(disks=4, max_turns=20),
        "hard": dict(disks=5, max_turns=40),
    }),
    "FifteenPuzzle": ("fifteen_puzzle:FifteenPuzzle", {
        "easy": dict(size=3, scramble_moves=10, max_turns=30),
        "": dict(size=3, scramble_moves=30, max_turns=60),
        "hard": dict(size=4, scramble_moves=40, max_turns=80),
    }),
    "2048": ("game_2048:Game2048", {
        "easy": dict(size=4, target=128, max_turns=150),
        "": dict(size=4, target=256, max_turns=350),
        "hard": dict(size=4, target=512, max_turns=600),
    }),
    "Sokoban": ("sokoban:Sokoban", {
        "easy": dict(height=5, width=5, boxes=1, inner_walls=2, reverse_steps=12, max_turns=30),
        "": dict(height=6, width=6, boxes=2, inner_walls=3, reverse_steps=25, max_turns=60),
        "hard": dict(height=7, width=7, boxes=2, inner_walls=6, reverse_steps=45, max_turns=100),
    }),
    "Crosswords": ("crosswords:Crosswords", {
        "easy": dict(words=3, max_turns=6),
        "": dict(words=5, max_turns=10),
        "hard": dict(words=8, max_turns=12),
    }),
    "WordSearch": ("word_search:WordSearch", {
        "easy": dict(size=6, words=3, directions=2, max_turns=6),
        "": dict(size=8, words=5, directions=3, max_turns=10),
        "hard": dict(size=10, words=7, directions=8, max_turns=12),
    }),
}  # fmt: skip

for _name, (_entry, _variants) in _LEVELS.items():
    for _variant, _kwargs in _variants.items():
        register(f"game:{_name}-v0" + (f"-{_variant}" if _variant else ""), f"{_GAMES}.{_entry}", **_kwargs)
    register(
        f"game:{_name}-v0-random",
        f"{_GAMES}.random_difficulty:RandomDifficulty",
        game=f"{_GAMES}.{_entry}",
        levels=list(_variants.values()),
    )

# Upstream GEM's hardest 2048: reach the 2048 tile (outside the -random mix). About a thousand moves
# make a 2048 tile, so the turn budget leaves room for a good player, not for GEM's 100.
register("game:2048-v0-extreme-hard", f"{_GAMES}.game_2048:Game2048", size=4, target=2048, max_turns=2000)

# WikiGame: click from page to page on the shipped offline link graph (difficulty = shortest-path length).
register("game:WikiGame-v0", f"{_GAMES}.wiki_game:WikiGame", min_distance=2, max_distance=3, max_turns=8)
register("game:WikiGame-v0-easy", f"{_GAMES}.wiki_game:WikiGame", min_distance=1, max_distance=2, max_turns=6)
register("game:WikiGame-v0-hard", f"{_GAMES}.wiki_game:WikiGame", min_distance=4, max_distance=6, max_turns=12)
