"""An RL2 dataset (``rollout.train.path`` / ``train_data.path``) whose rows are GEM episodes::

    python -m gem_adapters.rl2 --env game:GuessTheNumber-v0 --n 1024 --out train.jsonl

Each line reads ``{"extra_info": {"label": "{\\"env_id\\": ..., \\"seed\\": 0, ...}"}}``; the env file
resets the env named by the label (no ``prompt`` column, so rl-square 0.0.2 calls ``reset``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from gem_adapters.rl2.api import dataset_row
from gem_core.rows import episode_rows, refuse_system_prompt

__all__ = ["make_dataset"]


def make_dataset(
    env_ids: str | Sequence[str] | Mapping[str, float], n: int, *, seed_start: int = 0, env_kwargs: Mapping[str, Any] | None = None, system_prompt: str | None = None
) -> list[dict[str, Any]]:
    """``n`` rows per env id, seeds ``seed_start ..`` (a weighted mixture ``{env_id: weight}``: ``n`` rows in all,
    interleaved); unknown ids and bad weights fail before any row is made. Write them with
    :func:`gem_core.rows.write_jsonl`. The system prompt belongs in the env file
    (``system_prompt=``): giving one here is refused (the rows hold no messages).

    Raises:
        InvalidArgument: ``system_prompt`` is given, ``n`` is not positive, ``seed_start`` is negative, or an env id
            is given twice.
        MixtureError: A mixture weight is not a positive number.
        LabelError: An env id is not registered.
        EnvKwargsError: ``env_kwargs`` holds a keyword an env does not take.
    """
    refuse_system_prompt(system_prompt, "RL2", "the env file (GenerateEnv/ResetStepEnv(system_prompt=...))")
    return [dataset_row(row.label) for row in episode_rows(env_ids, n, seed_start=seed_start, env_kwargs=env_kwargs, with_messages=False)]


if __name__ == "__main__":  # the command moved to the package (python -m gem_adapters.rl2); fail instead of writing nothing
    raise SystemExit("The dataset command is `python -m gem_adapters.rl2` (same options).")
