"""GEM's multi-agent env API: a subclass names ``possible_agents``, implements ``observe(agent)`` and
``_process_actions(actions)``, and may set an :class:`AgentSelector` that says whose turn it is.

This is GEM's interface (dict-of-actions ``step``, per-agent ``terminations``/``truncations``/``infos``,
cumulative rewards, agents leaving when done, a shared message board), kept as GEM defines it so GEM's
multi-agent code runs unchanged. It is separate from :class:`gem_core.multi_agent.MultiAgentEnv`, the
core's contract for self-play training, whose ``step`` and turn rules differ.

Unlike GEM's, the class is not a ``gem.Env``: that is the core's single-agent env, whose step guard reads
the (always truthy) dict of terminations as "the episode is over" and whose ``get_state()`` means a
snapshot, not an agent's state.
"""

from __future__ import annotations

import abc
from typing import Any

import numpy as np

from gem_core.errors import GemError

__all__ = ["AgentSelector", "MultiAgentEnv", "MultiAgentError"]

MultiStepResult = tuple[dict[str, str], dict[str, float], dict[str, bool], dict[str, bool], dict[str, dict]]


class MultiAgentError(GemError, ValueError):
    """A multi-agent call names an agent that is not there or not acting, or passes no dict of actions
    (a ``ValueError``, as GEM raises)."""


