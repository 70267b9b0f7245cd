"""Which env and seed a dataset row stands for, as one JSON label every adapter shares.

Frameworks hand an adapter one dataset row at a time (OpenRLHF's ``label`` column, RL2's sample,
TRL's prompt, verl's ``extra_info``), so a GEM training dataset carries each episode as
``{"env_id": "game:GuessTheNumber-v0", "seed": 3, "env_kwargs": {}}``. Every mistake is reported with
the fix, because a bad row otherwise surfaces as an opaque error deep inside a framework's worker.
"""

from __future__ import annotations

import difflib
import json
import math
import numbers
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from gem_core.env import MAX_SEED
from gem_core.errors import DependencyNotInstalled, GemError
from gem_core.registry import spec as env_spec

__all__ = ["MAX_SEED", "EnvKwargsError", "EpisodeLabel", "LabelError", "make_label_env", "parse_label", "refuse_repeated_keys"]

_DATASET_HINT = "Build the dataset with your framework adapter's make_dataset (see the README)."
_LABEL_KEYS = ("env_id", "seed", "env_kwargs")
# verl's extra_info is the label and also holds the row's index, which verl reads (gem_adapters.verl.make_dataset writes it).
_ROW_KEYS = ("index",)


def _not_json(err: ValueError | RecursionError) -> str:
    """Why ``json.loads`` refused text, in words that fit a dataset row: a number past Python's 4300-digit
    limit on int conversion, or nesting past the interpreter's stack."""
    if isinstance(err, json.JSONDecodeError):
        return str(err)
    if isinstance(err, RecursionError):
        return "nested too deeply"
    return str(err).partition(":")[0]


def _unknown_keys(label: Mapping[Any, Any], *, other_keys: bool) -> list[str]:
    """The label's keys GEM does not read, each shown with the closest key it does; with ``other_keys``, only those
    close to one of GEM's (a misspelling), the others being the row's own.

    A key whose value is None counts as absent: parquet stores verl's ``extra_info`` as a struct of every row's keys,
    so a GEM row in a dataset shared with another agent loop reads that loop's keys as None.
    """
    known = _LABEL_KEYS + _ROW_KEYS
    unknown = sorted((str(key) for key, value in label.items() if key not in known and value is not None), key=str.lower)
    closest = {key: difflib.get_close_matches(key.lower(), known, n=1) for key in unknown}
    if other_keys:
        unknown = [key for key in unknown if closest[key]]
    named = [f"{_shown(key)} (did you mean {closest[key][0]!r}?)" if closest[key] else _shown(key) for key in unknown[:5]]
    return named + ([f"{len(unknown) - 5} more"] if len(unknown) > 5 else [])  # thousands of stray keys: a short message


def _shown(value: Any) -> str:
    """``repr(value)`` cut short; an int over 4300 digits has no repr at all (Python refuses to convert it)."""
    try:
        text = repr(value)
    except ValueError:
        return "a value holding a number over 4300 digits"
    return text if len(text) <= 200 else text[:200] + "..."


class LabelError(GemError, ValueError):
    """A dataset label that does not name a GEM episode; the message says how to fix the dataset."""


def refuse_repeated_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """``json.loads``' ``object_pairs_hook`` for text a person wrote (a label, its env_kwargs, ``--env-kwargs``): JSON
    keeps the last of a repeated key, so ``{"seed": 1, "seed": 2}`` played another episode than its author may have meant.

    Raises:
        LabelError: a key is given twice in one object (the message names it; callers add where and the fix).
    """
    data: dict[str, Any] = {}
    for key, value in pairs:
        if key in data:
            raise LabelError(f"gives the key {_shown(key)} twice (JSON would keep only the last); give each key once")
        data[key] = value
    return data


def _non_finite_key(env_kwargs: Mapping[Any, Any]) -> Any:
    """The env_kwargs key whose value holds NaN or an infinity at any depth (None: none does): JSON has no such number,
    so a label holding one is written as text that strict readers refuse."""
    for key, value in env_kwargs.items():
        stack, seen = [value], set()
        while stack:
            item = stack.pop()
            if isinstance(item, float) and not math.isfinite(item):
                return key
            if isinstance(item, (Mapping, list, tuple)) and id(item) not in seen:  # seen: a mapping built in code may hold itself
                seen.add(id(item))
                stack.extend(item.values() if isinstance(item, Mapping) else item)
    return None


def _non_finite_error(key: Any, fix_hint: str) -> LabelError:
    return LabelError(f"Dataset label env_kwargs {_shown(key)} holds NaN or an infinity, which JSON has no number for: give a "
                      f"finite number (or leave the key out for the env's default). {fix_hint}".rstrip())


