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
from typing import Any

from gem_core.curriculum.groups import GroupStarts, Outcome
from gem_core.curriculum.sampler import TaskSampler
from gem_core.curriculum.task import Task, TaskError
from gem_core.rows.label import EpisodeLabel

__all__ = ["RayGroupStarts", "sampler_from_spec", "shared_group_starts"]

_SHARED: dict[str, Any] = {}


def sampler_from_spec(spec: Mapping[str, Any] | str) -> TaskSampler:
    """A :class:`TaskSampler` from plain data (a mapping or its JSON text), as a YAML file or a CLI flag gives it.

    ``tasks`` is ``{env_id: weight}`` or a list of env ids and ``{"env_id", "env_kwargs", "weight", "seed"}``
    objects (a ladder: easiest first); every other key is a :class:`TaskSampler` argument, e.g.
    ``{"tasks": ["game:GuessTheNumber-v0-easy", "game:GuessTheNumber-v0"], "weighting": "band", "seed": 0}``.

    Raises:
        TaskError: not JSON, no ``tasks``, an unknown key, or tasks the sampler refuses (the message says which).
    """
    if isinstance(spec, str):
        try:
            spec = json.loads(spec)
        except json.JSONDecodeError as error:
            raise TaskError(f"The task sampler spec {spec[:80]!r} is not JSON ({error}).") from None
    if not isinstance(spec, Mapping) or "tasks" not in spec:
        raise TaskError(f"A task sampler spec is an object with 'tasks' (and TaskSampler's arguments), got {spec!r}.")
    kwargs = dict(spec)
    tasks = kwargs.pop("tasks")
    if not isinstance(tasks, (Mapping, str)):
        tasks = [Task(**dict(task)) if isinstance(task, Mapping) else task for task in tasks]
    try:
        return TaskSampler(tasks, **kwargs)
    except TypeError as error:  # an argument TaskSampler does not take
        raise TaskError(f"Bad task sampler spec {sorted(kwargs)} ({error}); its keys are 'tasks' and TaskSampler's arguments.") from None


def shared_group_starts(spec: Mapping[str, Any] | str, copies: int, *, state_dir: str | os.PathLike[str] | None = None) -> GroupStarts | RayGroupStarts:
    """The :class:`GroupStarts` of ``spec`` (:func:`sampler_from_spec`) that this process, or this Ray job, shares.

    In a process where Ray is initialized (a verl or OpenRLHF worker), it is a :class:`RayGroupStarts`: a
    handle on one named actor per (spec, copies, state_dir), created by the first caller, so ``state_dir``
    must be a folder that actor's node sees (a shared filesystem on a multi-node cluster). Elsewhere it is
    one object per process. Either way calls with the same arguments get the same one.
    """
    if isinstance(spec, str):
        spec = json.loads(spec)
    key = json.dumps({"spec": spec, "copies": copies, "state_dir": None if state_dir is None else os.fspath(state_dir)}, sort_keys=True)
    starts = _SHARED.get(key)
    if starts is None:
        ray = sys.modules.get("ray")  # only where the trainer already runs Ray: never started here
        if ray is not None and ray.is_initialized():
            starts = RayGroupStarts("gem_task_sampler-" + hashlib.sha256(key.encode()).hexdigest()[:16], spec, copies, state_dir)
        else:
            starts = GroupStarts(sampler_from_spec(spec), copies, state_dir=state_dir)
        _SHARED[key] = starts
    return starts


class _SamplerActor:
    """The Ray actor behind :class:`RayGroupStarts`: one :class:`GroupStarts`, its calls run one at a time."""

    def __init__(self, spec: Mapping[str, Any], copies: int, state_dir: str | None) -> None:
        self.starts = GroupStarts(sampler_from_spec(spec), copies, state_dir=state_dir)

    async def start(self, key: Hashable) -> EpisodeLabel:
        return await self.starts.start(key)

    async def finish(self, outcome: Outcome) -> None:
        await self.starts.finish(outcome)

    async def metrics(self) -> dict[str, float]:
        return await self.starts.metrics()

    async def state_dict(self) -> dict[str, Any]:
        return self.starts.sampler.state_dict()


class RayGroupStarts:
    """:class:`GroupStarts`'s coroutines, answered by the named Ray actor ``name`` (created if it does not exist)."""

    def __init__(self, name: str, spec: Mapping[str, Any], copies: int, state_dir: str | os.PathLike[str] | None = None) -> None:
        import ray

        sampler_from_spec(spec)  # a bad spec fails here, in the caller, not in the actor
        actor = ray.remote(num_cpus=0)(_SamplerActor).options(name=name, get_if_exists=True)
        self.name = name
        self._actor = actor.remote(dict(spec), copies, None if state_dir is None else os.fspath(state_dir))

    async def start(self, key: Hashable) -> EpisodeLabel:
        return await self._actor.start.remote(key)

    async def finish(self, outcome: Outcome) -> None:
        await self._actor.finish.remote(outcome)

    async def metrics(self) -> dict[str, float]:
        return await self._actor.metrics.remote()

    async def state_dict(self) -> dict[str, Any]:
        """The shared sampler's :meth:`TaskSampler.state_dict`."""
        return await self._actor.state_dict.remote()
