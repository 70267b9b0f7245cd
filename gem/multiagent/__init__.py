"""``gem.multiagent``: gem-llm 0.1.0's path of GEM's multi-agent base classes (later GEM moved them to
:mod:`gem.envs.multiagent`); both paths name the same classes."""

from gem.envs.multiagent.multi_agent_env import AgentSelector, MultiAgentEnv

__all__ = ["AgentSelector", "MultiAgentEnv"]
