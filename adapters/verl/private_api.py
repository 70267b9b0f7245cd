"""Every private name of verl this adapter relies on, checked against verl 0.9.1.

The adapter calls none of them; it relies on what they do with the objects it returns (see
:mod:`gem_adapters.verl.agent_loop` and :mod:`gem_adapters.verl.reward_extra_info`).
``tests/adapters/verl/test_verl_private_api.py`` imports each from the installed verl and fails, naming the
name, the version checked and what to do, when a release removed it or changed its signature or body.
"""

from __future__ import annotations

from gem_adapters.private_api import PrivateName

__all__ = ["PRIVATE_API", "CHECKED_VERL", "FRAMEWORK_MODULES"]

FRAMEWORK_MODULES = ("verl",)
"""The framework's top-level modules: a name imported from them that starts with ``_`` must be listed in :data:`PRIVATE_API`."""

CHECKED_VERL = "0.9.1"
"""The verl version every entry of :data:`PRIVATE_API` was last read against."""

PRIVATE_API: tuple[PrivateName, ...] = (
    PrivateName(
        "verl.trainer.ppo.v1.agent_loop_tq.AgentLoopWorkerTQ._agent_loop_postprocess", "adapters/verl/agent_loop.py",
        "relies on",
        "verl's default trainer (use_v1=True) builds rm_scores from GemAgentLoopOutput.as_dict there, which puts each "
        "turn's reward on that turn's last sampled token (per-turn credit).",
        "verl", CHECKED_VERL, params=("self", "output", "validate"), source_has=("as_dict",),
    ),
    PrivateName(
        "verl.experimental.agent_loop.agent_loop.AgentLoopWorker._postprocess", "adapters/verl/reward_extra_info.py",
        "relies on",
        "the legacy trainer (use_v1=False) takes reward_extra_info's keys from a chunk's first row, so every GEM row "
        "carries exactly legacy_reward_extra_keys.",
        "verl", CHECKED_VERL, params=("self", "inputs"), source_has=("reward_extra_info",),
    ),
)
"""Every private name of verl the adapter uses: where, how (relies on), why, and what is checked."""
