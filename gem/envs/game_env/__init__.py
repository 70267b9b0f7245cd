"""``gem.envs.game_env``: GEM's games under GEM's ids, for ``import gem`` only.

``gem_core`` ships its own versions of these games (other levels, turn limits, rewards and a retry after a
malformed move). A GEM user's ids must mean GEM's games, or reported numbers silently stop being
comparable, so :func:`gem.make` looks ids up in :data:`GAME_SPECS` first: a registry view private to the
``gem`` layer, leaving the core registry and its games unchanged. The word games take their words from
GEM's source, NLTK's corpus, when it is on disk (:mod:`gem.envs.game_env.words`); Crosswords its clues
from ``clues=`` or ``gem_core``'s shipped ones (GEM's clue file is not shipped).
"""

from __future__ import annotations

from typing import Any

from gem_core.registry import EnvSpec

__all__ = ["GAME_SPECS"]

_MODULE = "gem.envs.game_env"


def _spec(env_id: str, entry_point: str, **kwargs: Any) -> EnvSpec:
    # max_turns stays a constructor kwarg (None for -random levels, which draw their own); EnvSpec.make
    # replaces it when the caller passes max_turns=.
    return EnvSpec(id=env_id, entry_point=f"{_MODULE}.{entry_point}", kwargs=kwargs)


# GEM 0.1.0's registrations (gem/envs/__init__.py): the same ids, the same parameters.
GAME_SPECS: dict[str, EnvSpec] = {
    s.id: s for s in (
        _spec("game:GuessTheNumber-v0-hard", "guess_the_number:GuessTheNumberEnv", min_number=1, max_number=50, max_turns=7),
        _spec("game:GuessTheNumber-v0-easy", "guess_the_number:GuessTheNumberEnv", min_number=1, max_number=10, max_turns=4),
        _spec("game:GuessTheNumber-v0-random", "guess_the_number:GuessTheNumberEnv", min_number=None, max_number=None, max_turns=None),
        _spec("game:Mastermind-v0-hard", "mastermind:MastermindEnv", code_length=4, num_numbers=8, max_turns=30, duplicate_numbers=False),
        _spec("game:Mastermind-v0-random", "mastermind:MastermindEnv", code_length=None, num_numbers=None, max_turns=None,
              duplicate_numbers=False),
        _spec("game:Mastermind-v0-easy", "mastermind:MastermindEnv", code_length=2, num_numbers=6, max_turns=10, duplicate_numbers=False),
        _spec("game:Minesweeper-v0-easy", "minesweeper:MinesweeperEnv", rows=5, cols=5, num_mines=5, max_turns=25),
        _spec("game:Minesweeper-v0-hard", "minesweeper:MinesweeperEnv", rows=8, cols=8, num_mines=12, max_turns=64),
        _spec("game:Minesweeper-v0-random", "minesweeper:MinesweeperEnv", rows=None, cols=None, num_mines=None, max_turns=None),
        _spec("game:FifteenPuzzle-v0-random", "fifteen_puzzle:FifteenPuzzleEnv", num_rows=None, max_turns=None),
        _spec("game:FifteenPuzzle-v0-easy", "fifteen_puzzle:FifteenPuzzleEnv", num_rows=2, max_turns=10),
        _spec("game:FifteenPuzzle-v0-hard", "fifteen_puzzle:FifteenPuzzleEnv", num_rows=4, max_turns=50),
        _spec("game:Sudoku-v0-easy", "sudoku:SudokuEnv", clues=10, max_turns=15, scale=4),
        _spec("game:Sudoku-v0-hard", "sudoku:SudokuEnv", clues=50, max_turns=50, scale=9),
        _spec("game:Sudoku-v0-random", "sudoku:SudokuEnv", clues=None, max_turns=None, scale=None),
        _spec("game:TowerofHanoi-v0-easy", "tower_of_hanoi:TowerofHanoiEnv", num_disks=3, max_turns=10),
        _spec("game:TowerofHanoi-v0-hard", "tower_of_hanoi:TowerofHanoiEnv", num_disks=5, max_turns=35),
        _spec("game:TowerofHanoi-v0-random", "tower_of_hanoi:TowerofHanoiEnv", num_disks=None, max_turns=None),
        _spec("game:Game2048-v0-easy", "game_2048:Game2048Env", target_tile=64, max_turns=50),
        _spec("game:Game2048-v0-hard", "game_2048:Game2048Env", target_tile=512, max_turns=50),
        _spec("game:Game2048-v0-extreme-hard", "game_2048:Game2048Env", target_tile=2048, max_turns=100),
        _spec("game:Game2048-v0-random", "game_2048:Game2048Env", target_tile=None, max_turns=None),
        _spec("game:Sokoban-v0-easy", "sokoban:SokobanEnv", dim_room=(6, 6), num_boxes=2, max_turns=20),
        _spec("game:Sokoban-v0-hard", "sokoban:SokobanEnv", dim_room=(8, 8), num_boxes=4, max_turns=50),
        _spec("game:Sokoban-v0-random", "sokoban:SokobanEnv", room_size=None, num_boxes=None, max_turns=None),
        _spec("game:Wordle-v0-hard", "wordle:WordleEnv", word_length=5, only_real_words=True, max_turns=25),
        _spec("game:Wordle-v0-easy", "wordle:WordleEnv", word_length=3, only_real_words=True, max_turns=15),
        _spec("game:Wordle-v0-random", "wordle:WordleEnv", word_length=None, only_real_words=True, max_turns=None),
        _spec("game:Hangman-v0-random", "hangman:HangmanEnv", word_length=None, hardcore=False, max_turns=None),
        _spec("game:Hangman-v0-easy", "hangman:HangmanEnv", word_length=3, hardcore=False, max_turns=10),
        _spec("game:Hangman-v0-hard", "hangman:HangmanEnv", word_length=7, hardcore=False, max_turns=20),
        _spec("game:WordSearch-v0-easy", "word_search:WordSearchEnv", num_words=5, max_turns=20, hardcore=False),
        _spec("game:WordSearch-v0-hard", "word_search:WordSearchEnv", num_words=5, max_turns=20, hardcore=True),
        _spec("game:WordSearch-v0-random", "word_search:WordSearchEnv", num_words=None, max_turns=None, hardcore=None),
        _spec("game:Crosswords-v0-easy", "crosswords:CrosswordsEnv", hardcore=False, max_turns=30, num_words=3),
        _spec("game:Crosswords-v0-hard", "crosswords:CrosswordsEnv", hardcore=True, max_turns=40, num_words=3),
        _spec("game:Crosswords-v0-random", "crosswords:CrosswordsEnv", hardcore=None, max_turns=None, num_words=None),
    )
}
"""GEM 0.1.0's game ids, each with GEM's own class and level parameters; :func:`gem.make` looks an id up here before
the core's registry, so a ``game:*`` id plays GEM's game."""
