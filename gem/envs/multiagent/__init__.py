"""``gem.envs.multiagent``: GEM's multi-agent base class, at GEM's module path (its examples import it here)."""

from gem.envs.multiagent.multi_agent_env import AgentSelector, MultiAgentEnv

__all__ = ["AgentSelector", "MultiAgentEnv"]
