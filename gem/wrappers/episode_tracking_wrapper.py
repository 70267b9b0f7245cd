"""``gem.wrappers.episode_tracking_wrapper.EpisodeTrackingWrapper``: the core's
:class:`~gem_core.wrappers.EpisodeStatistics` (gymnasium's ``info["episode"]`` at the end of an episode)
plus GEM's per-step keys: ``info["step_counter"]`` and ``info["cumulative_rewards"]`` on every step, and
the previous episode's as ``prev_ep_step_counter``/``prev_ep_cumulative_rewards`` on reset."""

from __future__ import annotations

from typing import Any

from gem.core import ForwardPublicAttributes
from gem_core.env import StepResult
from gem_core.wrappers.episode_statistics import EpisodeStatistics

__all__ = ["EpisodeTrackingWrapper"]


class EpisodeTrackingWrapper(ForwardPublicAttributes, EpisodeStatistics):
    """Counts steps and rewards; use it outermost, as in GEM.

    Args:
        env: The env (or wrapper) to count.
    """

    def __init__(self, env: Any):
        super().__init__(env)
        self.step_counter = 0
        self.cumulative_rewards = 0.0

    def reset(self, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
        """Start an episode and zero the counters.

        Returns:
            The env's first observation, and its ``info`` with ``step_counter`` and ``cumulative_rewards`` (0) and
            the ended episode's ``prev_ep_step_counter`` and ``prev_ep_cumulative_rewards``.
        """
        previous = {"prev_ep_step_counter": self.step_counter, "prev_ep_cumulative_rewards": self.cumulative_rewards}
        observation, info = super().reset(seed=seed, options=options)
        self.step_counter, self.cumulative_rewards = 0, 0.0
        return observation, {**info, **previous, "step_counter": 0, "cumulative_rewards": 0.0}

    def step(self, action: str) -> StepResult:
        """Step the env and count the step and its reward.

        Returns:
            The env's ``(observation, reward, terminated, truncated, info)``, ``info`` with this episode's
            ``step_counter`` and ``cumulative_rewards`` so far (and gymnasium's ``episode`` once it ends).
        """
        observation, reward, terminated, truncated, info = super().step(action)
        self.step_counter += 1
        self.cumulative_rewards += float(reward)
        info = {**info, "step_counter": self.step_counter, "cumulative_rewards": self.cumulative_rewards}
        return observation, reward, terminated, truncated, info
