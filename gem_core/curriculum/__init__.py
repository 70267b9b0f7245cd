"""Curricula: which task the next episode should be, from how the policy is doing on each.

A GRPO group whose episodes all score the same teaches nothing (its advantages are zero), and with a
fixed mixture most groups are like that early (every task fails) and late (every task succeeds). A
:class:`TaskSampler` keeps per-task success statistics from finished episodes and draws the next episode
starts toward the tasks whose success is neither 0 nor 1, with a floor so no task starves. It is plain
Python with JSON state, so every adapter wires it the same way: the hook that picks an episode start
calls :meth:`~TaskSampler.draw`, the hook that sees finished episodes calls :meth:`~TaskSampler.update`,
and the checkpoint carries :meth:`~TaskSampler.state_dict` (:func:`save_sampler_state`).

- :mod:`~gem_core.curriculum.task`: :class:`Task` (env id, level kwargs, weight, optional pinned seed), :func:`task_name`,
  :func:`metric_name` (a task's part of a metric key), :func:`check_task_envs` (each env built once to check its kwargs).
- :mod:`~gem_core.curriculum.stats`: :class:`TaskStats` (a window of recent outcomes).
- :mod:`~gem_core.curriculum.weighting`: the ``"band"``, ``"progress"`` and ``"uniform"`` rules and the floor.
- :mod:`~gem_core.curriculum.sampler`: :class:`TaskSampler`, :class:`SamplerStateError` (a damaged saved state).
- :mod:`~gem_core.curriculum.ladder`: :func:`difficulty_ladder` (a game's registered levels), :func:`numeric_ladder`.
- :mod:`~gem_core.curriculum.metrics`: :func:`task_metrics` (``gem/task/<task>/success`` ...), :func:`tag_task`.
- :mod:`~gem_core.curriculum.checkpoint`: :func:`save_sampler_state`, :func:`load_sampler_state` (``gem_task_sampler.json``).
- :mod:`~gem_core.curriculum.groups`: :func:`group_starts` (a batch's starts, one per group, for process ``rank``),
  :class:`GroupStarts` (copies that arrive one at a time share their key's start; :class:`RowStarts`: none drawn), :func:`episode_outcome`, :func:`record_outcomes`.
- :mod:`~gem_core.curriculum.shared`: :func:`sampler_from_spec` (plain data, as YAML gives it), :func:`shared_group_starts`
  (one per process, or one per Ray job through a named actor).
"""

from gem_core.curriculum.checkpoint import SAMPLER_STATE_FILE, load_sampler_state, save_sampler_state
from gem_core.curriculum.groups import GroupStarts, Outcome, RowStarts, episode_outcome, group_starts, record_outcomes
from gem_core.curriculum.ladder import difficulty_ladder, numeric_ladder
from gem_core.curriculum.metrics import TASK_KEY, tag_task, task_metrics
from gem_core.curriculum.sampler import SamplerStateError, TaskSampler
from gem_core.curriculum.shared import RayGroupStarts, sampler_from_spec, sampler_spec, shared_group_starts
from gem_core.curriculum.stats import TaskStats
from gem_core.curriculum.task import Task, TaskError, check_task_envs, metric_name, task_name
from gem_core.curriculum.weighting import WEIGHTINGS, Weighting, informative_group_probability

__all__ = [
    "SAMPLER_STATE_FILE", "TASK_KEY", "WEIGHTINGS", "GroupStarts", "Outcome", "RayGroupStarts", "RowStarts", "SamplerStateError", "Task", "TaskError", "TaskSampler",
    "TaskStats", "Weighting", "check_task_envs", "difficulty_ladder", "episode_outcome", "group_starts", "informative_group_probability",
    "load_sampler_state", "metric_name", "numeric_ladder", "record_outcomes", "sampler_from_spec", "sampler_spec", "save_sampler_state", "shared_group_starts",
    "tag_task", "task_metrics", "task_name",
]
