"""Which registered ids build the same sample env, so that a per-id check costing seconds runs once per env
built, not once per id: math:GSM8K's sample is math:Sample's env under another name."""

from __future__ import annotations

import os
from collections.abc import Sequence

from gem_core import spec

__all__ = ["one_id_per_sample_build", "sample_build"]


def sample_build(env_id: str) -> tuple[str, str, int | None]:
    """What the sample env of ``env_id`` is built from: its entry point, the keywords it gets and its turn limit.
    Two ids with one build make the same env. A hub id, its config name and its split are dropped where the sample
    reads local files: :func:`gem_core.envs.dataset.load_rows` ignores the hub id then, and reads a plain file (list)
    for any split. Each ReasoningGym id names its own dataset, so it is a build of its own."""
    env_spec = spec(env_id)
    kwargs = {**env_spec.kwargs, **env_spec.sample_kwargs}
    if isinstance(kwargs.get("data_files"), (str, os.PathLike, list, tuple)):
        for hub_only in ("dataset_path", "dataset_name", "split"):
            kwargs.pop(hub_only, None)
    return env_spec.entry_point, repr(sorted(kwargs.items())), env_spec.max_turns


def one_id_per_sample_build(ids: Sequence[str], already_checked: Sequence[str] = ()) -> list[str]:
    """The first of ``ids`` for each sample build that no id of ``already_checked`` has, in ``ids``' order."""
    seen = {sample_build(i) for i in already_checked}
    kept = []
    for env_id in ids:
        if sample_build(env_id) not in seen:
            seen.add(sample_build(env_id))
            kept.append(env_id)
    return kept


def layers(env) -> list[type]:
    """The wrapper types of ``env``, outermost first, down to the env's own class."""
    found = [type(env)]
    while hasattr(env, "env"):
        env = env.env
        found.append(type(env))
    return found
