"""The contract of environments with several agents (seats), and the per-seat view the runner plays.

A :class:`MultiAgentEnv` is a ``gymnasium.Env`` whose observations, rewards and end flags are dicts
keyed by agent name, in the spirit of PettingZoo's parallel API but for text: ``reset`` returns the
observations of the agents that must act first, and ``step`` takes one action from each agent that
must act now (:meth:`MultiAgentEnv.acting_agents`): one agent for turn-based games, all of them for
simultaneous moves. Rewards go to any agent at any step (the loser of a board game learns it when the
winner moves).

Training needs one token trajectory per seat, and the episode runner already plays one single-agent
env token-exactly. :class:`SeatEnv` turns one seat of a shared game into such an env: its ``astep``
submits the seat's action and returns when that seat must act again (or the game is over), with the
rewards the seat earned in between. :func:`gem_core.rollout.self_play.run_self_play` plays every seat
of one game concurrently, one :class:`~gem_core.rollout.session.EpisodeSession` per seat.
"""

from __future__ import annotations

import asyncio
import heapq
import reprlib
from collections.abc import Mapping
from typing import Any

import gymnasium as gym

from gem_core.env import Env, StateSnapshots, StepResult, TextSpace, check_seed
from gem_core.errors import InvalidArgument, InvalidArgumentType, UsageError

__all__ = ["MultiAgentEnv", "MultiStepResult", "SeatEnv", "seat_envs"]

MultiStepResult = tuple[dict[str, str], dict[str, float], dict[str, bool], dict[str, bool], dict[str, dict[str, Any]]]
"""``(observations, rewards, terminations, truncations, infos)``, each keyed by agent name."""


class MultiAgentEnv(StateSnapshots, gym.Env):
    """A text game for several named agents. Subclasses set :attr:`agents` and implement
    :meth:`reset`, :meth:`step`, :meth:`acting_agents` and :meth:`sample_random_action`.

    ``step`` must accept exactly the acting agents' actions; a malformed action is answered like in
    :class:`gem_core.Env`: an observation saying what was expected and the format penalty for that
    agent, never an exception. ``terminations``/``truncations`` hold every agent when the game ends.
    """

    metadata: dict[str, Any] = {"render_modes": ["ansi"]}
    observation_space = TextSpace()
    action_space = TextSpace()
    agents: tuple[str, ...] = ()
    format_penalty: float = -0.1

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[dict[str, str], dict[str, dict[str, Any]]]:
        """Start a game; returns the first observations (of the agents that act first, at least).

        Raises:
            InvalidArgument: if ``seed`` is not None or a whole number from 0 to :data:`~gem_core.env.MAX_SEED`.
        """
        super().reset(seed=check_seed(seed), options=options)
        return {}, {}

    def acting_agents(self) -> tuple[str, ...]:
        """The agents whose action the next :meth:`step` needs (empty once the game is over)."""
        raise NotImplementedError

    def step(self, actions: Mapping[str, str]) -> MultiStepResult:  # type: ignore[override]
        """Step the game with the acting agents' actions.

        Args:
            actions: ``{agent: action}`` for exactly the agents :meth:`acting_agents` names.

        Returns:
            ``(observations, rewards, terminations, truncations, infos)``, each keyed by agent name.
        """
        raise NotImplementedError

    def sample_random_action(self, agent: str) -> str:
        """A well-formed action for ``agent`` drawn from :attr:`np_random`."""
        raise NotImplementedError

    def check_actions(self, actions: Any) -> None:
        """Raise unless ``actions`` is a dict holding exactly the acting agents' actions: a caller's bug
        (a bare action string, a move out of turn), unlike a malformed action, which is an observation.

        Raises:
            InvalidArgument: if the dict does not hold exactly the acting agents' actions.
            InvalidArgumentType: if ``actions`` is not a dict.
        """
        acting = self.acting_agents()
        call = "step({" + ", ".join(f"{agent!r}: action" for agent in acting) + "})"
        if not isinstance(actions, Mapping):
            shown = reprlib.repr(actions)
            example = call.replace("action", shown, 1) if isinstance(actions, str) and len(acting) == 1 else call
            raise InvalidArgumentType(f"step() takes a dict of the acting agents' actions, got a {type(actions).__name__} ({shown}); call {example}.")
        if set(actions) != set(acting):
            who = " and ".join(repr(agent) for agent in acting)
            raise InvalidArgument(f"It is the move of {who}; step() needs exactly {call[5:-1]}, got {_some_keys(actions)}.")

    def render(self) -> str | None:
        """A text view of the game, or None (the default: nothing to show)."""
        return None


