"""Per-task statistics of a batch of finished episodes, so a mixture's parts can be told apart on a dashboard.

:func:`~gem_core.rollout.metrics.trajectory_metrics` averages over the whole batch, which hides a task
that is stuck behind one that is learnt. Here each task gets its own ``gem/task/<task>/success``,
``.../return`` and ``.../episodes``. The task of a trajectory is ``metrics["task"]`` when the adapter tagged
it (:func:`tag_task`, with the :func:`~gem_core.curriculum.task.task_name` of its label: env id and level
kwargs), else its env id.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from typing import TYPE_CHECKING

from gem_core.curriculum.task import metric_name, task_name
from gem_core.rows.label import EpisodeLabel

if TYPE_CHECKING:  # the sampler side of this package needs no rollout engine
    from gem_core.rollout.trajectory import TokenTrajectory

__all__ = ["TASK_KEY", "tag_task", "task_metrics"]

TASK_KEY = "task"
"""The key of ``TokenTrajectory.metrics`` that names an episode's task."""


def tag_task(trajectory: TokenTrajectory, label: EpisodeLabel, name: str | None = None) -> TokenTrajectory:
    """Name ``trajectory``'s task (``name``, else its label's :func:`task_name`) in its metrics; returns it."""
    trajectory.metrics[TASK_KEY] = name or task_name(label.env_id, label.env_kwargs)
    return trajectory


def task_metrics(trajectories: Sequence[TokenTrajectory], *, prefix: str = "gem/task/") -> dict[str, float]:
    """``{prefix}<task>/success`` (rate), ``/return`` (mean) and ``/episodes`` (count) per task of the batch
    (``<task>``: its :func:`~gem_core.curriculum.task.metric_name`, no ``/`` or whitespace):
    the batch's own :func:`~gem_core.rollout.metrics.trajectory_metrics` of each task's episodes."""
    from gem_core.rollout.metrics import trajectory_metrics  # the rollout engine only where trajectories exist

    groups: dict[str, list[TokenTrajectory]] = defaultdict(list)
    for trajectory in trajectories:
        groups[metric_name(str(trajectory.metrics.get(TASK_KEY) or trajectory.env_id or "unknown"))].append(trajectory)
    out: dict[str, float] = {}
    for name in sorted(groups):
        every = trajectory_metrics(groups[name], prefix="")
        out.update({f"{prefix}{name}/{key}": every[key] for key in ("success", "return", "episodes")})
    return out
