"""``gem.multiagent.multi_agent_env``: gem-llm 0.1.0's module path of :mod:`gem.envs.multiagent.multi_agent_env`."""

from gem.envs.multiagent.multi_agent_env import AgentSelector, MultiAgentEnv, MultiAgentError

__all__ = ["AgentSelector", "MultiAgentEnv", "MultiAgentError"]
