"""Play every seat of a multi-agent game at once: one token trajectory per seat.

Each seat is a :class:`gem_core.multi_agent.SeatEnv` played as :func:`~gem_core.rollout.runner.run_episode` plays an env, so a seat's
trajectory has the same guarantees as a single-agent one (sampled ids verbatim, env tokens masked,
its own per-turn rewards). One policy can play every seat (self-play) or each seat its own.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Mapping
from typing import Any

from gem_core.env import StepResult, episode_success
from gem_core.errors import InvalidArgument, InvalidArgumentType
from gem_core.multi_agent import MultiAgentEnv, seat_envs
from gem_core.rollout.policy import Policy
from gem_core.rollout.policy_version import episode_counting_batcher
from gem_core.rollout.runner import EpisodeArgumentError, _check_run_episode_kwargs, _play, _with_stop_tokens
from gem_core.rollout.session import EpisodeSession
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


def _check_kwargs(kwargs: dict[str, Any]) -> None:
    """Refuse a keyword run_episode does not take before any seat starts (run_episodes' check, named for this call)."""
    try:
        _check_run_episode_kwargs(kwargs)
    except EpisodeArgumentError as error:
        raise EpisodeArgumentError(str(error).replace("run_episodes", "run_self_play")) from None


def _unplayed(trajectory: TokenTrajectory, earned: StepResult) -> TokenTrajectory:
    """The zero-turn trajectory of a seat whose game ended before its first turn. A trajectory's rewards are one per
    turn, so the seat's reward cannot be its return (0.0): it is ``metrics["final_reward"]``."""
    _, earned_reward, terminated, truncated, info = earned
    reward = float(earned_reward)
    metrics = {
        **trajectory.metrics,
        "terminated": terminated,
        "truncated": truncated,
        "truncated_by": info.get("truncated_by") if truncated else None,
        "success": episode_success([info], reward, terminated),
        "final_reward": reward,
    }
    return dataclasses.replace(trajectory, terminated=terminated, truncated=truncated, metrics=metrics)


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
    that raises abandons the game and its error is raised here (the first, if several seats failed). A seat whose
    game ended before its first turn (the other seat forfeited) plays no turn: its trajectory has zero turns, a
    return of 0.0 (rewards are per turn) and the reward it earned in ``metrics["final_reward"]``. A policy with ``episode_finished`` is told when
    each seat's episode ends, as :func:`~gem_core.rollout.runner.run_episodes` tells it.

    Raises:
        InvalidArgumentType: ``env`` is not a :class:`~gem_core.multi_agent.MultiAgentEnv`.
        gem_core.rollout.runner.EpisodeArgumentError: a keyword :func:`run_episode` does not take.
        InvalidArgument: a seat has no policy or tokenizer, or its policy is a
            :class:`~gem_core.rollout.policy.BatchingPolicy` built with ``num_episodes`` (its rounds would wait for
            a seat that waits for the other seats' moves).
    """
    if not isinstance(env, MultiAgentEnv):
        raise InvalidArgumentType(
            f"run_self_play plays a MultiAgentEnv (seats keyed by agent name), got a {type(env).__name__}; "
            "play a single-agent env with run_episode or run_episodes."
        )
    _check_kwargs(run_episode_kwargs)
    sampling = run_episode_kwargs.pop("sampling", None)
    players = {agent: (_per_seat(policies, agent, "policy"), _per_seat(tokenizers, agent, "tokenizer")) for agent in env.agents}
    for agent, (policy, _) in players.items():
        _refuse_lockstep(agent, policy)
    seats = seat_envs(env)
    table = next(iter(seats.values())).table

    async def play(agent: str) -> TokenTrajectory:
        policy, tokenizer = players[agent]
        try:  # run_episode's steps, with a stop for a seat whose game ended before its first turn
            session = EpisodeSession(seats[agent], tokenizer, env_id=f"{env_id}#{agent}" if env_id else agent, **run_episode_kwargs)
            turn_sampling = _with_stop_tokens(session, sampling)
            await session.start(seed=seed)
            earned = seats[agent].ended_before_turn
            if earned is not None:
                return _unplayed(session.trajectory(), earned)
            await _play(session, policy, turn_sampling)
            return session.trajectory()
        except BaseException as exc:
            await table.fail(exc)
            raise
        finally:
            finished = getattr(players[agent][0], "episode_finished", None)
            if finished is not None:  # this seat asks for nothing more (told before an await a cancel could cut short)
                finished()
            await table.leave(agent)

    results = await asyncio.gather(*(play(agent) for agent in seats), return_exceptions=True)
    if table.error is not None:  # the first failure; the other seats' "another seat failed" follow from it
        raise table.error
    played: dict[str, TokenTrajectory] = {}
    for agent, result in zip(seats, results, strict=True):
        if isinstance(result, BaseException):
            raise result
        played[agent] = result
    return played
