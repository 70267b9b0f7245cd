"""The task sampler: hands out episode starts and learns from finished episodes where training pays.

    sampler = TaskSampler(difficulty_ladder("game:GuessTheNumber-v0"), weighting="band", seed=0)
    starts = sampler.draw(8)                      # EpisodeLabel(env_id, seed, env_kwargs) each
    ...play them...
    sampler.update(start, success=True, episode_return=1.0)   # once per finished episode
    state = sampler.state_dict()                  # JSON: save it with the trainer's checkpoint

Any framework can drive it: whatever chooses the next episode start (a rollout function, a dataset or
sampler the trainer iterates, an agent loop) calls :meth:`TaskSampler.draw`, and whatever sees finished
episodes calls :meth:`TaskSampler.update`. Draw ``i`` of a sampler is a pure function of its seed, ``i``
and the statistics at the time, so two processes that apply the same updates in the same order draw the
same tasks (a distributed trainer gathers the outcomes and updates every copy), and a sampler restored
from :meth:`~TaskSampler.state_dict` continues with the draws the original would have made.
"""

from __future__ import annotations

import bisect
import itertools
import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from gem_core.curriculum.stats import TaskStats
from gem_core.curriculum.task import Task, TaskError, check_task_envs, metric_name, task_name
from gem_core.curriculum.weighting import WEIGHTINGS, Weighting, informative_group_probability, with_floor
from gem_core.errors import InvalidArgument
from gem_core.rows.label import MAX_SEED, EpisodeLabel, _shown

__all__ = ["MAX_GROUP_SIZE", "MAX_WINDOW", "STATE_FORMAT", "SamplerStateError", "TaskSampler"]

STATE_FORMAT = "gem_core.curriculum.TaskSampler/1"
"""Version tag of :meth:`TaskSampler.state_dict`; :meth:`TaskSampler.load_state_dict` refuses any other."""
MAX_WINDOW = 100_000
"""The largest ``window``: every task keeps that many outcomes in memory and in the saved state."""
MAX_GROUP_SIZE = 100_000
"""The largest ``group_size``: far above any trainer's group, and ``p ** group_size`` stays a float."""


