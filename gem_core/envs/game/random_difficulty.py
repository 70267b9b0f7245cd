"""The ``-random`` variant of a game: every episode is played at a difficulty drawn from the env's RNG.

Training on a mix of difficulties is a cheap curriculum. ``RandomDifficulty`` holds one game class
and its difficulty levels (the kwargs of its ``-easy``, ``-v0`` and ``-hard`` variants); ``reset``
draws a level and a seed for it from :attr:`np_random`, so the outer seed fixes both the level and
the puzzle. Everything else (``step``, ``render``, ``sample_random_action``, ``max_turns``) is the
drawn game's; :attr:`current_game` is that game.
"""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Mapping, Sequence
from typing import Any

from gem_core.env import Env, StepResult
from gem_core.errors import DependencyNotInstalled, InvalidArgument, InvalidArgumentType, ResetNeeded, did_you_mean


class RandomDifficulty(Env):
    blocking = False  # a quick pure-Python step: called inline, never via a thread

    def __init__(self, game: str, levels: Sequence[dict[str, Any]], max_turns: int | None = None):
        """``game`` is ``"package.module:Class"``; ``levels`` are constructor kwargs, one dict per level;
        ``max_turns`` (from ``make(id, max_turns=N)``) replaces every level's own limit.

        Every level is built here, not when a reset first draws it: a misspelt key or a value the game refuses
        in one level would otherwise fail at a random episode of a training run.

        Raises:
            InvalidArgument: if ``levels`` is not a non-empty list of dicts, ``game`` does not name a class
                that can be imported, or the game refuses a value of a level (named ``levels[i]``).
            DependencyNotInstalled: if ``game``'s module imports one that is not installed.
            InvalidArgumentType: if ``game`` is not a ``"package.module:Class"`` string naming an Env class, or a
                level has a keyword the game does not take (or lacks a required one).
        """
        listed = isinstance(levels, Sequence) and not isinstance(levels, (str, bytes))
        if not listed or not levels or not all(isinstance(level, Mapping) for level in levels):
            raise InvalidArgument(f"levels={levels!r:.80} must be a non-empty list of dicts, each the game's constructor kwargs for one level.")
        self.game_class = _game_class(game)
        self.levels = [dict(level) if max_turns is None else {**level, "max_turns": max_turns} for level in levels]
        self.max_return: float = getattr(self.game_class, "max_return", 1.0)
        self._games: dict[int, Env] = {i: _build_level(self.game_class, i, level) for i, level in enumerate(self.levels)}
        self.level: int | None = None

    @property
    def current_game(self) -> Env:
        if self.level is None:
            raise ResetNeeded("Call reset() before using the game.")
        return self._games[self.level]

    @property
    def max_turns(self) -> int:
        """The turn limit of the level being played (of the hardest level before the first reset)."""
        if self.level is None:  # the built games' own limits: a level may leave max_turns to the game's default
            return max(game.max_turns for game in self._games.values())
        return self.current_game.max_turns

    @property
    def format_penalty(self) -> float:  # type: ignore[override]
        return self.current_game.format_penalty if self.level is not None else Env.format_penalty

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
        super().reset(seed=seed)
        self.level = int(self.np_random.integers(len(self.levels)))
        obs, info = self.current_game.reset(seed=int(self.np_random.integers(2**31)), options=options)
        return obs, {**info, "level": self.level}

    def step(self, action: str) -> StepResult:
        return self.current_game.step(action)

    def sample_random_action(self) -> str:
        return self.current_game.sample_random_action()

    def render(self) -> str | None:
        return self.current_game.render() if self.level is not None else "(no game yet)"


def _game_class(game: Any) -> type[Env]:
    """The Env class ``game`` (``"package.module:Class"``) names.

    Raises:
        InvalidArgumentType: if ``game`` is not a str, or names something other than an Env class.
        InvalidArgument: if it is not ``module:Class``, or the module or class cannot be found.
        DependencyNotInstalled: if the module exists but imports one that is not installed.
    """
    if not isinstance(game, str):
        raise InvalidArgumentType(f"game={game!r:.60} must be a 'package.module:Class' string, got {type(game).__name__}.")
    module_name, _, class_name = game.partition(":")
    if not module_name or not class_name:
        raise InvalidArgument(f"game={game!r} must read 'package.module:Class' (e.g. 'gem_core.envs.game.wordle:Wordle').")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        missing = getattr(exc, "name", None)
        if isinstance(exc, ModuleNotFoundError) and missing and (module_name == missing or module_name.startswith(missing + ".")):
            raise InvalidArgument(f"game={game!r}: there is no module {module_name!r}; give 'package.module:Class'.") from None
        raise DependencyNotInstalled(f"game={game!r}: module {module_name!r} cannot be imported ({exc}); install what it needs.") from exc
    found = getattr(module, class_name, None)
    if found is None:
        raise InvalidArgument(f"game={game!r}: module {module_name!r} has no {class_name!r}{did_you_mean(class_name, dir(module))}.")
    if not (isinstance(found, type) and issubclass(found, Env)):
        raise InvalidArgumentType(f"game={game!r} names a {type(found).__name__}, not a gem_core.Env class.")
    return found


def _build_level(game_class: type[Env], index: int, level: dict[str, Any]) -> Env:
    """Level ``index`` of the game, its keywords checked against the game's signature first so a misspelt one is
    named with its level.

    Raises:
        InvalidArgumentType: if the level has a keyword the game does not take, or lacks a required one.
        InvalidArgument: if the game refuses one of the level's values.
    """
    try:
        inspect.signature(game_class).bind(**level)
    except TypeError as exc:
        takes = [name for name in inspect.signature(game_class).parameters if name != "self"]
        unknown = next((key for key in level if key not in takes), None)
        hint = did_you_mean(unknown, takes) if unknown is not None else ""
        raise InvalidArgumentType(
            f"levels[{index}] of {game_class.__name__}: {exc}{hint}; its keywords are {', '.join(takes)}."
        ) from None
    try:
        return game_class(**level)
    except (InvalidArgument, InvalidArgumentType) as exc:
        if type(exc) not in (InvalidArgument, InvalidArgumentType):
            raise  # a module's own error class: kept as it is
        raise type(exc)(f"levels[{index}] of {game_class.__name__}: {exc}") from exc
