"""Weighted env mixtures: ``{env_id: weight}`` and the ``--env ID:WEIGHT`` option that spells one.

A mixture is drawn row by row from a seeded generator, so a dataset is one reproducible stream of mixed
tasks (not a block per env id) whose proportions match the weights within sampling error. Every weight
and every id is checked before anything is built, and each mistake names the key and the fix, because a
bad weight otherwise surfaces as a lopsided training run hours later.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator, Mapping, Sequence
from numbers import Real

import numpy as np

from gem_core.errors import GemError
from gem_core.registry import spec as env_spec

__all__ = ["EnvIds", "MixtureError", "env_weights", "mixture_draws", "parse_env_option", "parse_env_options"]

EnvIds = str | Sequence[str] | Mapping[str, float]
"""What every ``make_dataset`` and :func:`~gem_core.rows.episode_rows` take: one id, a list of ids
(``n`` rows each, in blocks), or a weighted mixture (``n`` rows in all, interleaved).
"""

_EXAMPLE = "e.g. {'game:GuessTheNumber-v0': 3, 'game:Wordle-v0': 1}"


class MixtureError(GemError, ValueError):
    """A mixture weight or id that cannot be used; the message names the key and the fix."""


def env_weights(mixture: Mapping[str, object]) -> dict[str, float]:
    """The checked weights of a ``{env_id: weight}`` mixture, as floats, in the mapping's order.

    Raises:
        MixtureError: an empty mixture, a key that is not a string, a weight that is not a finite number above
            zero, or one env under its id and an alias (the message names the key and how to fix it).
        gem_core.registry.UnknownEnvError: a key that is not a registered env id (it names the closest ids).
    """
    if not isinstance(mixture, Mapping):
        raise MixtureError(f"A mixture is a mapping {{env_id: weight}}, got {type(mixture).__name__}; {_EXAMPLE}.")
    if not mixture:
        raise MixtureError(f"The mixture is empty: give at least one env id with a weight, {_EXAMPLE}.")
    weights: dict[str, float] = {}
    given: dict[str, str] = {}  # registered id -> the key that named it: an alias is the same env
    for env_id, weight in mixture.items():
        if not isinstance(env_id, str):
            raise MixtureError(f"Mixture key {env_id!r} is not an env id (a string such as 'game:Wordle-v0'); {_EXAMPLE}.")
        weights[env_id] = _check_weight(env_id, weight)
        canonical = env_spec(env_id).id  # UnknownEnvError names the closest registered ids
        if canonical in given:
            raise MixtureError(_twice(given[canonical], env_id, canonical))
        given[canonical] = env_id
    return weights


def _twice(first: str, second: str, canonical: str) -> str:
    """Why one env named twice in a mixture is refused: both keys' rows draw the same seeds, so the same episodes."""
    names = first if first == second else f"{canonical} (as {first} and {second})"
    return f"{names} is given twice in a weighted mixture, which would repeat its episodes: give it once, with the sum of its weights."


def _check_weight(env_id: str, weight: object) -> float:
    if isinstance(weight, bool) or not isinstance(weight, Real):
        raise MixtureError(f"Mixture weight of {env_id!r} is {weight!r}, not a number: give a positive number, e.g. {{{env_id!r}: 2}}.")
    value = float(weight)
    if not math.isfinite(value) or value <= 0:
        raise MixtureError(
            f"Mixture weight of {env_id!r} is {weight!r}: weights must be finite numbers above zero "
            f"(they are relative: {{{env_id!r}: 2}} draws it twice as often as a weight of 1); to leave {env_id!r} out, drop it."
        )
    return value


