"""One task sampler for a whole run, built from plain data, for trainers that build their hook objects themselves.

verl instantiates an agent loop per sample from YAML keys, OpenRLHF imports the agent file once per
vLLM engine: neither hands the adapter an object made by the user, and both run many worker processes
under Ray. :func:`shared_group_starts` turns a JSON-able sampler spec into a :class:`GroupStarts` that
every caller in the process shares, and, inside a Ray cluster, that every process of the job shares:
one named Ray actor holds the sampler, so its statistics see every episode, its seeds never repeat
across workers, and one process writes its state.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
from collections.abc import Hashable, Mapping
from typing import TYPE_CHECKING, Any

from gem_core.curriculum.groups import GroupStarts, Outcome, RowStarts, episode_outcome
from gem_core.curriculum.metrics import tag_task
from gem_core.curriculum.sampler import TaskSampler
from gem_core.curriculum.task import Task, TaskError
from gem_core.rows.label import EpisodeLabel, _not_json
from gem_core.transport.json_depth import nests_deeper_than

if TYPE_CHECKING:
    from gem_core.rollout.trajectory import TokenTrajectory

__all__ = ["RayGroupStarts", "sampler_from_spec", "shared_group_starts"]

MAX_SPEC_DEPTH = 64
"""The deepest nesting spec text may hold (tasks with their env_kwargs need a few levels); checked before
``json.loads`` recurses, so text of nested brackets is a TaskError, not a RecursionError."""

_SHARED: dict[str, Any] = {}
_ROW_STARTS = RowStarts()


def sampler_spec(spec: Mapping[str, Any] | str) -> dict[str, Any]:
    """``spec`` as plain data (JSON text parsed, a YAML config's nodes made dicts and lists), checked to be
    an object with ``tasks``; where a curriculum comes in as text (a CLI flag, a YAML string) it fails here,
    at the first read, with a TaskError rather than a bare JSONDecodeError.

    Raises:
        TaskError: if ``spec`` is not JSON (Python's ``json`` included: an int past its 4300 digits, nesting past
            :data:`MAX_SPEC_DEPTH`) or not an object with ``tasks``.
    """
    if isinstance(spec, str):
        text = spec
        if nests_deeper_than(text, MAX_SPEC_DEPTH):  # before json.loads recurses into a RecursionError
            raise TaskError(f"The task sampler spec {text[:80]!r} nests deeper than {MAX_SPEC_DEPTH} levels, which no spec "
                            "needs: give an object with 'tasks' and TaskSampler's arguments.")
        try:
            spec = json.loads(text)
        except ValueError as error:  # a JSONDecodeError, or a plain ValueError for an int past Python's 4300 digits
            raise TaskError(f"The task sampler spec {text[:80]!r} is not JSON Python reads ({_not_json(error)}).") from None
    spec = _plain(spec)
    if not isinstance(spec, Mapping) or "tasks" not in spec:
        raise TaskError(f"A task sampler spec is an object with 'tasks' (and TaskSampler's arguments), got {spec!r}.")
    return dict(spec)


def sampler_from_spec(spec: Mapping[str, Any] | str) -> TaskSampler:
    """A :class:`TaskSampler` from plain data (a mapping or its JSON text), as a YAML file or a CLI flag gives it.

    ``tasks`` is ``{env_id: weight}`` or a list of env ids and ``{"env_id", "env_kwargs", "weight", "seed"}``
    objects (a ladder: easiest first); every other key is a :class:`TaskSampler` argument, e.g.
    ``{"tasks": ["game:GuessTheNumber-v0-easy", "game:GuessTheNumber-v0"], "weighting": "band", "seed": 0}``.

    Raises:
        TaskError: not JSON, no ``tasks``, an unknown key, a task that is neither an env id nor a task object
            (an unknown key, no ``env_id``), or tasks the sampler refuses (the message says which).
    """
    kwargs = sampler_spec(spec)
    tasks = kwargs.pop("tasks")
    if not isinstance(tasks, (Mapping, str, list)):
        raise TaskError(f"'tasks' must be {{env_id: weight}}, an env id, or a list of env ids and task objects, got {tasks!r}.")
    if isinstance(tasks, list):
        tasks = [_spec_task(task) for task in tasks]
    try:
        return TaskSampler(tasks, **kwargs)
    except TypeError as error:  # an argument TaskSampler does not take
        raise TaskError(f"Bad task sampler spec {sorted(kwargs)} ({error}); its keys are 'tasks' and TaskSampler's arguments.") from None


_TASK_KEYS = ("env_id", "env_kwargs", "weight", "seed", "name")


def _spec_task(task: Any) -> Task | str:
    """One entry of a spec's ``tasks`` list: an env id, or a task object (:class:`Task`'s fields)."""
    if isinstance(task, str):
        return task
    if not isinstance(task, Mapping):
        raise TaskError(f"A task in 'tasks' is {task!r}, not an env id or a task object with keys {', '.join(_TASK_KEYS)}.")
    unknown = sorted(set(task) - set(_TASK_KEYS))
    if unknown:
        raise TaskError(f"Task {dict(task)!r} has unknown keys {unknown}: a task object's keys are {', '.join(_TASK_KEYS)}.")
    if "env_id" not in task:
        raise TaskError(f"Task {dict(task)!r} has no 'env_id': every task names its env.")
    return Task(**task)


def shared_group_starts(spec: Mapping[str, Any] | str | None, copies: int) -> GroupStarts | RayGroupStarts | RowStarts:
    """The :class:`GroupStarts` of ``spec`` that this process, or this Ray job, shares (:class:`RowStarts` for no spec).

    ``spec`` is :func:`sampler_from_spec`'s (any mappings and sequences, e.g. an OmegaConf node from YAML),
    plus an optional ``state_dir`` (:class:`GroupStarts`'s: where the sampler's state is kept). In a process
    where Ray is initialized (a verl or OpenRLHF worker), it is a :class:`RayGroupStarts`: a handle on one
    named actor per (spec, copies), created by the first caller, so ``state_dir`` must be a folder that
    actor's node sees (a shared filesystem on a multi-node cluster). Elsewhere it is one object per
    process. Either way calls with the same arguments get the same one.

    Raises:
        TaskError: a bad spec (:func:`sampler_from_spec`), or a ``state_dir`` that is not a path.
    """
    if not spec:
        return _ROW_STARTS
    spec = sampler_spec(spec)
    if "state_dir" in spec:  # a folder: its text goes into the key and to a Ray actor
        if not isinstance(spec["state_dir"], (str, os.PathLike)):
            raise TaskError(f"'state_dir' must be a folder path, got {spec['state_dir']!r}.")
        spec["state_dir"] = os.fspath(spec["state_dir"])
    key = json.dumps({"spec": spec, "copies": copies}, sort_keys=True)
    starts = _SHARED.get(key)
    if starts is None:
        # Only where the trainer already runs Ray (never started here); a module that only shares the name
        # (a folder called ray on the path) has no is_initialized.
        is_initialized = getattr(sys.modules.get("ray"), "is_initialized", None)
        if callable(is_initialized) and is_initialized():
            starts = RayGroupStarts("gem_task_sampler-" + hashlib.sha256(key.encode()).hexdigest()[:16], spec, copies)
        else:
            starts = _local_starts(spec, copies)
        _SHARED[key] = starts
    return starts


def _plain(value: Any) -> Any:
    """JSON-able copies of mappings and sequences (a YAML config's nodes are neither dicts nor lists)."""
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)) or (hasattr(value, "__iter__") and not isinstance(value, (str, bytes))):
        return [_plain(v) for v in value]
    return value


