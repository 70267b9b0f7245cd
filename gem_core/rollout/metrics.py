"""Batch statistics of finished episodes, the one definition every adapter forwards to its logger.

Errors that the session turned into truncations (an env step that raised, a template that could not
render a turn) otherwise show up only as zero rewards; :func:`trajectory_metrics` counts them next to
the usual episode statistics so a broken env is seen in the trainer's own metrics.
"""

from __future__ import annotations

from collections.abc import Sequence

from gem_core.env import episode_success
from gem_core.rollout.trajectory import TokenTrajectory

__all__ = ["trajectory_metrics"]


def trajectory_metrics(trajectories: Sequence[TokenTrajectory], *, prefix: str = "gem/") -> dict[str, float]:
    """Means and rates over ``trajectories``, keyed ``{prefix}{name}``; ``{}`` for an empty batch.

    Keys: ``episodes``, ``env_error_rate`` (the share of episodes ended by an error), ``env_error_turns``
    (the total of their error turns), ``truncated``, ``terminated``, ``turns`` (mean), ``success`` (rate; an episode succeeds when
    the session's verdict, :func:`gem_core.env.episode_success`), ``format_errors`` (mean per episode), ``return`` (mean).
    """
    n = len(trajectories)
    if n == 0:
        return {}
    errors = [sum(1 for info in t.infos if "error" in info) for t in trajectories]
    values = {
        "episodes": float(n),
        "env_error_rate": sum(1 for e in errors if e) / n,
        "env_error_turns": float(sum(errors)),
        "truncated": sum(1 for t in trajectories if t.truncated) / n,
        "terminated": sum(1 for t in trajectories if t.terminated) / n,
        "turns": sum(t.num_turns for t in trajectories) / n,
        "success": sum(1 for t in trajectories if episode_success(t.infos, t.episode_return, t.terminated)) / n,
        "format_errors": sum(sum(1 for i in t.infos if i.get("format_error")) for t in trajectories) / n,
        "return": sum(t.episode_return for t in trajectories) / n,
    }
    return {f"{prefix}{key}": value for key, value in values.items()}