class MultiAgentEnv(abc.ABC):
    """The base of GEM's multi-agent envs; ``step`` takes ``{agent: action}`` for the acting agents."""

    def __init__(self) -> None:
        self.np_random = np.random.default_rng()
        self.possible_agents: list[str] = []
        self.agents: list[str] = []
        self.terminations: dict[str, bool] = {}
        self.truncations: dict[str, bool] = {}
        self.rewards: dict[str, float] = {}
        self.infos: dict[str, dict] = {}
        self._cumulative_rewards: dict[str, float] = {}
        self.agent_selector: AgentSelector | None = None
        self.shared_memory: list[dict[str, str]] = []
        self.global_context = ""

    def _acting(self) -> list[str]:
        return self.agent_selector.get_active_agents() if self.agent_selector else self.agents

    def step(self, actions: dict[str, str]) -> MultiStepResult:  # type: ignore[override]
        """Apply the acting agents' actions, add up rewards, drop finished agents, pass the turn on.

        Args:
            actions: ``{agent: action}`` for every acting agent that is not done (and no other agent).

        Returns:
            ``(observations, rewards, terminations, truncations, infos)``, each a dict by agent, as the game's
            ``_process_actions`` gives them; an agent terminated or truncated here has left :attr:`agents`.

        Raises:
            MultiAgentError: ``actions`` is not a dict, an acting agent has no action, or an agent that is not
                acting gave one.
        """
        if not isinstance(actions, dict):
            raise MultiAgentError(f"Actions must be a dict, got {type(actions)}: pass {{agent: action}} for the acting agents")
        self._validate_actions(actions, self._acting())
        observations, rewards, terminations, truncations, infos = self._process_actions(actions)
        for agent in self.agents:
            if agent in rewards:
                self._cumulative_rewards[agent] = self._cumulative_rewards.get(agent, 0.0) + rewards[agent]
        self._remove_dead_agents()
        if self.agent_selector:
            self.agent_selector.next()
        return observations, rewards, terminations, truncations, infos

    def _validate_actions(self, actions: dict[str, str], active_agents: list[str]) -> None:
        # An acting agent that is already done (or unknown to the flags) owes no action, as in GEM.
        for agent in active_agents:
            if self.terminations.get(agent, True) or self.truncations.get(agent, True):
                continue
            if agent not in actions:
                raise MultiAgentError(f"Missing action for active agent {agent}")
        for agent in actions:
            if agent not in active_agents:
                raise MultiAgentError(f"Agent {agent} provided action but is not active (acting now: {active_agents})")

    @abc.abstractmethod
    def _process_actions(self, actions: dict[str, str]) -> MultiStepResult:
        """The game's rules: answer the actions, set :attr:`terminations`/:attr:`truncations`."""

    @abc.abstractmethod
    def observe(self, agent: str) -> str:
        """What ``agent`` sees now."""

    def reset(self, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[dict[str, str], dict[str, Any]]:  # type: ignore[override]
        """Bring every possible agent back, clear flags, rewards and messages; observations for all agents."""
        if seed is not None:
            # GEM 4069f2f calls a missing ``_make_np_random`` here (an AttributeError for any seed); this
            # seeds the env's own generator, as the core's envs do.
            self.np_random = np.random.default_rng(seed)
        self.agents = self.possible_agents.copy()
        self.terminations = {agent: False for agent in self.agents}
        self.truncations = {agent: False for agent in self.agents}
        self.rewards = {agent: 0.0 for agent in self.agents}
        self.infos = {agent: {} for agent in self.agents}
        self._cumulative_rewards = {agent: 0.0 for agent in self.agents}
        self.shared_memory = []
        self.global_context = ""
        if self.agent_selector:
            self.agent_selector.reinit(self.agents)
        return {agent: self.observe(agent) for agent in self.agents}, {agent: {} for agent in self.agents}

    def sample_random_action(self) -> str:
        """A random action, for games that define one.

        Raises:
            NotImplementedError: The game defines none (the base class's default).
        """
        raise NotImplementedError

    @property
    def unwrapped(self) -> MultiAgentEnv:
        """The env itself (a multi-agent env is never wrapped), as gymnasium's ``unwrapped``."""
        return self

    def get_state(self, agent: str) -> tuple[str, float, bool, bool, dict]:
        """``(observation, cumulative reward, terminated, truncated, info)`` of ``agent``.

        Raises:
            MultiAgentError: ``agent`` is not in the env (never added, or gone since it finished).
        """
        if agent not in self.agents:
            raise MultiAgentError(f"Agent {agent} not in environment (agents: {self.agents})")
        return (
            self.observe(agent),
            self._cumulative_rewards.get(agent, 0.0),
            self.terminations.get(agent, False),
            self.truncations.get(agent, False),
            self.infos.get(agent, {}),
        )

    def get_active_states(self) -> dict[str, tuple[str, float, bool, bool, dict]]:
        """:meth:`get_state` of each agent whose turn it is, by agent."""
        return {agent: self.get_state(agent) for agent in self._acting() if agent in self.agents}

    def add_agent(self, agent_id: str) -> None:
        """Let ``agent_id`` join mid-episode, with fresh flags and zero reward (nothing if it is already in)."""
        if agent_id in self.agents:
            return
        self.agents.append(agent_id)
        self.terminations[agent_id] = self.truncations[agent_id] = False
        self.rewards[agent_id] = self._cumulative_rewards[agent_id] = 0.0
        self.infos[agent_id] = {}
        if self.agent_selector:
            self.agent_selector.add_agent(agent_id)

    def remove_agent(self, agent_id: str) -> None:
        """Take ``agent_id`` out of the episode with its flags and rewards (nothing if it is not in)."""
        if agent_id not in self.agents:
            return
        self.agents.remove(agent_id)
        for table in (self.terminations, self.truncations, self.rewards, self.infos, self._cumulative_rewards):
            del table[agent_id]
        if self.agent_selector:
            self.agent_selector.remove_agent(agent_id)

    def _remove_dead_agents(self) -> None:
        for agent in [a for a in self.agents if self.terminations.get(a, False) or self.truncations.get(a, False)]:
            self.remove_agent(agent)

    def send_message(self, from_agent: str, to_agent: str, message: str) -> None:
        """Post ``message`` from one agent to another on the shared board (:attr:`shared_memory`).

        Raises:
            MultiAgentError: The sender or the receiver is not in the env.
        """
        for role, agent in (("Sender", from_agent), ("Receiver", to_agent)):
            if agent not in self.agents:
                raise MultiAgentError(f"{role} {agent} not in environment (agents: {self.agents})")
        self.shared_memory.append({"from": from_agent, "to": to_agent, "message": message})

    def broadcast_message(self, from_agent: str, message: str) -> None:
        """Post ``message`` from ``from_agent`` to every other agent on the shared board.

        Raises:
            MultiAgentError: The sender is not in the env.
        """
        if from_agent not in self.agents:
            raise MultiAgentError(f"Sender {from_agent} not in environment (agents: {self.agents})")
        self.shared_memory.extend({"from": from_agent, "to": a, "message": message} for a in self.agents if a != from_agent)


class AgentSelector:
    """Whose turn it is: one agent at a time in order (``sequential``) or every agent (``parallel``).

    Args:
        agents: The agents in turn order; the first one acts first.
        mode: ``"sequential"`` or ``"parallel"`` (any other fails in :meth:`get_active_agents`, as in GEM).
    """

    _current_idx: int  # set by reinit()
    selected: str | None

    def __init__(self, agents: list[str], mode: str = "sequential") -> None:
        self.mode = mode
        self.reinit(agents)

    def get_active_agents(self) -> list[str]:
        """The agents to act now: the selected one (sequential) or all of them (parallel).

        Raises:
            MultiAgentError: ``mode`` is neither ``"sequential"`` nor ``"parallel"``.
        """
        if self.mode == "sequential":
            return [self.selected] if self.selected else []
        if self.mode == "parallel":
            return self._agents.copy()
        raise MultiAgentError(f"Unknown mode: {self.mode!r}: AgentSelector's mode is 'sequential' or 'parallel'")

    def next(self) -> None:
        """Pass the turn to the next agent, wrapping around (parallel mode: nothing changes)."""
        if self.mode == "sequential" and self._agents:
            self._current_idx = (self._current_idx + 1) % len(self._agents)
            self.selected = self._agents[self._current_idx]

    def is_first(self) -> bool:
        """Whether the first agent in turn order is to act."""
        return self._current_idx == 0

    def is_last(self) -> bool:
        """Whether the last agent in turn order is to act."""
        return self._current_idx == len(self._agents) - 1

    def reinit(self, agents: list[str]) -> None:
        """Start over with ``agents`` in turn order, the first one to act (none when empty)."""
        self._agents = agents.copy()
        self._current_idx = 0
        self.selected = self._agents[0] if self._agents else None

    def add_agent(self, agent: str) -> None:
        """Append ``agent`` to the turn order (nothing if it is already there)."""
        if agent not in self._agents:
            self._agents.append(agent)

    def remove_agent(self, agent: str) -> None:
        """Drop ``agent``; the turn stays with whoever was to act after it (GEM's index arithmetic)."""
        if agent not in self._agents:
            return
        idx = self._agents.index(agent)
        self._agents.remove(agent)
        if not self._agents:
            self._current_idx, self.selected = 0, None
            return
        if idx <= self._current_idx:
            self._current_idx = max(0, self._current_idx - 1)
        self._current_idx %= len(self._agents)
        self.selected = self._agents[self._current_idx]
