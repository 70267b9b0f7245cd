"""GEM for verl: an agent loop that plays GEM env episodes, a dataset builder, and a per-turn ReBN estimator.

- :class:`gem_adapters.verl.agent_loop.GemAgentLoop`: verl ``AgentLoopBase`` subclass (enable it through
  ``actor_rollout_ref.rollout.agent.agent_loop_config_path``; see ``README.md`` here);
- :func:`make_dataset` (rows) and ``python -m gem_adapters.verl`` (parquet): what verl's
  ``RLHFDataset`` reads;
- ``python -m gem_adapters.verl.config > gem_agent_loop.yaml``: the agent-loop config, shipped in the package;
- :mod:`gem_adapters.verl.advantage`: ``algorithm.adv_estimator=gem_rebn``.

The agent loop and estimator are imported lazily: ``make_dataset`` runs without importing verl's agent-loop stack.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from gem_adapters.framework_version import VerlVersionError, check_verl_version
from gem_adapters.verl.make_dataset import make_dataset  # the function; `python -m gem_adapters.verl` is its CLI

if TYPE_CHECKING:  # loaded by __getattr__ on first use; declared for type checkers and the API reference
    from gem_adapters.verl.advantage import ESTIMATOR_NAME, compute_rebn_advantage
    from gem_adapters.verl.agent_loop import GemAgentLoop, GemAgentLoopOutput, ServerManagerPolicy

__all__ = ["make_dataset", "GemAgentLoop", "GemAgentLoopOutput", "ServerManagerPolicy", "ESTIMATOR_NAME", "compute_rebn_advantage",
           "VerlVersionError", "check_verl_version"]

_LOCATIONS = {
    "GemAgentLoop": "agent_loop",
    "GemAgentLoopOutput": "agent_loop",
    "ServerManagerPolicy": "agent_loop",
    "ESTIMATOR_NAME": "advantage",
    "compute_rebn_advantage": "advantage",
}


def __getattr__(name: str) -> Any:
    if name in _LOCATIONS:
        return getattr(importlib.import_module(f"{__name__}.{_LOCATIONS[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
