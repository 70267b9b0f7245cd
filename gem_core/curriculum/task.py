"""A task of a curriculum: an env id and the constructor kwargs that fix its difficulty (or one dataset row).

A sampler keeps statistics per task and hands out episode starts (:class:`~gem_core.rows.EpisodeLabel`),
so a task is exactly what a label needs besides the seed. Its :attr:`~Task.name` keys the statistics,
the sampler's saved state and the per-task metrics (``gem/task/<name>/success``), so it is stable text.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from gem_core.errors import GemError
from gem_core.registry import spec as env_spec
from gem_core.rows.label import MAX_SEED, EnvKwargsError, EpisodeLabel, make_label_env, parse_label

__all__ = ["Task", "TaskError", "check_task_envs", "metric_name", "task_name"]


class TaskError(GemError, ValueError):
    """A task list a sampler cannot use (empty, duplicated names, a bad weight); the message says the fix."""


def task_name(env_id: str, env_kwargs: Mapping[str, Any] | None = None) -> str:
    """``env_id`` alone, or ``env_id[key=value,...]`` (keys sorted) when kwargs set a level of it.

    The one naming rule for tasks, so a trajectory tagged by an adapter and a sampler's task agree.
    """
    if not env_kwargs:
        return env_id
    return env_id + "[" + ",".join(f"{key}={json.dumps(env_kwargs[key], sort_keys=True)}" for key in sorted(env_kwargs)) + "]"


_UNSAFE = re.compile(r"[/\\\s]")


def metric_name(name: str) -> str:
    """``name`` as the task part of a metric key (``gem/task/<part>/success``): ``/``, ``\\`` and whitespace become
    ``_`` and quotes go, so a kwarg holding a path (``data_files="/tmp/a b/rows.jsonl"``) neither splits a logger's
    groups nor needs quoting. A :class:`~gem_core.curriculum.TaskSampler` refuses tasks whose metric names collide."""
    return _UNSAFE.sub("_", name).replace('"', "").replace("'", "")


#: (env id, kwargs as JSON) pairs built once in this process by :func:`check_task_envs`.
_CHECKED: set[tuple[str, str]] = set()


def check_task_envs(tasks: Iterable[Task]) -> None:
    """Build the env of each distinct (env id, kwargs) of ``tasks`` once (:func:`gem_core.rows.make_label_env`) and
    close it, so kwargs the env refuses fail when a curriculum is made, not mid-run in a trainer's worker.

    Tasks that differ only in their seed (one per dataset row) share one build, and a pair that built once in
    this process is not built again; a dataset-backed env may load its data when built, so this costs one
    load per distinct env at construction.

    Raises:
        TaskError: an env refused its task's kwargs (the message names the task and the env's registered kwargs),
            or could not read its data (a missing data file).
    """
    for task in tasks:
        key = (task.env_id, json.dumps(task.env_kwargs, sort_keys=True))
        if key in _CHECKED:
            continue
        try:
            make_label_env(EpisodeLabel(task.env_id, 0, dict(task.env_kwargs))).close()
        except EnvKwargsError as error:
            raise TaskError(f"Task {task.name!r}: {error} Fix the task's env_kwargs in the curriculum's tasks.") from None
        except OSError as error:  # a dataset-backed env whose data file is missing or unreadable
            raise TaskError(f"Task {task.name!r}: building {task.env_id} failed ({error}). Fix the task's env_kwargs in the "
                            "curriculum's tasks.") from None
        _CHECKED.add(key)


@dataclass(frozen=True)
class Task:
    """One task: ``env_id`` built with ``env_kwargs``; a ``seed`` pins it to one episode (a dataset row).

    ``weight`` is its share under uniform sampling (a static mixture) and its prior under adaptive sampling.
    """

    env_id: str
    env_kwargs: Mapping[str, Any] = field(default_factory=dict)
    weight: float = 1.0
    seed: int | None = None
    """None: each draw gets the task's next seed; an int: every draw replays this one episode."""
    name: str = ""
    """Key of its statistics and metrics; default :func:`task_name` (with ``#seed`` for a pinned seed)."""

    def __post_init__(self) -> None:
        if not isinstance(self.env_id, str):
            raise TaskError(f"A task's env_id must be an env id (text), got {self.env_id!r}.")
        if not isinstance(self.env_kwargs, Mapping):
            raise TaskError(f"Task {self.env_id!r} env_kwargs must be an object of constructor kwargs, got {self.env_kwargs!r}.")
        object.__setattr__(self, "env_kwargs", dict(self.env_kwargs))
        try:  # they travel as JSON (labels, names, saved state): a Path or an object would fail later, far away
            json.dumps(self.env_kwargs)
        except (TypeError, ValueError) as error:
            raise TaskError(f"Task {self.env_id!r} env_kwargs are not JSON data ({error}): give strings, numbers, booleans, "
                            "lists and objects (for a path, str(path)).") from None
        try:
            env_spec(self.env_id)
        except KeyError as err:  # UnknownEnvError names the closest ids; the mistake is the curriculum's, not a dataset's
            raise TaskError(f"{err} Fix the task's env_id in the curriculum's tasks.") from None
        if isinstance(self.weight, bool) or not isinstance(self.weight, (int, float)) or not math.isfinite(self.weight) or self.weight <= 0:
            raise TaskError(f"Task {self.env_id!r} has weight {self.weight!r}: give a finite number above zero (weights are relative).")
        if self.seed is not None and (isinstance(self.seed, bool) or not isinstance(self.seed, int) or not 0 <= self.seed <= MAX_SEED):
            # gymnasium refuses a negative seed, a dataset column a seed past 64 bits: found here, not at every episode
            raise TaskError(f"Task {self.env_id!r} has seed {self.seed!r}: give an integer from 0 to {MAX_SEED}, or None.")
        if not isinstance(self.name, str):
            raise TaskError(f"Task {self.env_id!r} has name {self.name!r}: give text (the key of its statistics and metrics), or none.")
        if not self.name:
            name = task_name(self.env_id, self.env_kwargs) + ("" if self.seed is None else f"#{self.seed}")
            object.__setattr__(self, "name", name)

    def label(self, seed: int) -> EpisodeLabel:
        """The episode start of this task with ``seed`` (a pinned task's own seed wins), checked like a dataset row."""
        return parse_label({"env_id": self.env_id, "seed": self.seed if self.seed is not None else seed, "env_kwargs": dict(self.env_kwargs)})

    def to_json(self) -> dict[str, Any]:
        """The task as a JSON-ready dict (env id, kwargs, weight, seed, name)."""
        return {"env_id": self.env_id, "env_kwargs": dict(self.env_kwargs), "weight": self.weight, "seed": self.seed, "name": self.name}