@dataclass(frozen=True)
class EpisodeLabel:
    """One episode: the env id, the seed that fixes it, and constructor overrides for the env."""

    env_id: str
    seed: int
    env_kwargs: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> str:
        """The label as JSON text with sorted keys (what a dataset row carries; :func:`parse_label` reads it), standard
        JSON only: a bare NaN would make the dataset unreadable to strict readers.

        Raises:
            LabelError: an env_kwargs value holds NaN or an infinity (named by its key).
        """
        key = _non_finite_key(self.env_kwargs)
        if key is not None:
            raise _non_finite_error(key, "")
        return json.dumps({"env_id": self.env_id, "seed": self.seed, "env_kwargs": self.env_kwargs}, sort_keys=True, allow_nan=False)


def parse_label(label: str | Mapping[str, Any], *, fix_hint: str = _DATASET_HINT, other_keys: bool = False) -> EpisodeLabel:
    """Read a label (JSON text or an already decoded mapping) and check that its env id is registered.

    ``fix_hint`` ends every error message: the adapter's own instruction for building the dataset. ``other_keys``: the
    label is a field the row shares with its framework (verl's ``extra_info``, where datasets also keep ``split``,
    ``question``...): keys unlike any of GEM's are the row's own and passed over; a near miss is still refused.

    A label holds ``env_id``, ``seed`` (an integer, numpy's included) and optionally ``env_kwargs`` (a mapping, or
    its JSON text); a verl row's ``extra_info`` also its ``index``. Any other key is refused rather than dropped,
    since a misspelt ``env_kwargs`` or ``seed`` would otherwise play the episode with the env's defaults.

    Raises:
        LabelError: the label is not JSON, gives a key twice, has a key other than those, lacks ``env_id`` or ``seed``,
            has a seed outside 0 to :data:`MAX_SEED`, has ``env_kwargs`` that are not an object (or have a key that is
            not a string, or a NaN or infinity, which JSON cannot write), or names an unknown env or a malformed
            ``remote:`` id.
    """
    if isinstance(label, str):
        text = label
        try:
            label = json.loads(text, object_pairs_hook=refuse_repeated_keys)
        except LabelError as err:
            raise LabelError(f"Dataset label {text[:80]!r} {err}. {fix_hint}") from None
        except (ValueError, RecursionError) as err:
            raise LabelError(f"Dataset label {text[:80]!r} is not JSON ({_not_json(err)}). {fix_hint}") from None
    if not isinstance(label, Mapping):
        raise LabelError(f"Dataset label must be a JSON object, got {type(label).__name__}. {fix_hint}")
    unknown = _unknown_keys(label, other_keys=other_keys)
    if unknown:  # before the missing keys: a misspelt 'seed' is reported as itself
        noun = "keys" if len(unknown) > 1 else "key"
        raise LabelError(
            f"Dataset label {_shown(dict(label))} has unknown {noun} {', '.join(unknown)}: a label holds 'env_id', 'seed' and "
            f"optionally 'env_kwargs' (a verl row's extra_info also its 'index'); rename or drop the {noun}. {fix_hint}"
        )
    missing = [key for key in ("env_id", "seed") if key not in label]
    if missing:
        raise LabelError(
            f"Dataset label {_shown(dict(label))} has no {' or '.join(repr(k) for k in missing)}: every row needs the env id "
            f"and the seed that fixes its episode. {fix_hint}"
        )
    env_id, seed, env_kwargs = label["env_id"], label["seed"], label.get("env_kwargs")
    if env_kwargs is None:  # absent (or None, where parquet fills another row's key)
        env_kwargs = {}
    if isinstance(env_kwargs, str):  # a column that stores them as JSON text (their keys vary by env)
        try:
            env_kwargs = json.loads(env_kwargs, object_pairs_hook=refuse_repeated_keys)
        except LabelError as err:
            raise LabelError(f"Dataset label env_kwargs {env_kwargs[:80]!r} {err}. {fix_hint}") from None
        except (ValueError, RecursionError) as err:
            raise LabelError(f"Dataset label env_kwargs {env_kwargs[:80]!r} is not JSON ({_not_json(err)}). {fix_hint}") from None
    if isinstance(seed, numbers.Integral) and not isinstance(seed, bool):  # numpy's integers too: what numpy or pandas code hands over
        seed = int(seed)
    if not isinstance(seed, int) or isinstance(seed, bool) or not 0 <= seed <= MAX_SEED:  # gymnasium refuses a negative seed at reset
        raise LabelError(
            f"Dataset label seed must be an integer from 0 to {MAX_SEED} (a dataset column holds 64-bit seeds), got {_shown(seed)}. {fix_hint}"
        )
    if not isinstance(env_id, str):  # the registry's own error would not say how to fix the dataset
        raise LabelError(f"Dataset label env_id must be a registered env id such as 'game:Wordle-v0', got {_shown(env_id)}. {fix_hint}")
    if not isinstance(env_kwargs, Mapping):
        raise LabelError(
            f"Dataset label env_kwargs must be a JSON object of the env's keyword arguments (or its JSON text), got {_shown(env_kwargs)}. "
            f"Give {{}} or leave env_kwargs out for the env's defaults. {fix_hint}"
        )
    not_named = [key for key in env_kwargs if not isinstance(key, str)]
    if not_named:  # keyword arguments are names: the env could never take them (and a mixed-type dict does not even sort)
        raise LabelError(f"Dataset label env_kwargs keys must be strings (the env's keyword names), got {_shown(not_named[0])}. {fix_hint}")
    non_finite = _non_finite_key(env_kwargs)
    if non_finite is not None:
        raise _non_finite_error(non_finite, fix_hint)
    try:
        env_spec(env_id)
    except (KeyError, ValueError) as err:  # UnknownEnvError names the closest ids; InvalidArgument a malformed remote: id
        raise LabelError(f"{err} Fix the env_id in the dataset. {fix_hint}") from None
    return EpisodeLabel(env_id=env_id, seed=seed, env_kwargs=dict(env_kwargs))


