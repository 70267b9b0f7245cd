"""Password, a cooperative word game for two seats with different roles.

The ``clue_giver`` sees a secret word and gives one-word clues; the ``guesser`` sees only the clues and
guesses. Each round is a clue then a guess; a right guess pays +1 to both seats (the game is
cooperative, so the seats' rewards are equal); after ``max_rounds`` wrong guesses the game ends with 0.
A clue that is not one word, or contains the secret word, costs the clue giver the format penalty and
it tries again (``max_invalid`` such clues in a row end the game, truncated). A guess without
``\\boxed{}`` costs the guesser the penalty and counts as a wrong guess.
"""

from __future__ import annotations

import functools
import os
import unicodedata
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from gem_core.envs.game.action_format import extract_boxed
from gem_core.errors import InvalidArgumentType, MalformedFile, MissingFile, ResetNeeded
from gem_core.multi_agent import MultiAgentEnv, MultiStepResult
from gem_core.vector.calls import check_count

__all__ = ["Password", "load_words"]

WORDS_FILE = Path(__file__).with_name("data") / "password_words.tsv"


@functools.lru_cache(maxsize=4)
def load_words(path: str | Path = WORDS_FILE) -> dict[str, tuple[str, ...]]:
    """``{secret word: clues}`` from a ``word<TAB>clue; clue; ...`` file.

    Raises:
        MalformedFile: if the file is not UTF-8 text, a line does not have two tab-separated fields or has no word
            before the tab, or the file holds no word at all.
    """
    try:
        text = Path(path).read_text(encoding="utf-8")
    except UnicodeDecodeError as error:
        raise MalformedFile(f"words_file {str(path)!r} is not UTF-8 text ({error}); save it as UTF-8.") from None
    words = {}
    for number, line in enumerate(text.splitlines(), 1):
        if line.strip() and not line.startswith("#"):
            fields = line.split("\t")
            if len(fields) != 2:
                raise MalformedFile(f"words_file {path}:{number}: expected 'word<TAB>clue; clue; ...', got {len(fields)} tab-separated fields.")
            word, clues = fields
            if not _letters(word):
                raise MalformedFile(f"words_file {path}:{number}: no secret word before the tab; expected 'word<TAB>clue; clue; ...'.")
            words[word.strip().lower()] = tuple(c.strip().lower() for c in clues.split(";") if c.strip())
    if not words:
        raise MalformedFile(f"words_file {str(path)!r} holds no 'word<TAB>clue; clue' line (only blanks or # comments); "
                            "add secret words, or leave words_file out for the shipped list.")
    return words


def _letters(text: str) -> str:
    """``text`` as the guesser reads it, letters only: NFKC (full-width letters become plain ones), casefolded, and
    without separators or invisible characters, so a clue cannot hide the secret as ``t-o-m-a-t-o`` or behind a
    zero-width space."""
    return "".join(ch for ch in unicodedata.normalize("NFKC", text).casefold() if ch.isalpha())


