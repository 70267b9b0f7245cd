"""``gem.envs.multiagent``: GEM's multi-agent base class and agent selector at GEM's module path (GEM's
tau-bench example subclasses them), with GEM's turn order, bookkeeping and errors."""

from __future__ import annotations

import pytest


def _env(mode: str):
    from gem.envs.multiagent import MultiAgentEnv
    from gem.envs.multiagent.multi_agent_env import AgentSelector

    class Room(MultiAgentEnv):
        def __init__(self) -> None:
            super().__init__()
            self.possible_agents = ["a", "b", "c"]
            self.agent_selector = AgentSelector(self.possible_agents, mode=mode)

        def observe(self, agent: str) -> str:
            return f"hi {agent}"

        def _process_actions(self, actions):
            rewards = {agent: 1.0 if action == "good" else 0.0 for agent, action in actions.items()}
            for agent, action in actions.items():
                if action == "exit":
                    self.terminations[agent] = True
            return {a: self.observe(a) for a in actions}, rewards, self.terminations, self.truncations, self.infos

    return Room()


def test_sequential_turns_rotate_and_rewards_add_up() -> None:
    env = _env("sequential")
    observations, _ = env.reset()
    assert observations == {"a": "hi a", "b": "hi b", "c": "hi c"}
    assert env.agent_selector.get_active_agents() == ["a"]
    env.step({"a": "good"})
    assert env.agent_selector.get_active_agents() == ["b"]
    env.step({"b": "meh"})
    env.step({"c": "good"})
    env.step({"a": "good"})
    assert env._cumulative_rewards == {"a": 2.0, "b": 0.0, "c": 1.0}
    assert env.get_state("a") == ("hi a", 2.0, False, False, {})


def test_a_finished_agent_leaves_and_the_turn_passes_on() -> None:
    env = _env("parallel")
    env.reset()
    env.step({"a": "exit", "b": "x", "c": "x"})
    assert env.agents == ["b", "c"]
    assert set(env.get_active_states()) == {"b", "c"}


def test_mistakes_are_value_errors_naming_the_agent() -> None:
    from gem_core.errors import GemError

    env = _env("parallel")
    env.reset()
    with pytest.raises(ValueError, match="Missing action for active agent b"):
        env.step({"a": "x", "c": "x"})
    with pytest.raises(ValueError, match="dict"):
        env.step(["x"])
    with pytest.raises(GemError, match="zed"):
        env.send_message("a", "zed", "hello")
    env.broadcast_message("a", "hello")
    assert env.shared_memory == [{"from": "a", "to": "b", "message": "hello"}, {"from": "a", "to": "c", "message": "hello"}]
    from gem.envs.multiagent.multi_agent_env import AgentSelector

    with pytest.raises(ValueError, match="mode"):
        AgentSelector(["a"], mode="diagonal").get_active_agents()