def _local_starts(spec: Mapping[str, Any], copies: int) -> GroupStarts:
    spec = dict(spec)
    state_dir = spec.pop("state_dir", None)
    return GroupStarts(sampler_from_spec(spec), copies, state_dir=state_dir)


class _SamplerActor:
    """The Ray actor behind :class:`RayGroupStarts`: one :class:`GroupStarts`, its calls run one at a time."""

    def __init__(self, spec: Mapping[str, Any], copies: int) -> None:
        self.starts = _local_starts(spec, copies)

    async def start(self, key: Hashable) -> EpisodeLabel:
        return await self.starts.start(key)

    async def record(self, outcome: Outcome) -> str:
        """Record a finished copy; returns its task's name."""
        await self.starts.record(outcome)
        return self.starts.sampler.task_of(outcome[0]).name

    async def metrics(self) -> dict[str, float]:
        return await self.starts.metrics()

    async def state_dict(self) -> dict[str, Any]:
        return self.starts.sampler.state_dict()


class RayGroupStarts:
    """:class:`GroupStarts`'s coroutines, answered by the named Ray actor ``name`` (created if it does not exist).

    Args:
        name: the Ray actor's name; processes that pass the same name share one sampler.
        spec: the task sampler spec (see :func:`~gem_core.curriculum.sampler_from_spec`), checked here, in the caller.
        copies: episodes per group (GRPO's group size): the copies of a group start at the same draw.
    """

    def __init__(self, name: str, spec: Mapping[str, Any], copies: int) -> None:
        import ray

        sampler_from_spec({k: v for k, v in spec.items() if k != "state_dir"})  # a bad spec fails in the caller, not the actor
        actor = ray.remote(num_cpus=0)(_SamplerActor).options(name=name, get_if_exists=True)
        self.name = name
        self._actor = actor.remote(dict(spec), copies)

    async def start(self, key: Hashable, row_label: EpisodeLabel | None = None) -> EpisodeLabel:
        """The episode start of the copy of group ``key``, drawn by the shared actor; ``row_label`` is not used."""
        return await self._actor.start.remote(key)

    async def finish(self, start: EpisodeLabel, trajectory: TokenTrajectory) -> None:
        """Send the finished copy's outcome (not the trajectory) to the actor and tag the trajectory with its task."""
        tag_task(trajectory, start, await self._actor.record.remote(episode_outcome(start, trajectory)))

    async def metrics(self) -> dict[str, float]:
        """The shared sampler's :meth:`TaskSampler.metrics`, fetched from the actor."""
        return await self._actor.metrics.remote()

    async def state_dict(self) -> dict[str, Any]:
        """The shared sampler's :meth:`TaskSampler.state_dict`."""
        return await self._actor.state_dict.remote()
