"""Play every seat of a multi-agent game at once: one token trajectory per seat.

Each seat is a :class:`gem_core.multi_agent.SeatEnv` played by :func:`run_episode`, so a seat's
trajectory has the same guarantees as a single-agent one (sampled ids verbatim, env tokens masked,
its own per-turn rewards). One policy can play every seat (self-play) or each seat its own.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

from gem_core.errors import InvalidArgument
from gem_core.multi_agent import MultiAgentEnv, seat_envs
from gem_core.rollout.policy import Policy
from gem_core.rollout.policy_version import episode_counting_batcher
from gem_core.rollout.runner import run_episode
from gem_core.rollout.trajectory import TokenTrajectory

__all__ = ["run_self_play"]


def _per_seat(value: Any, agent: str, what: str) -> Any:
    if isinstance(value, Mapping):
        if agent not in value:
            raise InvalidArgument(f"No {what} for seat {agent!r}; give one per agent ({', '.join(map(repr, value))} given) or one for all.")
        return value[agent]
    return value


def _refuse_lockstep(agent: str, policy: Any) -> None:
    """Refuse a batching policy built with ``num_episodes``: its rounds wait until every live episode asks for a turn,
    but a seat whose turn it is not waits for the other seats' moves, not for the policy, so neither would go on."""
    batching = episode_counting_batcher(policy)
    if batching is not None:
        raise InvalidArgument(
            f"The policy of seat {agent!r} is a {type(batching).__name__} built with num_episodes={batching.live}: each of its "
            "rounds waits until every episode asks for a turn, but a seat whose turn it is not waits for the other seats' "
            "moves, so the game would never go on. Build it with num_episodes=None (a round at every event-loop tick) for "
            "run_self_play."
        )


async def run_self_play(
    env: MultiAgentEnv,
    policies: Policy | Mapping[str, Policy],
    tokenizers: Any | Mapping[str, Any],
    *,
    seed: int | None = None,
    env_id: str | None = None,
    **run_episode_kwargs: Any,
) -> dict[str, TokenTrajectory]:
    """One game of ``env``; returns ``{agent: trajectory}``.

    ``policies``/``tokenizers``: one for every seat, or a mapping agent -> policy/tokenizer.
    ``run_episode_kwargs`` (``max_turns``, ``sampling``, ``system_prompt``, ...) apply to each seat.
    A seat that stops early (its turn or token limit) ends the game for all seats, truncated; a policy
    that raises abandons the game and the error is raised here. A policy with ``episode_finished`` is told when
    each seat's episode ends, as :func:`~gem_core.rollout.runner.run_episodes` tells it.

    Raises:
        InvalidArgument: a seat has no policy or tokenizer, or its policy is a
            :class:`~gem_core.rollout.policy.BatchingPolicy` built with ``num_episodes`` (its rounds would wait for
            a seat that waits for the other seats' moves).
    """
    players = {agent: (_per_seat(policies, agent, "policy"), _per_seat(tokenizers, agent, "tokenizer")) for agent in env.agents}
    for agent, (policy, _) in players.items():
        _refuse_lockstep(agent, policy)
    seats = seat_envs(env)
    table = next(iter(seats.values())).table

    async def play(agent: str) -> TokenTrajectory:
        try:
            return await run_episode(
                seats[agent],
                *players[agent],
                seed=seed,
                env_id=f"{env_id}#{agent}" if env_id else agent,
                **run_episode_kwargs,
            )
        except BaseException as exc:
            await table.fail(exc)
            raise
        finally:
            finished = getattr(players[agent][0], "episode_finished", None)
            if finished is not None:  # this seat asks for nothing more (told before an await a cancel could cut short)
                finished()
            await table.leave(agent)

    results = await asyncio.gather(*(play(agent) for agent in seats), return_exceptions=True)
    played: dict[str, TokenTrajectory] = {}
    for agent, result in zip(seats, results, strict=True):
        if isinstance(result, BaseException):
            raise result
        played[agent] = result
    return played
