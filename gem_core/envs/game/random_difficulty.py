"""The ``-random`` variant of a game: every episode is played at a difficulty drawn from the env's RNG.

Training on a mix of difficulties is a cheap curriculum. ``RandomDifficulty`` holds one game class
and its difficulty levels (the kwargs of its ``-easy``, ``-v0`` and ``-hard`` variants); ``reset``
draws a level and a seed for it from :attr:`np_random`, so the outer seed fixes both the level and
the puzzle. Everything else (``step``, ``render``, ``sample_random_action``, ``max_turns``) is the
drawn game's; :attr:`current_game` is that game.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping, Sequence
from typing import Any

from gem_core.env import Env, StepResult
from gem_core.errors import InvalidArgument, ResetNeeded


class RandomDifficulty(Env):
    blocking = False  # a quick pure-Python step: called inline, never via a thread

    def __init__(self, game: str, levels: Sequence[dict[str, Any]], max_turns: int | None = None):
        """``game`` is ``"package.module:Class"``; ``levels`` are constructor kwargs, one dict per level;
        ``max_turns`` (from ``make(id, max_turns=N)``) replaces every level's own limit.

        Raises:
            InvalidArgument: if ``levels`` is not a non-empty list of dicts.
        """
        listed = isinstance(levels, Sequence) and not isinstance(levels, (str, bytes))
        if not listed or not levels or not all(isinstance(level, Mapping) for level in levels):
            raise InvalidArgument(f"levels={levels!r:.80} must be a non-empty list of dicts, each the game's constructor kwargs for one level.")
        module_name, _, class_name = game.partition(":")
        self.game_class = getattr(importlib.import_module(module_name), class_name)
        self.levels = [dict(level) if max_turns is None else {**level, "max_turns": max_turns} for level in levels]
        self.max_return: float = getattr(self.game_class, "max_return", 1.0)
        self._games: dict[int, Env] = {}
        self.level: int | None = None

    @property
    def current_game(self) -> Env:
        if self.level is None:
            raise ResetNeeded("Call reset() before using the game.")
        return self._games[self.level]

    @property
    def max_turns(self) -> int:
        """The turn limit of the level being played (of the hardest level before the first reset)."""
        if self.level is None:
            return max(level.get("max_turns", 0) for level in self.levels)
        return self.current_game.max_turns

    @property
    def format_penalty(self) -> float:  # type: ignore[override]
        return self.current_game.format_penalty if self.level is not None else Env.format_penalty

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
        super().reset(seed=seed)
        self.level = int(self.np_random.integers(len(self.levels)))
        if self.level not in self._games:
            self._games[self.level] = self.game_class(**self.levels[self.level])
        obs, info = self.current_game.reset(seed=int(self.np_random.integers(2**31)), options=options)
        return obs, {**info, "level": self.level}

    def step(self, action: str) -> StepResult:
        return self.current_game.step(action)

    def sample_random_action(self) -> str:
        return self.current_game.sample_random_action()

    def render(self) -> str | None:
        return self.current_game.render() if self.level is not None else "(no game yet)"
