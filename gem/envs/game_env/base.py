"""The base of GEM's games under ``import gem``: GEM's reward constants and GEM's way of drawing secrets.

GEM (``axon-rl/gem``) seeds the process-wide ``random`` module in ``reset(seed)`` and draws every secret
from it. A game here draws from its own :class:`random.Random`, seeded with the same seed: Python's
module-level functions are methods of one hidden ``random.Random``, so the same seed gives the same
draws in the same order, hence the same secret, without touching other code's generator.
"""

from __future__ import annotations

import functools
import random
from typing import Any

import numpy as np

from gem.core import Env
from gem_core.env import check_seed

__all__ = ["GameEnv", "FORMAT_ERROR_REWARD", "INVALID_ACTION_REWARD", "INTERNAL_STEP_REWARD", "SUCCESS_REWARD", "FAIL_REWARD"]

# GEM's ``LanguageGameReward``: a legal-format illegal move and a lost game score 0, not a penalty.
SUCCESS_REWARD = 1.0
"""Reward of the move that wins the game."""
INTERNAL_STEP_REWARD = 0.0
"""Reward of a legal move that neither wins nor loses."""
FAIL_REWARD = 0.0
"""Reward of the move that loses the game (0, as in GEM: no penalty)."""
INVALID_ACTION_REWARD = 0.0
"""Reward of a well-formatted but illegal move (0, as in GEM: no penalty)."""
FORMAT_ERROR_REWARD = -0.1
"""Reward of an action the game cannot parse (no ``\\boxed{...}`` move); the episode ends."""


class GameEnv(Env):
    """A GEM game: ``rng`` (and ``np_rng``, for games that draw from numpy) is reseeded by ``reset(seed)``.

    A malformed action ends the episode (GEM's rule): ``terminated=True``, reward
    :data:`FORMAT_ERROR_REWARD`, ``truncated`` when that was the last turn. An action that is not a text (None
    from a failed generation, a number) is malformed too: each game's ``step`` sees it as an empty text.

    Raises:
        InvalidArgument: From ``__init__``/``reset``: ``seed`` is not None or a whole number from 0 up.
    """

    blocking = False  # pure-Python steps: the vector env calls them inline
    max_return = 1.0
    format_penalty = FORMAT_ERROR_REWARD
    terminate_on_format_error = True

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        step = cls.__dict__.get("step")
        if step is None:
            return

        # GEM's games parse the action with re and would raise a bare TypeError on a non-text one; a model's
        # malformed output must be an observation with the format penalty, so every game gets it as "".
        @functools.wraps(step)
        def step_on_text(self: GameEnv, action: Any) -> tuple[str, float, bool, bool, dict[str, Any]]:
            return step(self, action if isinstance(action, str) else "")

        cls.step = step_on_text  # type: ignore[method-assign]

    def __init__(self, seed: int | None = None) -> None:
        """``seed`` starts the stream of episodes drawn by ``reset()`` calls without a seed (numpy's integers
        are taken as the same int, so a seed drawn with numpy gives the same episodes)."""
        super().__init__()
        seed = check_seed(seed)
        self.rng = random.Random(seed)
        self.np_rng = np.random.RandomState(seed)

    def reset(self, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
        """Reseed :attr:`rng` and :attr:`np_rng` with ``seed`` (as GEM's ``set_seed`` does the global ones).

        Raises:
            InvalidArgument: ``seed`` is not None or a whole number from 0 up.
        """
        seed = check_seed(seed)
        super().reset(seed=seed, options=options)
        if seed is not None:
            self.rng.seed(seed)
            self.np_rng.seed(seed)
        return "", {}

    def format_error(self, observation: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        """GEM's answer to an action it cannot parse: the episode ends with the format penalty."""
        return observation, FORMAT_ERROR_REWARD, True, self.turn_count == self.max_turns, {"suffix": self.get_task_suffix()}

    def get_task_suffix(self) -> str:
        """The text GEM's observation wrappers append after the history (the board, where there is one).

        Raises:
            NotImplementedError: The game does not define it (each of GEM's games does).
        """
        raise NotImplementedError
