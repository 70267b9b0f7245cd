"""An OpenRLHF prompt dataset whose rows are GEM episodes, from the core's :func:`~gem_core.rows.episode_rows`.

OpenRLHF counts episodes with a prompt dataset; the agent replaces each row's prompt with the env's
first observation, so only the label matters::

    python -m gem_adapters.openrlhf --env game:GuessTheNumber-v0 --n 1024 --out train.jsonl

Each line reads ``{"prompt": "game:GuessTheNumber-v0 seed=0", "label": "{\"env_id\": ..., \"seed\": 0, ...}"}``;
pass it with ``--data.prompt_dataset train.jsonl --data.input_key prompt --data.label_key label``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from gem_core.rows import EpisodeRow, episode_rows, refuse_system_prompt

__all__ = ["dataset_row", "make_dataset"]


def dataset_row(row: EpisodeRow) -> dict[str, str]:
    """One episode as OpenRLHF reads it: a ``prompt`` for its logs and the ``label`` the agent resets from."""
    return {"prompt": f"{row.label.env_id} seed={row.label.seed}", "label": row.label.to_json()}


def make_dataset(
    env_ids: str | Sequence[str] | Mapping[str, float], n: int, *, seed_start: int = 0, env_kwargs: Mapping[str, Any] | None = None, system_prompt: str | None = None
) -> list[dict[str, str]]:
    """``n`` rows per env id, seeds ``seed_start ..`` (a weighted mixture ``{env_id: weight}``: ``n`` rows in all,
    interleaved); unknown ids and bad weights fail before any row is made. Write them with
    :func:`gem_core.rows.write_jsonl`. The system prompt belongs in the agent file's
    ``AgentConfig(system_prompt=...)``: giving one here is refused (the rows hold no messages).

    Raises:
        InvalidArgument: ``system_prompt`` is given, ``n`` is not positive, ``seed_start`` is negative, or an env id
            is given twice.
        MixtureError: A mixture weight is not a positive number.
        LabelError: An env id is not registered.
        EnvKwargsError: ``env_kwargs`` holds a keyword an env does not take.
    """
    refuse_system_prompt(system_prompt, "OpenRLHF", "the agent file's AgentConfig(system_prompt=...)")
    return [dataset_row(row) for row in episode_rows(env_ids, n, seed_start=seed_start, env_kwargs=env_kwargs, with_messages=False)]


if __name__ == "__main__":  # the command moved to the package (python -m gem_adapters.openrlhf); fail instead of writing nothing
    raise SystemExit("The dataset command is `python -m gem_adapters.openrlhf` (same options).")
