"""The rows of the parquet file verl's ``RLHFDataset`` reads, one per GEM episode (env id + seed).

    python -m gem_adapters.verl --env game:Wordle-v0 --n 1000 --out train.parquet
    python -m gem_adapters.verl --env game:Wordle-v0 --n 64 --seed-start 1000000 --out val.parquet

Columns (those verl reads, plus what :class:`gem_adapters.verl.agent_loop.GemAgentLoop` needs):

- ``prompt``: chat messages holding the env's first observation for that seed (verl filters rows whose
  prompt is longer than ``data.max_prompt_length`` and logs it; the agent loop resets the env itself
  and gets the same text);
- ``agent_name``: the ``name`` of the agent loop config entry (``gem_env``);
- ``data_source``: the env id (verl groups validation scores by it);
- ``reward_model``: ``{"style": "env", "ground_truth": ""}``: verl's reward managers read
  ``ground_truth``, but GEM's loop sets ``reward_score`` itself, so verl never scores these rows;
- ``extra_info``: ``env_id``, ``seed``, ``env_kwargs`` (a JSON object string: parquet cannot store an
  empty struct) and ``index``.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from gem_core.errors import InvalidArgument
from gem_core.rows import EpisodeRow, episode_rows
from gem_core.transport.atomic_file import atomic_path

__all__ = ["make_dataset", "require_text_env", "verl_rows", "write_dataset"]

DEFAULT_AGENT_NAME = "gem_env"

VISION_ENV_PREFIX = "vision:"
"""The namespace of GEM's vision envs (they show images beside their text)."""


def make_dataset(
    env_ids: str | Sequence[str] | Mapping[str, float], n: int, *, seed_start: int = 0, env_kwargs: Mapping[str, Any] | None = None, system_prompt: str | None = None
) -> list[dict[str, Any]]:
    """verl's rows for seeds ``seed_start .. seed_start + n - 1`` of each env id (write them with :func:`write_dataset`);
    for a weighted mixture ``{env_id: weight}``, ``n`` rows in all, interleaved (:func:`gem_core.rows.episode_rows`).
    Their ``agent_name`` is :data:`DEFAULT_AGENT_NAME` (``gem_env``); for another agent-loop entry, set the
    rows' ``agent_name`` (or use the CLI's ``--agent-name``).

    Raises:
        gem_core.rows.label.LabelError: an unknown env id (the message names close ids).
        InvalidArgument: (a ValueError) ``n`` is not positive, ``seed_start`` is negative, an env id is given twice,
            or an env shows images (:func:`require_text_env`).
        MixtureError: a mixture weight is not a positive number.
        EnvKwargsError: ``env_kwargs`` holds a keyword an env does not take.
    """
    rows = episode_rows(env_ids, n, seed_start=seed_start, env_kwargs=env_kwargs, system_prompt=system_prompt)
    return verl_rows(rows, DEFAULT_AGENT_NAME)


def verl_rows(rows: Iterable[EpisodeRow], agent_name: str) -> list[dict[str, Any]]:
    """The core's episode rows in verl's columns, run by the agent-loop config entry named ``agent_name``.

    Raises:
        InvalidArgument: ``agent_name`` is blank (no agent-loop entry can have that name), or a row's env shows
            images (:func:`require_text_env`).
    """
    if not isinstance(agent_name, str) or not agent_name.strip():
        raise InvalidArgument(
            f"agent_name={agent_name!r}: the rows need the name of an agent-loop entry in verl's agent_loop_config_path "
            f"YAML ({DEFAULT_AGENT_NAME!r} in GEM's)."
        )
    rows = list(rows)
    for row in rows:
        require_text_env(row.label.env_id, shows_images=bool(row.images))
    return [
        {
            "data_source": row.label.env_id,
            "agent_name": agent_name,
            "prompt": row.messages,
            "reward_model": {"style": "env", "ground_truth": ""},
            "extra_info": {
                "env_id": row.label.env_id,
                "seed": row.label.seed,
                "env_kwargs": json.dumps(row.label.env_kwargs, sort_keys=True),
                "index": row.index,
            },
        }
        for row in rows
    ]


def require_text_env(env_id: str, *, shows_images: bool = False) -> None:
    """Refuse a vision env: GEM's verl adapter gives verl token ids only (no processor, no ``multi_modal_data``),
    so every episode of one would fail in training.

    Args:
        env_id: The env id (the ``vision:*`` envs show images).
        shows_images: Whether the env showed images (a row's first observation had some).

    Raises:
        InvalidArgument: ``env_id`` is a vision env, or ``shows_images``; the message names the limitation and
            the adapter that trains vision envs.
    """
    if shows_images or env_id.startswith(VISION_ENV_PREFIX):
        raise InvalidArgument(
            f"{env_id} shows images, and GEM's verl adapter cannot pass images to verl (its agent loop sends token ids "
            "only: no processor, no multi_modal_data); train vision envs with GEM's TRL adapter (gem_adapters.trl), or "
            "give verl text envs only."
        )


def write_dataset(rows: list[dict[str, Any]], out: str | Path) -> Path:
    """Write ``rows`` as parquet (through pandas/pyarrow, which verl installs), whole or not at all."""
    import pandas as pd

    with atomic_path(out) as partial:
        pd.DataFrame(rows).to_parquet(partial, index=False)
    return Path(out)


if __name__ == "__main__":  # the command moved to the package (python -m gem_adapters.verl); fail instead of writing nothing
    raise SystemExit("The dataset command is `python -m gem_adapters.verl` (same options).")