def _some_keys(actions: Mapping[Any, Any], shown: int = 5) -> str:
    """The first ``shown`` keys of ``actions`` by repr, each shortened, and a count of the rest: a wrong dict
    may hold any number of keys of any size, and the error quoting it must stay readable."""
    keys = heapq.nsmallest(shown, actions, key=reprlib.repr)
    listed = ", ".join(reprlib.repr(key) for key in keys)
    more = len(actions) - len(keys)
    return f"[{listed}]" if more == 0 else f"[{listed}, ... and {more} more keys]"


class _Table:
    """The shared game behind the seats of one episode: collects the acting agents' actions, steps
    the game once all are in, and hands each seat what it has earned."""

    def __init__(self, env: MultiAgentEnv):
        self.env = env
        self.lock = asyncio.Lock()
        self.changed = asyncio.Condition(self.lock)
        self.started = False
        self.over = False
        self.pending: dict[str, str] = {}
        self.observations: dict[str, str] = {}
        self.rewards: dict[str, float] = {}
        self.infos: dict[str, dict[str, Any]] = {}
        self.ended: dict[str, tuple[bool, bool]] = {}
        self.error: BaseException | None = None

    async def reset(self, seed: int | None, options: dict[str, Any] | None) -> None:
        async with self.lock:
            if not self.started:
                self.started = True
                observations, infos = self.env.reset(seed=seed, options=options)
                self.observations.update(observations)
                self.infos.update(infos)
                self.changed.notify_all()

    async def wait_for_turn(self, agent: str) -> tuple[str, dict[str, Any], StepResult | None]:
        """``agent``'s first prompt and info, and None; or, when the game ended before that seat's first turn, its
        final observation and info and what it earned (:meth:`_earned`): it has no turn to play."""
        async with self.lock:
            await self.changed.wait_for(lambda: self.error is not None or self.over or agent in self._acting())
            self._raise_if_failed()
            if self.over:
                earned = self._earned(agent)
                return earned[0], earned[4], earned
            return self.observations.pop(agent, ""), self.infos.pop(agent, {}), None

    def _acting(self) -> tuple[str, ...]:
        return tuple(a for a in self.env.acting_agents() if a not in self.pending)

    def _raise_if_failed(self) -> None:
        if self.error is not None:
            raise UsageError("Another seat of this game failed; the game was abandoned.") from self.error

    def _earned(self, agent: str) -> StepResult:
        """What ``agent`` gets back now: the observation, rewards and info gathered since it last acted."""
        observation = self.observations.pop(agent, "")
        reward = self.rewards.pop(agent, 0.0)
        info = self.infos.pop(agent, {})
        if not self.over:
            return observation, reward, False, False, info
        terminated, truncated = self.ended.get(agent, (True, False))
        return observation or "The game is over.", reward, terminated, truncated, info

    async def act(self, agent: str, action: str) -> StepResult:
        async with self.lock:
            self._raise_if_failed()
            if self.over:  # the game ended while this seat was being asked for its move
                return self._earned(agent)
            if agent not in self.env.acting_agents():
                raise UsageError(f"Seat {agent!r} acted out of turn; the acting agents are {self.env.acting_agents()}.")
            self.pending[agent] = action
            if set(self.pending) >= set(self.env.acting_agents()):
                actions, self.pending = self.pending, {}
                observations, rewards, terminations, truncations, infos = self.env.step(actions)
                for name, text in observations.items():  # a seat may hear several things before it acts
                    self.observations[name] = f"{self.observations[name]}\n{text}" if self.observations.get(name) else text
                for name, value in rewards.items():
                    self.rewards[name] = self.rewards.get(name, 0.0) + float(value)
                for name, info in infos.items():
                    self.infos.setdefault(name, {}).update(info)
                if any(terminations.values()) or any(truncations.values()) or not self.env.acting_agents():
                    self.over = True
                    self.ended = {a: (bool(terminations.get(a)), bool(truncations.get(a))) for a in self.env.agents}
                self.changed.notify_all()
            await self.changed.wait_for(lambda: self.error is not None or self.over or agent in self._acting())
            self._raise_if_failed()
            return self._earned(agent)

    async def leave(self, agent: str) -> None:
        """``agent`` stopped playing (its session hit a turn or token limit): the game cannot go on, so it
        ends truncated for every seat still waiting."""
        async with self.lock:
            if not self.over:
                self.over = True
                self.ended = {a: (False, True) for a in self.env.agents}
                for other in self.env.agents:
                    if other != agent:
                        self.infos.setdefault(other, {})["truncated_by"] = f"seat {agent!r} stopped"
                self.changed.notify_all()

    async def fail(self, error: BaseException) -> None:
        async with self.lock:
            if self.error is None:  # the first error is the cause; the seats it woke raise "another seat failed" after it
                self.error = error
            self.changed.notify_all()


