"""The rows of a GEM training dataset: one episode (env id, seed, env kwargs) per row, built once here.

Every framework reads its prompts from a dataset, so every adapter ships a ``make_dataset``. What a row
*is* does not depend on the framework: a validated :class:`EpisodeLabel` and, for frameworks that show
or length-filter the prompt, the env's first observation as chat messages. This module builds those
rows; an adapter only lays them out in its framework's columns (TRL's prompt messages, verl's parquet,
OpenRLHF's and RL2's JSON lines). The shared command line of every adapter's
``python -m gem_adapters.<fw>`` lives beside the CLI, in :mod:`gem_core.cli.dataset`.
"""

from __future__ import annotations

import numbers
import reprlib
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from gem_core.errors import InvalidArgument
from gem_core.registry import spec as env_spec
from gem_core.rollout.options import check_episode_options
from gem_core.rows.label import MAX_SEED, EnvKwargsError, EpisodeLabel, LabelError, make_label_env, parse_label
from gem_core.rows.mixture import env_weights, mixture_draws

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
    env_ids: str | Sequence[str] | Mapping[str, float],
    n: int,
    *,
    seed_start: int = 0,
    env_kwargs: Mapping[str, Any] | None = None,
    system_prompt: str | None = None,
    with_messages: bool = True,
) -> Iterator[EpisodeRow]:
    """The rows of one env id, a list of ids or a weighted mixture.

    - an id or a list of ids: ``n`` rows per env id, seeds ``seed_start .. seed_start + n - 1``, one id
      after the other (as before mixtures had weights);
    - a mapping ``{env_id: weight}``: ``n`` rows in all, each row's env id drawn with probability
      ``weight / sum(weights)`` from a generator seeded by ``seed_start`` (:func:`~gem_core.rows.mixture.mixture_draws`),
      so the rows are one reproducible interleaved stream. Each env id's seeds count up from ``seed_start``
      in the order its rows come, so they stay within ``seed_start .. seed_start + n - 1`` and a disjoint
      range still gives a disjoint validation set.

    Every env id and weight is checked (unknown ids fail, naming the closest registered ids) before the
    first row is produced, so a dataset is never half written. ``with_messages`` resets each env once per
    seed to render the first observation; frameworks that replace the prompt themselves skip that cost.

    Raises:
        ValueError: ``n`` is not positive.
        gem_core.rows.mixture.MixtureError: a weight that is not a positive number, or one env under its id and an alias
            (a ``ValueError``).
        ValueError: ``seed_start`` is negative (gymnasium refuses negative seeds), or an env id is given twice in a list
            (or as its id and its alias), which would repeat the same episodes.
        gem_core.rows.label.LabelError: an unknown env id.
        EnvKwargsError: ``env_kwargs`` is not a mapping, or an env refuses them (each env id is built once to check,
            rows with messages or not, so a dataset whose episodes cannot start is refused before it is written).
    """
    if isinstance(n, bool) or not isinstance(n, numbers.Integral) or n < 1:
        what = "rows of the mixture" if isinstance(env_ids, Mapping) else "episodes per env id"
        raise InvalidArgument(f"n (the number of {what}) must be a positive integer, got {n!r}.")
    if isinstance(seed_start, bool) or not isinstance(seed_start, numbers.Integral) or not 0 <= seed_start <= MAX_SEED - n + 1:
        raise InvalidArgument(f"seed_start must be 0 or more (gymnasium seeds are non-negative), with seed_start + n - 1 at most "
                         f"{MAX_SEED} (a dataset column holds 64-bit seeds), got {seed_start!r}.")
    check_episode_options("make_dataset", system_prompt=system_prompt)
    n, seed_start = int(n), int(seed_start)
    if isinstance(env_ids, Mapping):
        try:
            weights = env_weights(env_ids)
        except KeyError as err:  # UnknownEnvError: the same LabelError a list's unknown id raises
            raise LabelError(f"{err} Fix the env id in the mixture.") from None
        ids = list(weights)
    elif isinstance(env_ids, (str, Sequence)):
        ids = [env_ids] if isinstance(env_ids, str) else list(env_ids)
    else:
        raise InvalidArgument(f"env_ids is an env id, a list of env ids or a mixture {{env_id: weight}}, got {env_ids!r}.")
    if not ids:
        raise InvalidArgument("episode_rows needs at least one env id.")
    if env_kwargs is not None and not isinstance(env_kwargs, Mapping):  # dict() of a list fails naming neither env_kwargs nor the fix
        raise EnvKwargsError(f"env_kwargs must be a mapping of the env's constructor keywords (e.g. {{'max_turns': 3}}), got {reprlib.repr(env_kwargs)}.")
    labels = {env_id: parse_label({"env_id": env_id, "seed": seed_start, "env_kwargs": dict(env_kwargs or {})}) for env_id in ids}
    given: dict[str, list[str]] = {}  # an alias names the same env as its id: compared by the registered id
    for env_id in ids:
        given.setdefault(env_spec(env_id).id, []).append(env_id)
    repeated = sorted(canonical if set(names) == {canonical} else f"{canonical} (as {', '.join(names)})"
                      for canonical, names in given.items() if len(names) > 1)
    if repeated:  # its rows would repeat the same seeds, so the same episodes
        raise InvalidArgument(f"env id(s) {', '.join(repeated)} given more than once would repeat the same episodes: give each "
                         "once (n rows each), or a mixture {env_id: weight} for unequal shares.")
    envs: dict[str, Any] = {}
    try:
        for env_id, label in labels.items():  # every id's env built before the first row, so kwargs that do not fit a later id fail now
            envs[env_id] = make_label_env(label)
        if not with_messages:  # built only to check
            for env in envs.values():
                env.close()
            envs = {}
        if isinstance(env_ids, Mapping):
            yield from _mixture_rows(labels, envs, mixture_draws(weights, n, seed_start), seed_start, system_prompt)
            return
        index = 0
        for env_id in ids:
            first = labels[env_id]
            for seed in range(seed_start, seed_start + n):
                yield _row(EpisodeLabel(first.env_id, seed, dict(first.env_kwargs)), index, envs.get(env_id), system_prompt)
                index += 1
    finally:
        for env in envs.values():
            env.close()