class TaskSampler:
    """Draws episode starts over ``tasks``, toward those whose success is neither 0 nor 1.

    Args:
        tasks: :class:`Task` objects, env ids, or a mixture ``{env_id: weight}``. Each distinct env (id and
            kwargs) is built once here (:func:`~gem_core.curriculum.task.check_task_envs`), so kwargs it refuses
            fail now rather than mid-run; the weights must have a finite sum, and the tasks' metric names
            (:func:`~gem_core.curriculum.task.metric_name`) must differ. Two tasks of one env (id and kwargs)
            must both be pinned, to different seeds: an outcome finds its task by its episode start alone.
        weighting: ``"band"`` (default): in proportion to the chance a group of ``group_size`` episodes is
            informative, ``1 - p^G - (1-p)^G`` with ``p`` the task's recent success rate; ``"progress"``: in
            proportion to how fast the success rate changes; ``"uniform"``: the tasks' weights only (a static
            mixture; no floor, no statistics used). See :mod:`gem_core.curriculum.weighting`.
        seed: fixes every draw (with the statistics).
        seed_start: each task's episode seeds count up from here, a whole number from 0 (gymnasium refuses
            negative seeds) to :data:`~gem_core.env.MAX_SEED` (a dataset column holds 64-bit seeds); a pinned
            task keeps its own seed.
        floor: the least probability of every task under adaptive weighting, so none starves and its
            statistics stay current; default ``0.25 / len(tasks)`` (a quarter of the draws spread evenly).
        window: episodes per task that the statistics look at (the most recent), at most :data:`MAX_WINDOW`.
        min_episodes: until a task has this many episodes in its window it is treated as the most
            promising (drawn at the highest adaptive weight), so every task is measured before it is judged.
        group_size: episodes per draw that the trainer compares (GRPO's ``num_generations``), for ``"band"``;
            at most :data:`MAX_GROUP_SIZE`.
        unlock_at: treat ``tasks`` as a ladder in the order given: a task beyond the first gets only the floor
            until the one before it reaches this success rate over ``min_episodes`` or more episodes
            (then it stays unlocked). None (default): every task competes from the start.

    Raises:
        TaskError: if an argument is out of range: an unknown ``weighting``, a ``floor`` above ``1/len(tasks)``,
            ``unlock_at`` outside (0, 1], ``min_episodes`` above ``window``, a count that is not an integer or is
            past its upper bound, or two tasks whose episode starts could not be told apart.
    """

    def __init__(
        self,
        tasks: Sequence[Task | str] | Mapping[str, float],
        *,
        weighting: Weighting = "band",
        seed: int = 0,
        seed_start: int = 0,
        floor: float | None = None,
        window: int = 64,
        min_episodes: int = 8,
        group_size: int = 2,
        unlock_at: float | None = None,
    ) -> None:
        self._tasks = _as_tasks(tasks)
        if weighting not in WEIGHTINGS:
            raise TaskError(f"weighting must be one of {', '.join(map(repr, WEIGHTINGS))}, got {weighting!r}.")
        k = len(self._tasks)
        floor = 0.25 / k if floor is None else floor
        if isinstance(floor, bool) or not isinstance(floor, (int, float)) or not 0 <= floor <= 1 / k:
            raise TaskError(
                f"floor {floor!r} is no probability every one of the {k} tasks can get: give a number from 0 to 1/{k} = {1 / k:.4g}."
            )
        for name, value, least, most in (("seed", seed, 0, None), ("seed_start", seed_start, 0, MAX_SEED), ("window", window, 2, MAX_WINDOW),
                                         ("min_episodes", min_episodes, 1, None), ("group_size", group_size, 2, MAX_GROUP_SIZE)):
            if isinstance(value, bool) or not isinstance(value, int) or value < least:
                raise TaskError(f"{name} must be an integer of at least {least}, got {value!r}.")
            if most is not None and value > most:  # found here, not as an overflow (or a dataset's seed error) mid-run
                raise TaskError(f"{name} must be an integer of at least {least} and at most {most}, got {_shown(value)}.")
        if min_episodes > window:
            raise TaskError(f"min_episodes ({min_episodes}) must not exceed window ({window}): the window could never hold them.")
        if unlock_at is not None and (isinstance(unlock_at, bool) or not isinstance(unlock_at, (int, float)) or not 0 < unlock_at <= 1):
            raise TaskError(f"unlock_at must be a success rate in (0, 1] or None, got {unlock_at!r}.")
        check_task_envs(self._tasks)
        self.weighting: Weighting = weighting
        self.seed, self.seed_start, self.floor = seed, seed_start, float(floor)
        self.window, self.min_episodes, self.group_size, self.unlock_at = window, min_episodes, group_size, unlock_at
        self._by_name = {task.name: task for task in self._tasks}
        self._by_start = {(task_name(task.env_id, task.env_kwargs), task.seed): task for task in self._tasks}
        self._stats = {task.name: TaskStats(window=window) for task in self._tasks}
        self._next_seed = {task.name: seed_start for task in self._tasks}
        self._draws = 0
        self._unlocked = 1 if unlock_at is not None else k

    # -- what it knows -------------------------------------------------------------------------------
    @property
    def tasks(self) -> tuple[Task, ...]:
        """The tasks it draws from, in the order given."""
        return self._tasks

    @property
    def draws(self) -> int:
        """How many episode starts it has handed out."""
        return self._draws

    def stats(self, task: Task | EpisodeLabel | str) -> TaskStats:
        """The statistics of ``task`` (a task, its name, or an episode start it handed out)."""
        return self._stats[self.task_of(task).name]

    def task_of(self, episode: Task | EpisodeLabel | str) -> Task:
        """The task an episode start (or a task name) belongs to.

        Raises:
            TaskError: it belongs to none of this sampler's tasks (the message lists them).
        """
        if isinstance(episode, Task):
            name = episode.name
        elif isinstance(episode, EpisodeLabel):  # by env and seed, not by name: a task may have a name of its own
            env = task_name(episode.env_id, episode.env_kwargs)
            task = self._by_start.get((env, episode.seed)) or self._by_start.get((env, None))
            if task is not None:
                return task
            name = f"{env}#{episode.seed}"
        else:
            name = episode
        try:
            return self._by_name[name]
        except KeyError:
            raise TaskError(f"{name!r} is none of this sampler's tasks ({', '.join(self._by_name)}); update it only with "
                            "episodes it handed out.") from None

    def probabilities(self) -> dict[str, float]:
        """Each task's probability for the next draw, by task name (they sum to 1)."""
        weights = [task.weight for task in self._tasks]
        if self.weighting == "uniform":
            total = sum(weights)
            return {task.name: w / total for task, w in zip(self._tasks, weights, strict=True)}
        scores = [self._score(i, task) for i, task in enumerate(self._tasks)]
        return dict(zip(self._by_name, with_floor(scores, weights, self.floor), strict=True))

    def _score(self, index: int, task: Task) -> float:
        if index >= self._unlocked:
            return 0.0
        stats = self._stats[task.name]
        if stats.seen < self.min_episodes:
            return 1.0  # not measured yet: the most promising until it is
        if self.weighting == "progress":
            return float(stats.learning_progress or 0.0)
        best = informative_group_probability(0.5, self.group_size)
        return informative_group_probability(stats.success_rate or 0.0, self.group_size) / best  # measured: not None

    def metrics(self, prefix: str = "gem/curriculum/") -> dict[str, float]:
        """Per task: ``{prefix}<name>/probability`` (``<name>``: its :func:`~gem_core.curriculum.task.metric_name`) of the next draw and ``{prefix}<name>/success`` over its window
        (once it has episodes); and ``{prefix}unlocked`` (tasks unlocked on a ladder), for a trainer's logger."""
        out: dict[str, float] = {}
        for name, p in self.probabilities().items():
            key = metric_name(name)
            out[f"{prefix}{key}/probability"] = p
            rate = self._stats[name].success_rate
            if rate is not None:
                out[f"{prefix}{key}/success"] = rate
        out[f"{prefix}unlocked"] = float(self._unlocked)
        return out

    # -- drawing and learning --------------------------------------------------------------------------
    def draw(self, k: int = 1) -> list[EpisodeLabel]:
        """The next ``k`` episode starts, all from the current probabilities (one per GRPO group: give every
        copy of a group the same start).

        Raises:
            InvalidArgument: if ``k`` is negative.
            TaskError: a task drawn has used every seed up to :data:`~gem_core.env.MAX_SEED`. Nothing is drawn then
                (the draw count and the next seeds stay), so the starts of a run stay one stream.
        """
        if isinstance(k, bool) or not isinstance(k, int) or k < 0:
            raise InvalidArgument(f"draw(k) needs a number of episode starts >= 0, got {k!r}.")
        cumulative = list(itertools.accumulate(self.probabilities().values()))
        starts, draws = [], self._draws
        advanced: dict[str, int] = {}  # next seeds, kept only once every start is drawn
        for _ in range(k):
            u = np.random.default_rng([self.seed, draws]).random() * cumulative[-1]
            task = self._tasks[min(bisect.bisect_right(cumulative, u), len(self._tasks) - 1)]
            draws += 1
            seed = task.seed if task.seed is not None else advanced.get(task.name, self._next_seed[task.name])
            if seed > MAX_SEED:
                raise TaskError(f"Task {task.name!r} has used every seed up to {MAX_SEED} (the largest a dataset column holds): "
                                "start a new run of it with a lower seed_start.")
            if task.seed is None:
                advanced[task.name] = seed + 1
            starts.append(task.label(seed))
        self._draws = draws
        self._next_seed.update(advanced)
        return starts

    def update(self, episode: Task | EpisodeLabel | str, success: bool, episode_return: float = 0.0) -> None:
        """Record one finished episode of ``episode``'s task (call it for every episode, each copy of a group too).

        Raises:
            TaskError: the episode belongs to none of this sampler's tasks (:meth:`task_of`).
            InvalidArgument: ``success`` is not a bool (or 0/1), or ``episode_return`` not a finite number (or one that
                would take the task's return sum past the largest float); nothing is recorded then (:meth:`TaskStats.record`).
        """
        task = self.task_of(episode)
        self._stats[task.name].record(success, episode_return)
        if self.unlock_at is not None:
            while self._unlocked < len(self._tasks):
                below = self._stats[self._tasks[self._unlocked - 1].name]
                if below.seen < self.min_episodes or (below.success_rate or 0.0) < self.unlock_at:
                    break
                self._unlocked += 1

    # -- checkpoints -------------------------------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        """Everything that changes as it runs, as JSON-serialisable data (the seed, the draw count, each
        task's next seed and statistics, the ladder's progress). The configuration (tasks, weighting, floor)
        is the constructor's: build the sampler the same way, then :meth:`load_state_dict`. The ladder's
        progress is kept by task names too (``unlocked_tasks``), so a sampler given the tasks in another
        order restores the rungs that were open, not the same number of rungs from its own first."""
        return {
            "format": STATE_FORMAT,
            "seed": self.seed,
            "draws": self._draws,
            "unlocked": self._unlocked,
            "unlocked_tasks": [task.name for task in self._tasks[: self._unlocked]],
            "tasks": {
                task.name: {"next_seed": self._next_seed[task.name], "stats": self._stats[task.name].to_json()}
                for task in self._tasks
            },
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Continue from a :meth:`state_dict`: the next draws are those the saved sampler would have made.

        The saved ``seed`` replaces the constructor's: a resumed run continues the saved run's stream of draws
        (draw ``i`` is a function of the seed and ``i``), which a different seed would break. The state is
        checked whole before anything is assigned, so a refused state leaves the sampler as it was.

        Raises:
            TaskError: not a sampler state, or one saved with other tasks, by a ladder (``unlock_at``) into a
                sampler without one, or by a ladder whose open rungs are not this sampler's first tasks (its tasks
                in another order; the message names the difference and both orders).
            SamplerStateError: a damaged state (a TaskError: a missing entry, a negative count, a next seed past
                :data:`~gem_core.env.MAX_SEED` + 1, an unlocked count outside the ladder, ``unlocked_tasks`` that
                are not that many distinct task names, outcomes that are not 0/1, returns that are not finite
                floats, ...; the message names the entry).
        """
        problem = _not_a_state(state)
        if problem:
            raise TaskError(f"{problem}; pass what state_dict() returned.")
        saved = _entry(state, "tasks", Mapping, "an object of task names")
        if set(saved) != set(self._by_name):
            missing, extra = sorted(set(self._by_name) - set(saved)), sorted(set(saved) - set(self._by_name))
            raise TaskError(
                f"The saved sampler state has other tasks (not saved: {missing or 'none'}; saved but not configured: "
                f"{extra or 'none'}): build the TaskSampler with the tasks of the run that saved it."
            )
        seed, draws = _count(state, "seed"), _count(state, "draws")
        k = len(self._tasks)
        unlocked = state.get("unlocked", k)
        if isinstance(unlocked, bool) or not isinstance(unlocked, int) or not 1 <= unlocked <= k:
            raise SamplerStateError(f"Damaged TaskSampler state: 'unlocked' is {unlocked!r}, not a number of tasks from 1 to {k}.")
        if unlocked < k and self.unlock_at is None:  # without unlock_at nothing would ever unlock the rest: starved
            raise TaskError(f"The saved sampler state is a ladder's ({unlocked} of {k} tasks unlocked), but this sampler has no "
                            "unlock_at: build the TaskSampler with the unlock_at of the run that saved it.")
        _check_unlocked_rungs(state, list(saved), list(self._by_name), unlocked)
        next_seed, stats = {}, {}
        for name, data in saved.items():
            if not isinstance(data, Mapping):
                raise SamplerStateError(f"Damaged TaskSampler state: task {name!r} is {data!r}, not an object.")
            # MAX_SEED + 1: a task that has drawn the largest seed (its next draw is refused)
            next_seed[name] = _count(data, "next_seed", f"task {name!r}: ", most=MAX_SEED + 1)
            stats[name] = _stats_from_json(_entry(data, "stats", Mapping, "an object", f"task {name!r}: "), self.window, name)
        self.seed, self._draws, self._unlocked = seed, draws, unlocked
        self._next_seed.update(next_seed)
        self._stats.update(stats)