class EnvKwargsError(LabelError):
    """``env_kwargs`` that an env id's constructor refuses (an unknown name, a value out of range)."""


#: Keywords the way to the env binds itself: :func:`gem_core.placement.make_env`'s ``env_id`` and ``env_backend``, the Ray
#: placement's ``env``, ``pool`` and ``pool_options``, :func:`gem_core.registry.make`'s ``id``. In a label's env_kwargs they
#: would never reach the env: a row's ``{"env_backend": "local"}`` overrode the job's ``$GEM_ENV_BACKEND`` at training time.
_PLACEMENT_KEYWORDS = frozenset({"env_backend", "pool", "pool_options", "env", "env_id", "id"})


def _kwargs_text(kwargs: Mapping[Any, Any]) -> str:
    """``kwargs`` as JSON for a message, or their repr where JSON cannot hold them (keys of mixed types, which do not
    sort; an int over 4300 digits): the message must not fail in place of the error it reports."""
    try:
        return json.dumps(kwargs, default=str, sort_keys=True)
    except (TypeError, ValueError, RecursionError):
        return _shown(kwargs)


def _kwargs_error(label: EpisodeLabel, reason: object) -> EnvKwargsError:
    registered = _kwargs_text(env_spec(label.env_id).kwargs)
    return EnvKwargsError(
        f"env_kwargs {_kwargs_text(label.env_kwargs)} do not fit {label.env_id} ({reason}); its registered "
        f"kwargs are {registered}, and max_turns (the turn limit): give only those names, with values the env accepts."
    )


def _check_kwargs_before_placing(label: EpisodeLabel) -> None:
    """Refuse the label's kwargs here, as :func:`gem_core.registry.make` would before calling the constructor: the Ray
    placement builds the env only at its first reset, in an actor, so a dataset whose every episode fails in training was
    otherwise written without a word."""
    try:
        env_spec(label.env_id).check_kwargs(**label.env_kwargs)
    except DependencyNotInstalled:  # not installed here: where the env is built says so
        return
    except (TypeError, ValueError) as err:
        raise _kwargs_error(label, err) from None


def make_label_env(label: EpisodeLabel) -> Any:
    """The env of ``label``, built where episodes' envs live (:func:`gem_core.placement.make_env`).

    Where the env is not built at once (``$GEM_ENV_BACKEND=ray``: at its first reset, in an actor), its kwargs are checked
    here before it is placed, so a bad dataset row is still refused when the dataset is built.

    Raises:
        EnvKwargsError: the label's ``env_kwargs`` do not fit the env (a name it does not take, a placement keyword such as
            ``env_backend``, a value out of range), named with the env's registered kwargs; a dataset row, a curriculum task
            and an adapter's hook all get this message rather than the constructor's bare TypeError.
        InvalidArgument: ``$GEM_ENV_BACKEND`` is not a placement, or a ``$GEM_RAY_ENV_*`` value is bad (named as the variable).
        DependencyNotInstalled: the env's extra is not installed (the message has the install line).
    """
    from gem_core import placement

    taken = sorted(_PLACEMENT_KEYWORDS.intersection(label.env_kwargs))
    if taken:
        raise _kwargs_error(label, f"{', '.join(taken)} would choose the env or its placement, not reach the env: the label's env_id "
                                   "says which env is built, and the job's $GEM_ENV_BACKEND and $GEM_RAY_ENV_* where")
    if placement.env_backend_from_environment() != "local":
        # Nothing is built here (the Ray placement builds the env at its first reset): the kwargs are checked now, and what
        # fails in make_env is the placement's own setting (an unknown $GEM_ENV_BACKEND, a bad $GEM_RAY_ENV_*), named as such.
        _check_kwargs_before_placing(label)
        return placement.make_env(label.env_id, **label.env_kwargs)
    try:
        return placement.make_env(label.env_id, **label.env_kwargs)
    except (TypeError, ValueError) as err:  # the constructor refused a value
        if isinstance(err, LabelError):
            raise
        raise _kwargs_error(label, err) from None