def parse_env_option(text: str, option: str = "--env") -> tuple[str, float | None]:
    """``"ID"`` or ``"ID:WEIGHT"`` from a command line: the env id and its weight (None when bare).

    Env ids hold colons themselves (``game:Wordle-v0``, ``remote:http://host:8000/game:Wordle-v0``), so
    only a number after the last colon is a weight.

    Raises:
        MixtureError: a weight that is not a positive finite number, or an empty value (the message names
            ``option`` and the fix).
        gem_core.registry.UnknownEnvError: an id nobody registered (it names the closest ids).
    """
    text = text.strip()
    if not text:
        raise MixtureError(f"{option} is empty: give a registered env id, optionally with a weight, e.g. {option} game:Wordle-v0:2.")
    head, colon, tail = text.rpartition(":")
    if colon and head:
        try:
            weight = float(tail)
        except ValueError:
            weight = None
        if weight is not None:
            try:
                checked = _check_weight(head, weight)
            except MixtureError as error:
                raise MixtureError(f"{option} {text}: {error}") from None
            env_spec(head)  # UnknownEnvError names the closest ids
            return head, checked
        if not _registered(text) and _registered(head):
            raise MixtureError(
                f"{option} {text}: the weight {tail!r} of {head!r} is not a number; write {option} {head}:2 "
                f"(a bare {option} {head} means weight 1)."
            )
    env_spec(text)  # UnknownEnvError names the closest ids
    return text, None


def parse_env_options(values: Iterable[str], option: str = "--env") -> str | list[str] | dict[str, float]:
    """What repeated ``--env ID[:WEIGHT]`` options ask for, in :data:`EnvIds` form.

    Bare ids only: the id (one) or the list (several), as before weights existed. Any weight makes the
    whole option set a mixture, where a bare id weighs 1.

    Raises:
        MixtureError: ``values`` not a list of texts, a bad weight, no value, or an env given twice (or under its id
            and an alias) in a weighted mixture.
        gem_core.registry.UnknownEnvError: an unknown id.
    """
    if isinstance(values, (str, bytes)):  # iterated, it would be one option per character
        raise MixtureError(f"parse_env_options takes a list of {option} values, got one {type(values).__name__}: wrap it, [{values!r:.80}].")
    values = list(values)  # an iterator is read once
    for number, value in enumerate(values, start=1):
        if not isinstance(value, str):
            raise MixtureError(f"{option} value {number} is {value!r:.80}, not text: give each as ID or ID:WEIGHT.")
    parsed = [parse_env_option(value, option) for value in values]
    if not parsed:
        raise MixtureError(f"Give at least one {option} ID (or {option} ID:WEIGHT for a weighted mixture).")
    if all(weight is None for _, weight in parsed):
        ids = [env_id for env_id, _ in parsed]
        return ids[0] if len(ids) == 1 else ids
    mixture: dict[str, float] = {}
    given: dict[str, str] = {}  # registered id -> the value that named it: an alias is the same env
    for env_id, weight in parsed:
        canonical = env_spec(env_id).id
        if canonical in given:
            raise MixtureError(f"{option} {_twice(given[canonical], env_id, canonical)}")
        given[canonical] = env_id
        mixture[env_id] = 1.0 if weight is None else weight
    return mixture


def mixture_draws(weights: Mapping[str, float], n: int, seed: int) -> Iterator[str]:
    """``n`` env ids drawn independently with probability ``weight / sum(weights)``, reproducibly for ``seed``.

    Independent draws (not a fixed pattern) keep any window of the stream a fair sample of the mixture,
    so a trainer that reads the rows in order still sees the mixture in every batch.
    """
    ids = list(weights)
    p = np.array([weights[i] for i in ids], dtype=float)
    if not math.isfinite(sum(p.tolist())):  # finite weights whose sum overflows (1e308 twice): the same ratio, scaled down
        p = p / p.max()
    rng = np.random.default_rng(np.random.SeedSequence(_seed_entropy(seed), spawn_key=(0x6D6978,)))
    for index in rng.choice(len(ids), size=n, p=p / p.sum()):
        yield ids[int(index)]


def _seed_entropy(seed: int) -> int:
    # SeedSequence takes non-negative entropy; a negative seed_start still gets a stream of its own.
    return seed if seed >= 0 else (1 << 64) + seed


def _registered(env_id: str) -> bool:
    try:
        env_spec(env_id)
    except KeyError:
        return False
    return True
