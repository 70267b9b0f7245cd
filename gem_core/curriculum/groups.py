"""Episode starts for the copies of a group, and finished episodes back into the sampler, for any trainer.

GRPO-style trainers play each prompt ``n`` times and compare the copies, so the copies must share one
episode start (env, level and seed) or the comparison means nothing. Trainers deliver the copies in one
of two ways, and each gets one helper here, so an adapter only says where its copies are:

- the whole batch at once, in consecutive copies, with every process holding the same sampler (TRL's
  ``rollout_func``): :func:`group_starts` draws one start per group of the *global* batch and gives a
  process the starts of its own rows, so a group split over two processes still shares its start;
- one copy at a time, each carrying a key its copies share (verl's ``uid``, OpenRLHF's label, RL2's
  dataset row): :class:`GroupStarts`, where the first copy of a key draws and the others get its start.
  :class:`RowStarts` has the same two coroutines without a sampler (each episode starts at its row's
  label), so an adapter calls ``start``/``finish`` the same way with a curriculum or without one.

Finished episodes go back as :func:`episode_outcome` tuples (the episode, its success by
:func:`gem_core.env.episode_success`, its return): :func:`record_outcomes` applies them in order, so
processes that gather the same outcomes keep the same sampler.
"""

from __future__ import annotations

import os
from collections import OrderedDict
from collections.abc import Hashable, Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gem_core.curriculum.checkpoint import load_sampler_state, save_sampler_state
from gem_core.curriculum.metrics import tag_task
from gem_core.curriculum.sampler import TaskSampler
from gem_core.curriculum.task import TaskError
from gem_core.env import episode_success
from gem_core.errors import InvalidArgument
from gem_core.rows.label import EpisodeLabel
from gem_core.transport.folder_lock import lock_folder

if TYPE_CHECKING:  # the sampler side of this package needs no rollout engine
    from gem_core.rollout.trajectory import TokenTrajectory

__all__ = ["LOCK_FILE", "GroupStarts", "Outcome", "RowStarts", "episode_outcome", "group_starts", "record_outcomes"]

LOCK_FILE = ".gem_task_sampler.lock"
"""The file in a ``state_dir`` that its owner holds an exclusive lock on (and writes its pid into)."""

Outcome = tuple["EpisodeLabel | str", bool, float]
"""One finished episode for :meth:`TaskSampler.update`: (its start or task name, success, return)."""


def episode_outcome(episode: EpisodeLabel | str, trajectory: TokenTrajectory) -> Outcome:
    """``(episode, success, return)`` of a finished ``trajectory`` whose start (or task name) is ``episode``."""
    success = episode_success(trajectory.infos, trajectory.episode_return, trajectory.terminated)
    return episode, bool(success), float(trajectory.episode_return)


def record_outcomes(sampler: TaskSampler, outcomes: Iterable[Outcome]) -> None:
    """Update ``sampler`` with each outcome, in order (the order fixes the draws that follow)."""
    for episode, success, episode_return in outcomes:
        sampler.update(episode, success, episode_return)