def _mixture_rows(
    labels: Mapping[str, EpisodeLabel], envs: Mapping[str, Any], order: Iterable[str], seed_start: int, system_prompt: str | None
) -> Iterator[EpisodeRow]:
    """One row per drawn env id (with its first observation where ``envs`` has the id's env); each id's seeds count up
    from ``seed_start`` in the order its rows come."""
    next_seed = dict.fromkeys(labels, seed_start)
    for index, env_id in enumerate(order):
        first = labels[env_id]
        seed, next_seed[env_id] = next_seed[env_id], next_seed[env_id] + 1
        yield _row(EpisodeLabel(first.env_id, seed, dict(first.env_kwargs)), index, envs.get(env_id), system_prompt)


def _row(label: EpisodeLabel, index: int, env: Any, system_prompt: str | None) -> EpisodeRow:
    """The row of ``label``; with an ``env``, its first observation (reset with the label's seed) as the prompt."""
    if env is None:
        return EpisodeRow(label=label, index=index)
    observation, info = env.reset(seed=label.seed)
    images = list(info.get("images") or []) or None
    messages = ([{"role": "system", "content": system_prompt}] if system_prompt else []) + [{"role": "user", "content": observation}]
    return EpisodeRow(label=label, index=index, messages=messages, images=images)


def refuse_system_prompt(system_prompt: str | None, framework: str, where: str) -> None:
    """For frameworks whose rows carry only the label (the agent renders the first observation itself):
    a system prompt given to ``make_dataset`` would be silently lost, so it is refused, naming ``where`` it goes.

    Raises:
        InvalidArgument: if ``system_prompt`` is given.
    """
    if system_prompt is not None:
        raise InvalidArgument(f"{framework}'s rows carry no messages (its agent renders the first observation), so make_dataset "
                         f"cannot hold a system prompt; set it in {where}.")
