"""The rows of a GEM training dataset: one episode (env id, seed, env kwargs) per row, built once here.

Every framework reads its prompts from a dataset, so every adapter ships a ``make_dataset``. What a row
*is* does not depend on the framework: a validated :class:`EpisodeLabel` and, for frameworks that show
or length-filter the prompt, the env's first observation as chat messages. This module builds those
rows; an adapter only lays them out in its framework's columns (TRL's prompt messages, verl's parquet,
OpenRLHF's and RL2's JSON lines). The shared command line of every adapter's
``python -m gem_adapters.<fw>.make_dataset`` lives beside the CLI, in :mod:`gem_core.cli.dataset`.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from gem_core.rows.label import EpisodeLabel, parse_label

__all__ = ["EpisodeRow", "episode_rows", "refuse_system_prompt"]


@dataclass(frozen=True)
class EpisodeRow:
    """One dataset row: the episode it stands for and, if asked for, the prompt the policy will see first."""

    label: EpisodeLabel
    index: int
    """Position in the dataset (0-based, over all env ids)."""
    messages: list[dict[str, str]] | None = None
    """System message (if any) and the env's first observation for this seed as a user message."""
    images: list[Any] | None = None
    """The images of the first observation (a vision env's ``info["images"]``), shown before its text."""


def episode_rows(
    env_ids: str | Sequence[str],
    n: int,
    *,
    seed_start: int = 0,
    env_kwargs: Mapping[str, Any] | None = None,
    system_prompt: str | None = None,
    with_messages: bool = True,
) -> Iterator[EpisodeRow]:
    """``n`` rows per env id, seeds ``seed_start .. seed_start + n - 1``.

    Every env id is checked (unknown ids fail, naming the closest registered ids) before the first row
    is produced, so a dataset is never half written. ``with_messages`` resets each env once per seed to
    render the first observation; frameworks that replace the prompt themselves skip that cost.

    Raises:
        ValueError: ``n`` is not positive.
        gem_core.rows.label.LabelError: an unknown env id or bad ``env_kwargs``.
    """
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ValueError(f"n (the number of episodes per env id) must be a positive integer, got {n!r}.")
    ids = [env_ids] if isinstance(env_ids, str) else list(env_ids)
    if not ids:
        raise ValueError("episode_rows needs at least one env id.")
    labels = [parse_label({"env_id": env_id, "seed": seed_start, "env_kwargs": dict(env_kwargs or {})}) for env_id in ids]
    index = 0
    for first in labels:
        env = _make(first) if with_messages else None
        try:
            for seed in range(seed_start, seed_start + n):
                label = EpisodeLabel(first.env_id, seed, dict(first.env_kwargs))
                messages, images = None, None
                if env is not None:
                    observation, info = env.reset(seed=seed)
                    images = list(info.get("images") or []) or None
                    messages = ([{"role": "system", "content": system_prompt}] if system_prompt else []) + [
                        {"role": "user", "content": observation}
                    ]
                yield EpisodeRow(label=label, index=index, messages=messages, images=images)
                index += 1
        finally:
            if env is not None:
                env.close()


def refuse_system_prompt(system_prompt: str | None, framework: str, where: str) -> None:
    """For frameworks whose rows carry only the label (the agent renders the first observation itself):
    a system prompt given to ``make_dataset`` would be silently lost, so it is refused, naming ``where`` it goes."""
    if system_prompt is not None:
        raise ValueError(f"{framework}'s rows carry no messages (its agent renders the first observation), so make_dataset "
                         f"cannot hold a system prompt; set it in {where}.")


def _make(label: EpisodeLabel) -> Any:
    from gem_core import placement

    return placement.make_env(label.env_id, **label.env_kwargs)
