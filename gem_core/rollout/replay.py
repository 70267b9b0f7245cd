"""Re-verify stored episodes: replay their recorded actions against the env and compare every reward.

A grader fix (or a bug) changes rewards without changing what the policy did. Because the same seed
gives the same episode, resetting the env with the episode's seed and stepping its recorded actions
reproduces it turn by turn, so the changed turns can be listed and the stored rewards re-scored
without running the model again. ``gem replay FILE`` is the command-line form.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from gem_core.rollout.episode_rows import env_kwargs_option
from gem_core.rollout.trajectory import TokenTrajectory
from gem_core.rollout.trajectory_io import read_records, trajectory_from_record

__all__ = ["Replay", "TurnChange", "replay_actions", "replay_trajectory", "add_replay_parser"]


@dataclass(frozen=True)
class TurnChange:
    """One turn whose replayed outcome differs from the stored one."""

    episode: int
    turn: int
    stored_reward: float
    replayed_reward: float
    note: str = ""


@dataclass
class Replay:
    """What the env did when stepped through recorded actions."""

    rewards: list[float]
    infos: list[dict[str, Any]]
    terminated: bool
    truncated: bool
    #: The turns whose reward (or end of episode) differs from the stored episode's.
    changes: list[TurnChange]


def replay_actions(
    env: Any, seed: int | None, actions: Sequence[str], stored_rewards: Sequence[float], *, episode: int = 0
) -> Replay:
    """Reset ``env`` with ``seed``, step ``actions`` until the episode ends, and compare each turn's reward
    with ``stored_rewards``. The engine of ``gem replay`` and of ``gem eval --rescore``."""
    env.reset(seed=seed)
    replay = Replay(rewards=[], infos=[], terminated=False, truncated=False, changes=[])
    for turn, action in enumerate(actions):
        _, reward, terminated, truncated, info = env.step(action)
        replay.rewards.append(float(reward))
        replay.infos.append(dict(info))
        stored = float(stored_rewards[turn]) if turn < len(stored_rewards) else float("nan")
        last = turn == len(actions) - 1
        notes = []
        if not math.isclose(stored, float(reward), rel_tol=0.0, abs_tol=1e-9):
            notes.append("reward")
        if (terminated or truncated) and not last:
            notes.append("the episode now ends here")
        if notes:
            replay.changes.append(TurnChange(episode, turn, stored, float(reward), ", ".join(notes)))
        if terminated or truncated:
            replay.terminated, replay.truncated = bool(terminated), bool(truncated)
            break
    return replay


def replay_trajectory(trajectory: TokenTrajectory, env: Any, *, episode: int = 0) -> tuple[list[float], list[TurnChange]]:
    """Reset ``env`` with the trajectory's seed, step its recorded actions; returns the replayed rewards
    and the turns whose reward (or end of episode) changed."""
    replay = replay_actions(env, trajectory.seed, trajectory.actions, trajectory.rewards, episode=episode)
    return replay.rewards, replay.changes


def _replay_file(path: str, env_kwargs_override: dict[str, Any] | None) -> tuple[int, list[TurnChange]]:
    from gem_core.registry import make

    envs: dict[tuple[str, str], Any] = {}
    changes: list[TurnChange] = []
    count = 0
    for count, record in enumerate(read_records(path), 1):
        trajectory = trajectory_from_record(record)
        if trajectory.env_id is None or trajectory.seed is None:
            raise ValueError(f"{path}: episode {count - 1} has no env_id or seed, so it cannot be replayed.")
        kwargs = env_kwargs_override if env_kwargs_override is not None else record.get("env_kwargs") or {}
        key = (trajectory.env_id, json.dumps(kwargs, sort_keys=True))
        if key not in envs:
            envs[key] = make(trajectory.env_id, **kwargs)
        changes.extend(replay_trajectory(trajectory, envs[key], episode=count - 1)[1])
    for env in envs.values():
        env.close()
    return count, changes


def _run(args: argparse.Namespace) -> int:
    try:
        overrides = None if args.env_kwargs is None else env_kwargs_option(args.env_kwargs)
        episodes, changes = _replay_file(args.file, overrides)
    except (OSError, ValueError, KeyError) as exc:  # unreadable file, bad record, unknown env id
        print(f"gem replay: {exc}", file=sys.stderr)
        return 2
    for change in changes:
        print(
            f"episode {change.episode} turn {change.turn}: reward {change.stored_reward:+g} -> {change.replayed_reward:+g}"
            + (f" ({change.note})" if change.note != "reward" else "")
        )
    print(f"{episodes} episodes replayed, {len(changes)} turns changed.")
    return 1 if changes else 0


def add_replay_parser(commands: Any) -> None:
    """Add ``gem replay`` to the CLI's subcommands."""
    parser = commands.add_parser(
        "replay",
        help="re-score stored trajectories against the current env (exit 1 if any reward changed)",
        description=__doc__.split("\n\n")[0],
    )
    parser.add_argument("file", help="a JSONL file written by gem_core.rollout.trajectory_io.write_trajectories")
    parser.add_argument("--env-kwargs", default=None, help="JSON object replacing every episode's stored env kwargs")
    parser.set_defaults(run=_run)