class SeatEnv(Env):
    """One agent's view of a shared :class:`MultiAgentEnv`, as a single-agent async env.

    Only the async methods work (a seat waits for the other seats, which only an event loop can
    interleave); all seats of one game must be played in the same event loop.

    Args:
        table: the shared game of this episode (one per game, made by :func:`seat_envs`).
        agent: the seat this env plays.
    """

    blocking = False

    def __init__(self, table: _Table, agent: str):
        self.table = table
        self.agent = agent
        self.ended_before_turn: StepResult | None = None
        """Set by :meth:`areset` when the game ended before this seat's first turn: what the seat earned then
        (observation, reward, terminated, truncated, info). Such a seat has no turn to play."""

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        raise UsageError("A seat of a multi-agent game is played with `await seat.areset(...)` (see run_self_play).")

    def step(self, action: str) -> StepResult:
        raise UsageError("A seat of a multi-agent game is played with `await seat.astep(...)` (see run_self_play).")

    async def areset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
        """Start the game (once for all seats) and wait for this seat's first turn.

        If the game ends before that turn (the other seat forfeited), the seat has nothing to play: the final
        observation comes back with ``info["ended_before_turn"]`` True and the seat's ``info["final_reward"]``,
        ``"terminated"`` and ``"truncated"``, also kept in :attr:`ended_before_turn`; a caller must not step.

        Raises:
            UsageError: another seat of the game failed (its error is the cause).
        """
        await self.table.reset(seed, options)
        observation, info, earned = await self.table.wait_for_turn(self.agent)
        self.ended_before_turn = earned
        if earned is not None:
            info = {**info, "ended_before_turn": True, "final_reward": earned[1], "terminated": earned[2], "truncated": earned[3]}
        return observation, info

    async def astep(self, action: str) -> StepResult:
        return await self.table.act(self.agent, action)

    def sample_random_action(self) -> str:
        return self.table.env.sample_random_action(self.agent)


def seat_envs(env: MultiAgentEnv) -> dict[str, SeatEnv]:
    """One :class:`SeatEnv` per agent of ``env``, sharing one game (create them inside the event loop)."""
    table = _Table(env)
    return {agent: SeatEnv(table, agent) for agent in env.agents}
