"""Episodes to token trajectories: the episode loop, chat-template deltas, returns and advantages.

- :mod:`~gem_core.rollout.policy`: :class:`Policy` (drive mode), :class:`SamplingParams`,
  :class:`Generation`, :class:`TransformersPolicy`.
- :mod:`~gem_core.rollout.chat_template`: :class:`ChatTemplate`, token deltas from the tokenizer's own
  template (history is never decoded and re-encoded).
- :mod:`~gem_core.rollout.session`: :class:`EpisodeSession` (driven mode).
- :mod:`~gem_core.rollout.options`: :class:`EpisodeOptions`, an episode's options checked once (``options=``).
- :mod:`~gem_core.rollout.runner`: :func:`run_episode`, :func:`run_episodes`, :func:`run_labels` (drive mode).
- :mod:`~gem_core.rollout.policy_version`: :class:`VersionedPolicy`, a policy whose tokens record its version.
- :mod:`~gem_core.rollout.async_engine`: :class:`AsyncEpisodeEngine`, off-policy rollouts within a staleness bound.
- :mod:`~gem_core.rollout.trajectory`: :class:`TokenTrajectory` and its two training views.
- :mod:`~gem_core.rollout.advantages`: discounted returns, ReBN, GRPO, turn-level GAE.
- :mod:`~gem_core.rollout.metrics`: :func:`trajectory_metrics`, the batch statistics adapters log.

Importing this package needs numpy only; torch and transformers are imported when a policy samples.
"""

from gem_core.rollout.advantages import (
    discounted_returns,
    grpo_advantages,
    return_batch_normalize,
    same_state_advantages,
    turn_level_gae,
    turn_returns_to_token_advantages,
    turn_to_token_advantages,
)
from gem_core.rollout.async_engine import AsyncEpisodeEngine, AsyncRolloutConfig
from gem_core.rollout.chat_template import HISTORY_MODES, ChatTemplate, ChatTemplateError
from gem_core.rollout.metrics import trajectory_metrics
from gem_core.rollout.options import EpisodeOptions
from gem_core.rollout.policy import Generation, Policy, SamplingParams, TransformersPolicy
from gem_core.rollout.policy_version import GenerationInterrupted, VersionedPolicy
from gem_core.rollout.runner import EnvFactory, run_branched_episode, run_episode, run_episodes, run_labels
from gem_core.rollout.session import EpisodeSession, SessionStep
from gem_core.rollout.trajectory import SequenceSample, TokenTrajectory, Transition

__all__ = [
    "HISTORY_MODES",
    "AsyncEpisodeEngine",
    "AsyncRolloutConfig",
    "GenerationInterrupted",
    "VersionedPolicy",
    "ChatTemplate",
    "ChatTemplateError",
    "run_branched_episode",
    "same_state_advantages",
    "EnvFactory",
    "EpisodeOptions",
    "EpisodeSession",
    "Generation",
    "Policy",
    "SamplingParams",
    "SequenceSample",
    "SessionStep",
    "TokenTrajectory",
    "Transition",
    "TransformersPolicy",
    "discounted_returns",
    "grpo_advantages",
    "return_batch_normalize",
    "trajectory_metrics",
    "run_episode",
    "run_episodes",
    "run_labels",
    "turn_level_gae",
    "turn_returns_to_token_advantages",
    "turn_to_token_advantages",
]
