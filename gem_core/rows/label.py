"""Which env and seed a dataset row stands for, as one JSON label every adapter shares.

Frameworks hand an adapter one dataset row at a time (OpenRLHF's ``label`` column, RL2's sample,
TRL's prompt, verl's ``extra_info``), so a GEM training dataset carries each episode as
``{"env_id": "game:GuessTheNumber-v0", "seed": 3, "env_kwargs": {}}``. Every mistake is reported with
the fix, because a bad row otherwise surfaces as an opaque error deep inside a framework's worker.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from gem_core.env import MAX_SEED
from gem_core.errors import GemError
from gem_core.registry import spec as env_spec

__all__ = ["MAX_SEED", "EnvKwargsError", "EpisodeLabel", "LabelError", "make_label_env", "parse_label"]

_DATASET_HINT = "Build the dataset with your framework adapter's make_dataset (see the README)."


def _not_json(err: ValueError | RecursionError) -> str:
    """Why ``json.loads`` refused text, in words that fit a dataset row: a number past Python's 4300-digit
    limit on int conversion, or nesting past the interpreter's stack."""
    if isinstance(err, json.JSONDecodeError):
        return str(err)
    if isinstance(err, RecursionError):
        return "nested too deeply"
    return str(err).partition(":")[0]


def _shown(value: Any) -> str:
    """``repr(value)`` cut short; an int over 4300 digits has no repr at all (Python refuses to convert it)."""
    try:
        text = repr(value)
    except ValueError:
        return "a value holding a number over 4300 digits"
    return text if len(text) <= 200 else text[:200] + "..."


class LabelError(GemError, ValueError):
    """A dataset label that does not name a GEM episode; the message says how to fix the dataset."""


@dataclass(frozen=True)
class EpisodeLabel:
    """One episode: the env id, the seed that fixes it, and constructor overrides for the env."""

    env_id: str
    seed: int
    env_kwargs: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> str:
        """The label as JSON text with sorted keys (what a dataset row carries; :func:`parse_label` reads it)."""
        return json.dumps({"env_id": self.env_id, "seed": self.seed, "env_kwargs": self.env_kwargs}, sort_keys=True)


def parse_label(label: str | Mapping[str, Any], *, fix_hint: str = _DATASET_HINT) -> EpisodeLabel:
    """Read a label (JSON text or an already decoded mapping) and check that its env id is registered.

    ``fix_hint`` ends every error message: the adapter's own instruction for building the dataset.

    Raises:
        LabelError: the label is not JSON, lacks ``env_id`` or ``seed``, has a seed outside 0 to :data:`MAX_SEED`,
            or names an unknown env.
    """
    if isinstance(label, str):
        text = label
        try:
            label = json.loads(text)
        except (ValueError, RecursionError) as err:
            raise LabelError(f"Dataset label {text[:80]!r} is not JSON ({_not_json(err)}). {fix_hint}") from None
    if not isinstance(label, Mapping):
        raise LabelError(f"Dataset label must be a JSON object, got {type(label).__name__}. {fix_hint}")
    missing = [key for key in ("env_id", "seed") if key not in label]
    if missing:
        raise LabelError(
            f"Dataset label {_shown(dict(label))} has no {' or '.join(repr(k) for k in missing)}: every row needs the env id "
            f"and the seed that fixes its episode. {fix_hint}"
        )
    env_id, seed, env_kwargs = label["env_id"], label["seed"], label.get("env_kwargs") or {}
    if isinstance(env_kwargs, str):  # a column that stores them as JSON text (their keys vary by env)
        try:
            env_kwargs = json.loads(env_kwargs)
        except (ValueError, RecursionError) as err:
            raise LabelError(f"Dataset label env_kwargs {env_kwargs[:80]!r} is not JSON ({_not_json(err)}). {fix_hint}") from None
    if not isinstance(seed, int) or isinstance(seed, bool) or not 0 <= seed <= MAX_SEED:  # gymnasium refuses a negative seed at reset
        raise LabelError(
            f"Dataset label seed must be an integer from 0 to {MAX_SEED} (a dataset column holds 64-bit seeds), got {_shown(seed)}. {fix_hint}"
        )
    if not isinstance(env_id, str):  # the registry's own error would not say how to fix the dataset
        raise LabelError(f"Dataset label env_id must be a registered env id such as 'game:Wordle-v0', got {_shown(env_id)}. {fix_hint}")
    if not isinstance(env_kwargs, Mapping):
        raise LabelError(f"Dataset label env_kwargs must be a JSON object, got {_shown(env_kwargs)}.")
    try:
        env_spec(env_id)
    except KeyError as err:  # UnknownEnvError names the closest ids
        raise LabelError(f"{err} Fix the env_id in the dataset. {fix_hint}") from None
    return EpisodeLabel(env_id=env_id, seed=seed, env_kwargs=dict(env_kwargs))


class EnvKwargsError(LabelError):
    """``env_kwargs`` that an env id's constructor refuses (an unknown name, a value out of range)."""


def make_label_env(label: EpisodeLabel) -> Any:
    """The env of ``label``, built where episodes' envs live (:func:`gem_core.placement.make_env`).

    Raises:
        EnvKwargsError: the env's constructor refused the label's ``env_kwargs`` (a name it does not take,
            a value out of range), named with the env's registered kwargs; a dataset row, a curriculum task
            and an adapter's hook all get this message rather than the constructor's bare TypeError.
    """
    from gem_core import placement
    from gem_core.registry import spec

    try:
        return placement.make_env(label.env_id, **label.env_kwargs)
    except (TypeError, ValueError) as err:  # the constructor refused a name or a value
        if isinstance(err, LabelError):
            raise
        registered = json.dumps(spec(label.env_id).kwargs, default=str, sort_keys=True)
        raise EnvKwargsError(
            f"env_kwargs {json.dumps(label.env_kwargs, sort_keys=True)} do not fit {label.env_id} ({err}); its registered kwargs are "
            f"{registered}, and max_turns (the turn limit): give only those names, with values the env accepts."
        ) from None