class SamplerStateError(TaskError):
    """A sampler state (a ``gem_task_sampler.json``) that is damaged: no state :meth:`TaskSampler.state_dict` writes."""


def _entry(data: Mapping[str, Any], key: str, kind: type, what: str, where: str = "") -> Any:
    if key not in data:
        raise SamplerStateError(f"Damaged TaskSampler state: {where}no {key!r}.")
    if not isinstance(data[key], kind):
        raise SamplerStateError(f"Damaged TaskSampler state: {where}{key!r} is {data[key]!r}, not {what}.")
    return data[key]


def _check_unlocked_rungs(state: Mapping[str, Any], saved_order: list[str], order: list[str], unlocked: int) -> None:
    """Refuse a ladder state whose open rungs are not the first ``unlocked`` of ``order``: the count alone, applied
    by position to the tasks in another order, would open other rungs (the hardest, say) and hold the easiest at
    the floor. A state saved before ``unlocked_tasks`` was kept has only the count; its rungs are read from the
    order of its saved tasks."""
    if "unlocked_tasks" in state:
        names = state["unlocked_tasks"]
        if (not isinstance(names, list) or len(names) != unlocked or not all(isinstance(n, str) and n in order for n in names)
                or len(set(names)) != len(names)):
            raise SamplerStateError(f"Damaged TaskSampler state: 'unlocked_tasks' is {_shown(names)}, not the names of the "
                                    f"{unlocked} unlocked tasks ('unlocked').")
    else:
        names = saved_order[:unlocked]
    if set(names) != set(order[:unlocked]):
        raise TaskError(f"The saved sampler state is a ladder whose unlocked tasks {names} are not the first {unlocked} of this "
                        f"sampler's order: saved order {saved_order}, configured order {order}. Build the TaskSampler with "
                        "its tasks in the order of the run that saved it.")


