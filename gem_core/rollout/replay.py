"""Re-verify stored episodes: replay their recorded actions against the env and compare every reward.

A grader fix (or a bug) changes rewards without changing what the policy did. Because the same seed
gives the same episode, resetting the env with the episode's seed and stepping its recorded actions
reproduces it turn by turn, so the changed turns can be listed and the stored rewards re-scored
without running the model again. ``gem replay FILE`` is the command-line form.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from gem_core.errors import InvalidArgument
from gem_core.registry import needs_trust
from gem_core.rollout.trajectory import TokenTrajectory
from gem_core.rollout.trajectory_io import read_records, trajectory_from_record

__all__ = [
    "FILE_ENV_KWARGS", "Replay", "StoredEpisode", "TurnChange", "file_env_kwargs_problem", "replay_actions", "replay_episodes",
    "replay_file", "replay_trajectory", "trajectory_episodes",
]


@dataclass(frozen=True)
class TurnChange:
    """One turn whose replayed outcome differs from the stored one, or that could not be scored.

    ``error`` is set when the replayed step reported ``info["error"]`` (an env step that raised, a judge
    that gave no verdict): its reward is no score, so it is a failure, never a reward change.
    """

    episode: int
    turn: int
    stored_reward: float
    replayed_reward: float
    note: str = ""
    error: str | None = None


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
    env: Any, seed: int | None, actions: Sequence[str], stored_rewards: Sequence[float], *, episode: int = 0,
    stored_terminated: bool | None = None,
) -> Replay:
    """Reset ``env`` with ``seed``, step ``actions`` until the episode ends, and compare each turn's reward
    with ``stored_rewards``. The engine of ``gem replay`` and of ``gem eval --rescore``.

    An end is a change too: one that now comes before the last action, and, when ``stored_terminated`` says the env
    ended the stored episode at its last action, an end that no longer comes there (None: the stored end is unknown,
    and only the first is checked). A stored truncation is not compared: the session's own cut (``max_turns``, a
    token limit) is no step of the env, so a replay never repeats it.

    An env step that raises ends the replayed episode as the session ends a played one (truncated, reward 0): the turn
    is a failure (:attr:`TurnChange.error`), and the caller goes on with its next episode.

    Raises:
        Exception: what the env's ``reset`` raised (there is no episode to replay).
    """
    env.reset(seed=seed)
    replay = Replay(rewards=[], infos=[], terminated=False, truncated=False, changes=[])
    for turn, action in enumerate(actions):
        try:
            _, reward, terminated, truncated, info = env.step(action)
        except Exception as exc:  # noqa: BLE001 - one broken step fails this episode's replay, not the whole file's
            reward, terminated, truncated, info = 0.0, False, True, {"error": f"{type(exc).__name__}: {exc}"}
        replay.rewards.append(float(reward))
        replay.infos.append(dict(info))
        stored = float(stored_rewards[turn]) if turn < len(stored_rewards) else float("nan")
        last = turn == len(actions) - 1
        notes = []
        error = info.get("error") if isinstance(info, dict) else None
        if error:  # no verdict (or a step that raised): the reward is no score to compare
            notes.append("judge/env failed")
        elif not math.isclose(stored, float(reward), rel_tol=0.0, abs_tol=1e-9):
            notes.append("reward")
        if (terminated or truncated) and not last:
            notes.append("the episode now ends here")
        elif last and stored_terminated and not terminated:
            notes.append("the episode now ends truncated, not terminated" if truncated else "the episode no longer ends here")
        if notes:
            replay.changes.append(TurnChange(episode, turn, stored, float(reward), ", ".join(notes), str(error) if error else None))
        if terminated or truncated:
            replay.terminated, replay.truncated = bool(terminated), bool(truncated)
            break
    return replay


def replay_trajectory(trajectory: TokenTrajectory, env: Any, *, episode: int = 0) -> tuple[list[float], list[TurnChange]]:
    """Reset ``env`` with the trajectory's seed, step its recorded actions; returns the replayed rewards
    and the turns whose reward (or end of episode) changed."""
    replay = replay_actions(env, trajectory.seed, trajectory.actions, trajectory.rewards, episode=episode,
                            stored_terminated=trajectory.terminated)
    return replay.rewards, replay.changes


FILE_ENV_KWARGS = frozenset(
    {
        "max_turns", "size", "rows", "cols", "width", "height", "box_rows", "box_cols", "disks", "code_length",
        "word_length", "num_colors", "blanks", "boxes", "mines", "inner_walls", "lives", "min_number", "max_number",
        "min_distance", "max_distance", "target", "reverse_steps", "scramble_moves", "placement_attempts",
        "max_invalid", "max_rounds", "max_tool_calls", "topk", "max_tests", "seed", "split", "answer_format",
        "prompt_suffix", "reward", "name", "words", "config",
    }
)
"""Env kwargs a trajectory file may set by itself: the plain knobs of a game or a task (sizes, counts,
ranges, a split or task name). Everything else (a sandbox or isolation mode, a URL, a file or dataset
path, a module to import, a time or memory limit) decides what the env may do on this machine, so a
file someone else wrote never chooses it: the user gives it with --env-kwargs (issue 27.1).
"""
#: Kwargs that size a board or a puzzle: a file's value is bounded so it cannot size an allocation
#: (reasoning-gym's ``size`` is a dataset length, generated lazily, and gets the general bound).
_DIMENSIONS = frozenset(
    {
        "size", "rows", "cols", "width", "height", "box_rows", "box_cols", "disks", "code_length", "word_length",
        "num_colors", "blanks", "boxes", "mines", "inner_walls",
    }
)
#: Kwargs that set how much work building an episode takes (moves that scramble a board, attempts at
#: placing mines; a reasoning-gym dataset's ``size``, which some datasets generate whole when built): a
#: file's value is bounded so that replaying it stays quick (FifteenPuzzle's scramble at 10**7 ran
#: past a minute; reasoning-gym's acre takes ~10 s at its default size of 10,000, the bound).
_WORK = frozenset({"scramble_moves", "reverse_steps", "placement_attempts"})
_WORK_BOUND = 10_000
#: Kwargs whose game builds its board by a search or by random redraws that grow steeply with them (a Sudoku's
#: boxes, the words a word search or a crossword lays out, a Sokoban room, its walls and boxes): a file's value
#: stays where the largest reset takes a second or so (tests/rollout/test_replay_work_bounds.py). Past these, a
#: 5x5-box Sudoku, 100 words in a word search, 1,000 in a crossword or 100 walls in a 15x15 room never reset.
_BOARD_BOUNDS = {"box_rows": 4, "box_cols": 4, "words": 64, "height": 20, "width": 20, "inner_walls": 80, "boxes": 6}
_DIMENSION_BOUND, _NUMBER_BOUND, _TEXT_BOUND, _ITEMS_BOUND = 100, 10**7, 10_000, 100_000
#: The kwargs whose value may be a list or an object (of plain values): a word list, a task config.
_CONTAINERS = frozenset({"words", "config"})


def _plain_value_problem(value: Any, bound: int, depth: int, budget: list[int]) -> str | None:
    """Why ``value`` is not plain bounded data (None when it is); ``budget`` counts the items left. A
    ``size`` inside an object (a reasoning-gym composite's sub-dataset) gets the work bound."""
    budget[0] -= 1
    if budget[0] < 0:
        return f"more than {_ITEMS_BOUND} items"
    if value is None or isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        if not (isinstance(value, int) or math.isfinite(value)) or abs(value) > bound:
            return f"a number outside +-{bound}"
        return None
    if isinstance(value, str):
        return None if len(value) <= _TEXT_BOUND else f"a text longer than {_TEXT_BOUND} characters"
    if isinstance(value, (list, dict)) and depth > 0:
        pairs = value.items() if isinstance(value, dict) else ((None, v) for v in value)
        return next((p for p in (_plain_value_problem(v, min(bound, _WORK_BOUND) if k == "size" else bound, depth - 1, budget)
                                 for k, v in pairs) if p), None)
    return f"a {type(value).__name__}, not a plain value"


def file_env_kwargs_problem(env_id: str, env_kwargs: dict[str, Any]) -> str | None:
    """Why a trajectory file may not set ``env_kwargs`` for ``env_id`` (None when it may): names the field."""
    for key, value in env_kwargs.items():
        if key not in FILE_ENV_KWARGS:
            return f"env_kwargs[{key!r}] is not a plain setting a file may choose (a sandbox mode, URL, path, module or limit)"
        if key in _BOARD_BOUNDS and not env_id.startswith("rg:"):
            bound = _BOARD_BOUNDS[key]
        elif key in _DIMENSIONS and not env_id.startswith("rg:"):
            bound = _DIMENSION_BOUND
        elif key in _WORK or key == "size":  # an rg: dataset's size (a board's size is a dimension, above)
            bound = _WORK_BOUND
        else:
            bound = _NUMBER_BOUND
        problem = _plain_value_problem(value, bound, 3 if key in _CONTAINERS else 0, [_ITEMS_BOUND])
        if problem:
            return f"env_kwargs[{key!r}] is {problem}"
    return None


def _env_for(path: str, episode: int, record: dict[str, Any], env_id: str, env_id_override: str | None,
             env_kwargs_override: dict[str, Any] | None) -> tuple[str, dict[str, Any]]:
    """The env id and kwargs to replay one stored episode with: the command line's where given, else the
    file's when a file may choose them; ValueError naming the field otherwise."""
    if env_id_override is not None:
        env_id = env_id_override
    elif needs_trust(env_id):
        raise InvalidArgument(
            f"{path}: episode {episode} has env_id {env_id!r}: a file never chooses where the replay connects or what "
            "it imports; if you trust that server or module, give the id yourself with --env-id (or a local id to "
            "replay here)."
        )
    if env_kwargs_override is not None:
        return env_id, env_kwargs_override
    kwargs = record.get("env_kwargs") or {}
    problem = file_env_kwargs_problem(env_id, kwargs)
    if problem:
        raise InvalidArgument(
            f"{path}: episode {episode}: {problem}; a trajectory file may not set it. If you trust that "
            "setting, give the env kwargs yourself with --env-kwargs JSON (they replace the file's)."
        )
    return env_id, kwargs


@dataclass(frozen=True)
class StoredEpisode:
    """One stored episode as replay needs it, whatever file held it: a trajectory record, or an episode of a
    ``gem eval`` run (its transcript's assistant turns are the actions)."""

    env_id: str
    seed: int
    actions: list[str]
    rewards: list[float]
    #: The env kwargs the file says the episode was played with; replayed only if a file may set them.
    env_kwargs: dict[str, Any]
    #: Whether the env ended the stored episode at its last action (None: the file does not say); see
    #: :func:`replay_actions`.
    terminated: bool | None = None


def trajectory_episodes(path: str) -> Iterator[StoredEpisode]:
    """The episodes of a trajectory JSONL file (:func:`~gem_core.rollout.trajectory_io.write_trajectories`).

    Raises:
        ValueError: a record that is not a trajectory, or has no env id or seed, naming the file and the episode.
    """
    for index, record in enumerate(read_records(path)):
        try:
            trajectory = trajectory_from_record(record)
        except ValueError as exc:
            raise InvalidArgument(f"{path}: episode {index}: {exc} gem replay also reads a gem eval run (its folder, "
                             "episodes.jsonl or report.json).") from None
        if trajectory.env_id is None or trajectory.seed is None:
            raise InvalidArgument(f"{path}: episode {index} has no env_id or seed, so it cannot be replayed.")
        yield StoredEpisode(trajectory.env_id, trajectory.seed, list(trajectory.actions), list(trajectory.rewards),
                            record.get("env_kwargs") or {}, trajectory.terminated)


def replay_file(
    path: str, env_kwargs_override: dict[str, Any] | None, env_id_override: str | None = None, judge: Any = None, rubric: Any = None
) -> tuple[int, list[TurnChange]]:
    """Replay every episode of a trajectory JSONL file; see :func:`replay_episodes`."""
    return replay_episodes(path, trajectory_episodes(path), env_kwargs_override, env_id_override, judge, rubric)


def replay_episodes(
    path: str, episodes: Iterable[StoredEpisode], env_kwargs_override: dict[str, Any] | None, env_id_override: str | None = None,
    judge: Any = None, rubric: Any = None,
) -> tuple[int, list[TurnChange]]:
    """Replay stored ``episodes`` (read from ``path``, which messages name); returns how many episodes and the
    turns that changed (or failed: those with :attr:`TurnChange.error` set).

    The env id and kwargs are the file's only where a file may choose them (:func:`file_env_kwargs_problem`);
    ``env_kwargs_override`` and ``env_id_override`` (the command line's) replace them. A judged env is
    re-judged only with the ``judge`` given here, never one a file names.

    Raises:
        ValueError: an episode that cannot be replayed, naming the file, the episode and the field.
    """
    from gem_core import placement
    from gem_core.judge.options import judge_env_kwargs, takes_judge

    envs: dict[tuple[str, str], Any] = {}
    changes: list[TurnChange] = []
    count = 0
    try:
        for count, stored in enumerate(episodes, 1):
            episode = count - 1
            env_id, kwargs = _env_for(path, episode, {"env_kwargs": stored.env_kwargs}, stored.env_id, env_id_override,
                                      env_kwargs_override)
            key = (env_id, json.dumps(kwargs, sort_keys=True))
            if key not in envs and judge is None and takes_judge(env_id):
                raise InvalidArgument(f"{path}: episode {episode} is of the judged env {env_id}: give --judge-url URL and --judge-model NAME to re-judge it.")
            if key not in envs:
                try:
                    envs[key] = placement.make_env(env_id, **kwargs, **judge_env_kwargs(env_id, judge, rubric))  # the judge: only from the command line
                except TypeError as exc:  # a kwarg the env does not take
                    raise InvalidArgument(
                        f"{path}: episode {episode}: cannot build {env_id} with env_kwargs {sorted(kwargs)}: {exc}"
                    ) from None
            replay = replay_actions(envs[key], stored.seed, stored.actions, stored.rewards, episode=episode,
                                    stored_terminated=stored.terminated)
            changes.extend(replay.changes)
    finally:
        for env in envs.values():
            env.close()
    return count, changes
