"""GEM environments in OpenRLHF 0.11 through its multi-turn agent hook (``--train.agent_func_path``).

The label helpers import without OpenRLHF; the agent classes (``GemAgentExecutor``,
``GemAgentInstance``, ``AgentConfig``) load OpenRLHF on first access.
"""

from typing import TYPE_CHECKING

from gem_adapters.openrlhf.make_dataset import make_dataset  # the function; `python -m gem_adapters.openrlhf` is its CLI
from gem_core.rows.label import EpisodeLabel, LabelError, parse_label

if TYPE_CHECKING:  # loaded by __getattr__ on first use; declared for type checkers and the API reference
    from gem_adapters.openrlhf.agent import AgentConfig, GemAgentExecutor, GemAgentInstance, OpenRLHFVersionError

__all__ = ["AgentConfig", "EpisodeLabel", "GemAgentExecutor", "GemAgentInstance", "LabelError", "OpenRLHFVersionError", "make_dataset", "parse_label"]


def __getattr__(name: str):
    if name in ("AgentConfig", "GemAgentExecutor", "GemAgentInstance", "OpenRLHFVersionError"):
        from gem_adapters.openrlhf import agent

        return getattr(agent, name)
    raise AttributeError(f"module 'gem_adapters.openrlhf' has no attribute {name!r}")