def _not_a_state(state: Any) -> str | None:
    """Why ``state`` is no :meth:`TaskSampler.state_dict` at all (not an object, another format), or None: said
    apart from damage, so an in-memory state and a state file each get their own fix."""
    if isinstance(state, Mapping) and state.get("format") == STATE_FORMAT:
        return None
    found = state.get("format") if isinstance(state, Mapping) else type(state).__name__
    return f"Not a TaskSampler state (format {_shown(found)}, expected {STATE_FORMAT!r})"


def _count(data: Mapping[str, Any], key: str, where: str = "", most: int | None = None) -> int:
    value = data.get(key)
    if key not in data:
        raise SamplerStateError(f"Damaged TaskSampler state: {where}no {key!r}.")
    if isinstance(value, bool) or not isinstance(value, int) or value < 0 or (most is not None and value > most):
        bound = ">= 0" if most is None else f"from 0 to {most}"
        raise SamplerStateError(f"Damaged TaskSampler state: {where}{key!r} is {_shown(value)}, not a whole number {bound}.")
    return value


def _finite(value: Any) -> bool:
    """A number a float holds (JSON's NaN and Infinity, and ints past a float's range, are not: they are no return)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return False
    try:
        return math.isfinite(value)
    except OverflowError:
        return False


def _stats_from_json(data: Mapping[str, Any], window: int, name: str) -> TaskStats:
    """:meth:`TaskStats.from_json` of a saved task's stats, each entry checked first (absent ones take their defaults)."""
    where = f"task {name!r} stats: "
    successes = data.get("recent_success", [])
    if not isinstance(successes, list) or any(isinstance(s, bool) or s not in (0, 1) for s in successes):
        raise SamplerStateError(f"Damaged TaskSampler state: {where}'recent_success' is {successes!r}, not a list of 0 and 1.")
    returns = data.get("recent_return", [])
    if not isinstance(returns, list) or not all(_finite(r) for r in returns):
        raise SamplerStateError(f"Damaged TaskSampler state: {where}'recent_return' is {_shown(returns)}, not a list of finite numbers.")
    if len(returns) != len(successes):
        raise SamplerStateError(f"Damaged TaskSampler state: {where}'recent_success' and 'recent_return' differ in length.")
    counts = {key: _count(data, key, where) if key in data else 0 for key in ("episodes", "successes")}
    if counts["successes"] > counts["episodes"]:
        raise SamplerStateError(f"Damaged TaskSampler state: {where}'successes' ({counts['successes']}) exceed 'episodes' ({counts['episodes']}).")
    return_sum = data.get("return_sum", 0.0)
    if not _finite(return_sum):
        raise SamplerStateError(f"Damaged TaskSampler state: {where}'return_sum' is {_shown(return_sum)}, not a finite number.")
    return TaskStats.from_json(data, window)


