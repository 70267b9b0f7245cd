"""Wrappers for GEM envs. Each is a :class:`gymnasium.Wrapper` that also keeps ``astep``/``areset``
and ``sample_random_action`` (see :class:`gem_core.wrappers.core.Wrapper`)."""

from gem_core.wrappers.core import Wrapper
from gem_core.wrappers.episode_statistics import EpisodeStatistics
from gem_core.wrappers.judged import Judged
from gem_core.wrappers.observation import ObservationFormat
from gem_core.wrappers.tools import ToolRewards, ToolUse
from gem_core.wrappers.turn_limit import TurnLimit

__all__ = ["Wrapper", "EpisodeStatistics", "Judged", "ObservationFormat", "ToolRewards", "ToolUse", "TurnLimit"]