class Password(MultiAgentEnv):
    """Password, the cooperative clue-and-guess game (see the module docstring for the rules).

    Args:
        max_rounds: wrong guesses before the game ends with 0.
        max_invalid: invalid clues in a row that end the game, truncated.
        words_file: a ``word<TAB>clue; clue`` file of secret words (default: the shipped list).

    Raises:
        InvalidArgument: if ``max_rounds`` or ``max_invalid`` is not a whole number from 1.
        InvalidArgumentType: if ``words_file`` is not a path.
        MissingFile: if ``words_file`` names no existing file.
        MalformedFile: if ``words_file`` is not UTF-8, holds no word, or a line is not ``word<TAB>clues``.
    """
    agents = ("clue_giver", "guesser")

    def __init__(self, max_rounds: int = 3, max_invalid: int = 3, words_file: str | None = None):
        self.max_rounds, self.max_invalid = check_count("max_rounds", max_rounds), check_count("max_invalid", max_invalid)
        if words_file is not None and not isinstance(words_file, (str, os.PathLike)):
            raise InvalidArgumentType(f"words_file must be a file path (str), got {type(words_file).__name__} {words_file!r:.60}.")
        if words_file is not None and not Path(words_file).is_file():
            raise MissingFile(f"words_file={str(words_file)!r} is not an existing file; give a 'word<TAB>clue; clue' file, "
                              "or leave words_file out for the shipped list.")
        self.words = sorted(load_words(words_file or WORDS_FILE))
        self.secret = ""
        self.clues: list[str] = []
        self.round = 0
        self.invalid = 0
        self.to_move: str | None = None

    state_excludes = frozenset({"words"})

    def _giver_prompt(self, before: str = "") -> str:
        given = f" Clues so far: {', '.join(self.clues)}; the guesses were wrong." if self.clues else ""
        return (
            f"{before}You give clues in Password. The secret word is '{self.secret}'.{given} "
            f"Give one one-word clue (not the word itself) inside \\boxed{{}}. Round {self.round + 1} of {self.max_rounds}."
        )

    def _guesser_prompt(self) -> str:
        return (
            f"You guess in Password. Clues so far: {', '.join(self.clues)}. "
            f"Guess the secret word inside \\boxed{{}}. Round {self.round + 1} of {self.max_rounds}."
        )

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        super().reset(seed=seed)
        self.secret = self.words[int(self.np_random.integers(len(self.words)))]
        self.clues, self.round, self.invalid = [], 0, 0
        self.to_move = "clue_giver"
        return {"clue_giver": self._giver_prompt()}, {}

    def acting_agents(self) -> tuple[str, ...]:
        return (self.to_move,) if self.to_move else ()

    def _end(self, reward: float, text: str, *, truncated: bool = False) -> MultiStepResult:
        self.to_move = None
        everyone = dict.fromkeys(self.agents)
        return (
            {a: text for a in everyone},
            {a: reward for a in everyone},
            {a: not truncated for a in everyone},
            {a: truncated for a in everyone},
            {a: {"success": reward > 0, "secret": self.secret} for a in everyone},
        )

    def step(self, actions: Mapping[str, str]) -> MultiStepResult:  # type: ignore[override]
        """Play the acting seat's clue or guess.

        Args:
            actions: ``{agent: action}`` for the agent whose turn it is.

        Returns:
            ``(observations, rewards, terminations, truncations, infos)``, each keyed by agent.

        Raises:
            ResetNeeded: if no game is in progress (before ``reset()``, or after the game ended).
            InvalidArgument: if ``actions`` does not hold exactly the acting agent's action.
            InvalidArgumentType: if ``actions`` is not a dict (e.g. a bare action string).
        """
        if self.to_move is None:
            raise ResetNeeded("No game is in progress (none started yet, or it is over): call reset() before step().")
        agent = self.to_move
        self.check_actions(actions)
        text = (extract_boxed(actions[agent]) or "").strip().lower()
        if agent == "clue_giver":
            secret = _letters(self.secret)
            leaks = self.secret in text or (bool(secret) and secret in _letters(text))
            if not text or len(text.split()) != 1 or leaks:
                self.invalid += 1
                if self.invalid >= self.max_invalid:
                    return self._end(0.0, f"{self.max_invalid} invalid clues in a row; the word was '{self.secret}'.", truncated=True)
                why = "the clue contains the secret word" if text and leaks else "expected one word inside \\boxed{}"
                return {agent: self._giver_prompt(f"Invalid clue ({why}). ")}, {agent: self.format_penalty}, {}, {}, {agent: {"format_error": True}}
            self.invalid = 0
            self.clues.append(text)
            self.to_move = "guesser"
            return {"guesser": self._guesser_prompt()}, {}, {}, {}, {}
        rewards = {} if text else {"guesser": self.format_penalty}
        if _letters(text) == _letters(self.secret):  # read as the clue check reads: "Violin." and "violin" are the word
            return self._end(1.0, f"Correct: the word was '{self.secret}'.")
        self.round += 1
        if self.round >= self.max_rounds:
            result = self._end(0.0, f"Out of rounds; the word was '{self.secret}'.")
            result[1]["guesser"] += rewards.get("guesser", 0.0)
            return result
        self.to_move = "clue_giver"
        infos = {"guesser": {"format_error": True}} if not text else {}
        return (
            {"clue_giver": self._giver_prompt(f"The guess '{text}' was wrong. "), "guesser": f"Wrong: '{text}' is not the word."},
            rewards,
            {},
            {},
            infos,
        )

    def sample_random_action(self, agent: str) -> str:
        word = self.words[int(self.np_random.integers(len(self.words)))]
        if agent == "clue_giver":
            clues = load_words(WORDS_FILE).get(word, ("hint",))
            return f"\\boxed{{{clues[0]}}}"
        return f"\\boxed{{{word}}}"