def group_starts(sampler: TaskSampler, rows: Sequence[Any], group: int, *, rank: int = 0, world: int = 1) -> list[EpisodeLabel]:
    """The starts of this process's ``rows``: one draw per group of ``group`` consecutive rows of the global batch.

    The global batch is ``world`` slices of ``len(rows)`` rows, this process's being number ``rank``; a
    group's rows are copies of one prompt (equal ``rows`` entries) and may span two slices. Every process
    draws the whole batch's starts from its copy of the sampler and keeps its own, so all copies of a group
    get the same start wherever they run (the copies of the sampler must stay equal: update them all with
    the gathered outcomes, in global order).

    Raises:
        InvalidArgument: (a ValueError) ``group``, ``rank`` or ``world`` is not a whole number in range, the global
            batch is not whole groups, or two rows of one group differ (the trainer does not hand over its copies
            consecutively).
    """
    if isinstance(group, bool) or not isinstance(group, int) or group < 1:
        raise InvalidArgument(f"group must be a positive number of copies per prompt, got {group!r}.")
    for name, value, least in (("rank", rank, 0), ("world", world, 1)):  # a rank read from the environment is text
        if isinstance(value, bool) or not isinstance(value, int) or value < least:
            raise InvalidArgument(f"{name} must be a whole number of at least {least}, got {value!r}.")
    if not 0 <= rank < world:
        raise InvalidArgument(f"rank {rank} is not one of the {world} processes.")
    local = len(rows)
    if (local * world) % group:
        raise InvalidArgument(f"The batch of {local * world} rows is not a whole number of groups of {group}; "
                         "set the batch size to a multiple of the group size (GRPO's num_generations).")
    for i in range(1, local):
        if (rank * local + i) % group and rows[i] != rows[i - 1]:
            raise InvalidArgument(f"Rows {i - 1} and {i} belong to one group of {group} but differ: the trainer does not hand over "
                             "a prompt's copies consecutively, so they cannot share an episode start.")
    starts = sampler.draw(local * world // group)
    return [starts[(rank * local + i) // group] for i in range(local)]


class GroupStarts:
    """Episode starts for copies that arrive one at a time: the first copy of a key draws, the next ones share it.

    Args:
        sampler: where the starts come from and the outcomes go.
        copies: copies per group (verl's ``rollout.n``, OpenRLHF's ``n_samples_per_prompt``, RL2's
            ``responses_per_prompt``): after that many the key is forgotten, so a key seen again (the same
            dataset row next epoch) draws afresh.
        state_dir: where the trainer keeps no sampler state of its own: the sampler is restored from
            ``state_dir/gem_task_sampler.json`` if it exists and saved there after every ``copies`` finished
            episodes (a group's worth), so a restarted run continues its curriculum. The folder is created if
            missing and owned by this object until :meth:`close` (or the process ends): an exclusive lock on
            ``state_dir/.gem_task_sampler.lock`` (which holds the owner's pid), so a second process, or a second
            sampler of this one, given the same folder is refused instead of overwriting the first one's state.
            Under Ray one named actor owns it (:func:`~gem_core.curriculum.shared_group_starts`).
        max_open: most keys waiting for copies (the oldest is forgotten past it: a copy that never came).

    The methods are coroutines so that an async trainer awaits a local object and a shared one
    (:func:`gem_core.curriculum.shared_group_starts`) alike.

    Raises:
        InvalidArgument: if ``copies`` or ``max_open`` is not a positive integer.
    """

    def __init__(self, sampler: TaskSampler, copies: int, *, state_dir: str | os.PathLike[str] | None = None, max_open: int = 4096):
        for name, value in (("copies", copies), ("max_open", max_open)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise InvalidArgument(f"{name} must be a positive integer, got {value!r}.")
        self.sampler, self.copies, self.max_open, self.state_dir = sampler, copies, max_open, state_dir
        self._open: OrderedDict[Hashable, list[Any]] = OrderedDict()  # key -> [start, copies handed out]
        self._finished = 0
        self._lock: int | None = None
        self._closed = False
        if state_dir is not None:
            self._lock = lock_folder(Path(state_dir), LOCK_FILE, what="state_dir", error=TaskError,
                                     why="two runs sharing it overwrite each other's sampler state")
            try:
                load_sampler_state(sampler, state_dir)
            except BaseException:
                self.close()
                raise

    def close(self) -> None:
        """Give up ``state_dir`` (release its lock) so another run may use it; later outcomes are no longer saved.
        Harmless without ``state_dir`` or when called again; the process's end releases it too."""
        lock, self._lock, self._closed = getattr(self, "_lock", None), None, True
        if lock is not None:
            os.close(lock)  # closing the descriptor releases its flock

    def __enter__(self) -> GroupStarts:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __del__(self) -> None:
        self.close()

    async def start(self, key: Hashable, row_label: EpisodeLabel | None = None) -> EpisodeLabel:
        """The episode start of the copy of group ``key`` (a draw for its first copy); the row's own label is not used."""
        entry = self._open.get(key)
        if entry is None:
            entry = self._open[key] = [self.sampler.draw(1)[0], 0]
            while len(self._open) > self.max_open:
                self._open.popitem(last=False)
        entry[1] += 1
        if entry[1] >= self.copies:
            del self._open[key]
        return entry[0]

    async def finish(self, start: EpisodeLabel, trajectory: TokenTrajectory) -> None:
        """Tag the finished copy that began at ``start`` with its task (:func:`~gem_core.curriculum.tag_task`) and record it."""
        tag_task(trajectory, start, self.sampler.task_of(start).name)
        await self.record(episode_outcome(start, trajectory))

    async def record(self, outcome: Outcome) -> None:
        """Record one finished copy (:func:`episode_outcome`); with ``state_dir``, save after every group's worth.

        Raises:
            TaskError: if this object was closed (it gave up its ``state_dir``).
        """
        if self.state_dir is not None and self._closed:
            raise TaskError(f"This GroupStarts was closed and gave up state_dir {self.state_dir}: it records no more outcomes "
                            "(build a new one to continue).")
        record_outcomes(self.sampler, [outcome])
        self._finished += 1
        if self.state_dir is not None and self._finished % self.copies == 0:
            save_sampler_state(self.sampler, self.state_dir)

    async def metrics(self) -> dict[str, float]:
        """The sampler's :meth:`~TaskSampler.metrics` (next-draw probability and recent success per task)."""
        return self.sampler.metrics()


class RowStarts:
    """No curriculum, with :class:`GroupStarts`'s coroutines: each episode starts at its dataset row's label."""

    async def start(self, key: Hashable, row_label: EpisodeLabel | None = None) -> EpisodeLabel:
        """The row's own label: without a sampler every episode starts where its dataset row says.

        Raises:
            InvalidArgument: if ``row_label`` is None (the caller must pass the row's label).
        """
        if row_label is None:
            raise InvalidArgument("Without a task sampler an episode starts at its row's label: pass start(key, row_label).")
        return row_label

    async def finish(self, start: EpisodeLabel, trajectory: TokenTrajectory) -> None:
        """Tag the trajectory with its task, for per-task metrics."""
        tag_task(trajectory, start)

    async def metrics(self) -> dict[str, float]:
        """No metrics: there is no sampler to report on (an empty dict)."""
        return {}
