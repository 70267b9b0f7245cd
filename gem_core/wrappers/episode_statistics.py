"""Report an episode's return, length and time in ``info["episode"]`` when it ends, as gymnasium does.

gymnasium's :class:`~gymnasium.wrappers.RecordEpisodeStatistics` does the bookkeeping (``r``, ``l``,
``t`` and the ``return_queue``/``length_queue``/``time_queue`` deques), so any gymnasium logger reads
these episodes. On top, a language agent is judged by ``success`` (:func:`gem_core.env.episode_success`,
the one definition) and ``format_errors`` (turns answered with a format penalty).

gymnasium's wrapper has no async path; the async methods hand it the inner env's awaited result to
book, so ``astep``/``areset`` give the same statistics without blocking the event loop.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
from gymnasium.wrappers import RecordEpisodeStatistics

from gem_core.env import StepResult, episode_success
from gem_core.errors import InvalidArgument
from gem_core.vector.calls import check_count
from gem_core.wrappers.core import Wrapper, check_wrapped_env

__all__ = ["EpisodeStatistics"]


class _Replay(Wrapper):
    """Below gymnasium's wrapper in the MRO: returns a result already awaited instead of calling the env."""

    _replay_step: StepResult | None = None
    _replay_reset: tuple[str, dict[str, Any]] | None = None

    def step(self, action: str) -> StepResult:
        if self._replay_step is not None:
            result, self._replay_step = self._replay_step, None
            return result
        return super().step(action)

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
        if self._replay_reset is not None:
            result, self._replay_reset = self._replay_reset, None
            return result
        return super().reset(seed=seed, options=options)


class EpisodeStatistics(RecordEpisodeStatistics, _Replay):
    """On the step that ends an episode, ``info["episode"]`` holds gymnasium's ``r`` (sum of rewards),
    ``l`` (turns) and ``t`` (seconds since reset), plus ``success`` and ``format_errors``.

    Args:
        env: the env to record.
        buffer_length: episodes kept in ``return_queue``/``length_queue``/``time_queue``.

    Raises:
        InvalidArgument: if ``env`` already records episode statistics, or ``buffer_length`` is not a whole number
            from 1 (gymnasium's own ValueError or a deque's TypeError named neither).
        InvalidArgumentType: if ``env`` is not an env (an env id: pass ``gem_core.make(id)``).
    """

    def __init__(self, env: gym.Env, buffer_length: int = 100):
        check_wrapped_env(type(self).__name__, env)  # RecordEpisodeStatistics calls gymnasium's __init__, not Wrapper's
        check_count("buffer_length", buffer_length)
        inner = env
        while isinstance(inner, gym.Wrapper):  # a second recorder would fail at the first episode's end
            if isinstance(inner, RecordEpisodeStatistics):
                raise InvalidArgument(f"{env} already records episode statistics ({type(inner).__name__}); wrap it once.")
            inner = inner.env
        RecordEpisodeStatistics.__init__(self, env, buffer_length=buffer_length)
        self.format_errors = 0

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
        """Reset the env and the episode's counters."""
        self.format_errors = 0
        return RecordEpisodeStatistics.reset(self, seed=seed, options=options)

    def step(self, action: str) -> StepResult:
        """Step the env; on the episode's last step ``info["episode"]`` holds its return, length, time and format errors."""
        observation, reward, terminated, truncated, info = RecordEpisodeStatistics.step(self, action)
        self.format_errors += bool(info.get("format_error"))
        if "episode" in info:
            stats = info["episode"]
            info = {
                **info,
                "episode": {
                    **stats,
                    "success": episode_success([info], float(stats["r"]), terminated),
                    "format_errors": self.format_errors,
                },
            }
        return observation, reward, terminated, truncated, info

    async def areset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
        """:meth:`reset` through the inner env's ``areset``."""
        self._replay_reset = await self.env.areset(seed=seed, options=options)
        return self.reset(seed=seed, options=options)

    async def astep(self, action: str) -> StepResult:
        """:meth:`step` through the inner env's ``astep``."""
        self._replay_step = await self.env.astep(action)
        return self.step(action)