def _as_tasks(tasks: Sequence[Task | str] | Mapping[str, float]) -> tuple[Task, ...]:
    if isinstance(tasks, Mapping):
        from gem_core.rows.mixture import env_weights

        tasks = [Task(env_id, weight=weight) for env_id, weight in env_weights(tasks).items()]
    elif isinstance(tasks, str):
        tasks = [tasks]
    out = tuple(task if isinstance(task, Task) else Task(task) for task in tasks)
    if not out:
        raise TaskError("A TaskSampler needs at least one task (an env id, a Task, or {env_id: weight}).")
    for task in out:
        task.label(task.seed if task.seed is not None else 0)  # unknown ids fail here, naming the closest ids
    names = [task.name for task in out]
    duplicates = sorted({name for name in names if names.count(name) > 1})
    if duplicates:
        raise TaskError(f"Tasks {duplicates} are given more than once: give each (env id, kwargs) once, with a weight for its share.")
    keys: dict[str, str] = {}
    for name in names:
        other = keys.setdefault(metric_name(name), name)
        if other != name:
            raise TaskError(f"Tasks {other!r} and {name!r} share the metric name {metric_name(name)!r} ('/', whitespace and "
                            "quotes are replaced in metric keys): rename one (Task(..., name=...)).")
    _check_starts_differ(out)
    total = sum(task.weight for task in out)
    if not math.isfinite(total):
        raise TaskError(f"The tasks' weights sum to {total}: scale them down (weights are relative, e.g. 1 and 3).")
    return out


def _check_starts_differ(tasks: Sequence[Task]) -> None:
    """Refuse two tasks one episode start could belong to: an outcome finds its task by its start (env id,
    kwargs, seed) alone, so it would be credited to one of them whichever drew it."""
    by_start: dict[tuple[str, int | None], Task] = {}
    first: dict[str, Task] = {}
    for task in tasks:
        env = task_name(task.env_id, task.env_kwargs)
        other = by_start.get((env, task.seed)) or (first.get(env) if task.seed is None else by_start.get((env, None)))
        if other is not None:
            why = (f"both replay seed {task.seed}" if task.seed is not None and other.seed == task.seed
                   else "both draw every seed" if task.seed is None and other.seed is None
                   else f"the unpinned one draws seed {task.seed if task.seed is not None else other.seed} too")
            raise TaskError(f"Tasks {other.name!r} and {task.name!r} could not be told apart by their episode starts ({env}: {why}): "
                            "give them different env_kwargs, or keep one.")
        by_start[(env, task.seed)] = task
        first.setdefault(env, task)
