"""Prompt datasets for TRL's ``GRPOTrainer`` that pin each prompt to one env, seed and kwargs.

    python -m gem_adapters.trl --env game:Wordle-v0 --n 1000 --out train.jsonl

TRL hands a ``rollout_func`` only the ``"prompt"`` column, already repeated ``num_generations``
times. So the core's episode label (:class:`~gem_core.rows.label.EpisodeLabel`: env id,
seed, kwargs) travels inside the prompt: the last user message carries it as JSON under a ``"gem"``
key beside ``role`` and ``content``. Chat templates ignore unknown message keys, and every copy of a
prompt resets its env to the same state, so a GRPO group compares like with like.
"""

from __future__ import annotations

import reprlib
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from gem_core.errors import InvalidArgument
from gem_core.rollout.vision import message_text
from gem_core.rows import EpisodeLabel, EpisodeRow, episode_rows, parse_label

if TYPE_CHECKING:
    from datasets import Dataset

__all__ = ["GEM_KEY", "episode_label", "make_dataset", "prompt_dataset"]

GEM_KEY = "gem"
"""The key of a prompt's last message that carries the episode's label (env id, seed, env kwargs) to ``rollout_func``."""
_FIX = "Build the training dataset with gem_adapters.trl.make_dataset(env_ids, n) (TRL passes only the prompt column to rollout_func)."


def make_dataset(
    env_ids: str | Sequence[str] | Mapping[str, float],
    n: int,
    *,
    seed_start: int = 0,
    env_kwargs: Mapping[str, Any] | None = None,
    system_prompt: str | None = None,
) -> Dataset:
    """A ``datasets.Dataset`` of ``n`` conversational prompts per env id, seeds ``seed_start .. seed_start + n - 1``;
    for a weighted mixture ``{env_id: weight}``, ``n`` prompts in all, interleaved (:func:`gem_core.rows.episode_rows`).

    The user message is the env's first observation for that seed, so TRL's logs show what the model
    really saw. A vision env's first images go in an ``images`` column (TRL's VLM dataset format).

    Raises:
        InvalidArgument: ``n`` is not positive, ``seed_start`` is negative, or an env id is given twice.
        MixtureError: A mixture weight is not a positive number.
        LabelError: An env id is not registered.
        EnvKwargsError: ``env_kwargs`` is not a mapping, or holds a keyword an env does not take.
    """
    rows = episode_rows(env_ids, n, seed_start=seed_start, env_kwargs=env_kwargs, system_prompt=system_prompt)
    return prompt_dataset(list(rows))


def prompt_dataset(rows: list[EpisodeRow]) -> Dataset:
    """The ``datasets.Dataset`` of ``rows``: a ``prompt`` column carrying each label, and ``images`` for a vision env."""
    from datasets import Dataset

    def prompt(row: EpisodeRow) -> list[dict[str, Any]]:
        if not row.messages:
            raise InvalidArgument(f"row {row.label.to_json()} has no messages: build the rows with with_messages=True")
        # Every message has the same keys so Arrow can store the column.
        *system, user = row.messages
        return [{**m, GEM_KEY: None} for m in system] + [{**user, GEM_KEY: row.label.to_json()}]

    # A vision env's rows: TRL's VLM "images" column beside the prompt (it puts them before the first user text).
    images = any(row.images for row in rows)
    return Dataset.from_list([{"prompt": prompt(row), **({"images": list(row.images or [])} if images else {})} for row in rows])


def episode_label(prompt: Any) -> tuple[EpisodeLabel, str | None]:
    """The episode and the system prompt of a prompt made by :func:`make_dataset`.

    Returns:
        The episode's label, and the text of the prompt's system message (None without one).

    Raises:
        InvalidArgument: The prompt is not a list of message dicts, a system message has no text, or its last message
            has no ``gem`` key (the dataset was not made by :func:`make_dataset`); the message says how to build it.
        gem_core.rows.label.LabelError: The ``gem`` label is not JSON, lacks ``env_id`` or ``seed``, or names an
            unknown env.
    """
    if not isinstance(prompt, list) or not prompt or not isinstance(prompt[-1], dict):
        raise InvalidArgument(
            "GEM's rollout_func expects conversational prompts built by gem_adapters.trl.make_dataset "
            f"(a list of messages); got {type(prompt).__name__}."
        )
    for index, message in enumerate(prompt):  # a raw AttributeError or KeyError from here would name neither the row nor the fix
        if not isinstance(message, dict):
            raise InvalidArgument(f"The prompt's message {index} ({reprlib.repr(message)}) is not a chat message {{'role': ..., 'content': ...}}. {_FIX}")
        if message.get("role") == "system" and not isinstance(message.get("content"), (str, list)):
            raise InvalidArgument(f"The prompt's system message {index} ({reprlib.repr(message)}) has no text in its 'content'. {_FIX}")
    tag = prompt[-1].get(GEM_KEY)
    if not tag:
        raise InvalidArgument(f"The prompt's last message has no 'gem' key, so the env and seed are unknown. {_FIX}")
    system = next((message_text(m["content"]) for m in prompt if m.get("role") == "system"), None)
    return parse_label(tag, fix_hint=_FIX), system


if __name__ == "__main__":  # the command moved to the package (python -m gem_adapters.trl); fail instead of writing nothing
    raise SystemExit("The dataset command is `python -m gem_adapters.trl` (same options).")
