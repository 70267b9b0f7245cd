"""The bounds of an evaluation's settings, checked wherever a value comes in: the command line,
:class:`~gem_core.eval.runner.EvalConfig`, and a run's ``run.json`` (a file someone may have edited).

A count read from anywhere sizes what the run does (tasks, records, requests), so it is checked before
anything is allocated; a value of the wrong type is refused naming the setting, never a traceback later.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from gem_core.env import MAX_SEED
from gem_core.errors import InvalidArgument, InvalidArgumentType

__all__ = [
    "MAX_PLANNED_EPISODES",
    "SETTING_BOUNDS",
    "BACKEND_BOUNDS",
    "BACKEND_KINDS",
    "setting_problem",
    "seed_range_problem",
    "check_settings",
    "check_backend_settings",
    "base_url_problem",
]

MAX_PLANNED_EPISODES = 1_000_000
"""Episodes one run may ask for, all envs and samples together (each is a record kept in memory and a line on disk)."""

SETTING_BOUNDS: dict[str, tuple[type, float, float, bool]] = {
    "episodes": (int, 1, MAX_PLANNED_EPISODES, False),
    # Episode i plays seed `seed + i`, and every env seeds gymnasium's np_random, which refuses a negative
    # seed ("Seed must be greater or equal to zero"): a negative seed would fail every episode of the run.
    "seed": (int, 0, MAX_SEED, False),
    "samples": (int, 1, 10_000, False),
    "concurrency": (int, 1, 10_000, False),
    "max_turns": (int, 1, 1_000_000, True),
    "max_new_tokens": (int, 1, 10_000_000, False),
    "temperature": (float, 0.0, 100.0, False),
    "top_p": (float, 0.0, 1.0, False),
    "top_k": (int, 0, 10_000_000, False),
    "system_prompt": (str, 0, 1_000_000, True),
}
"""``name: (kind, low, high, may be None)``; kind ``int``, ``float`` or ``str`` (high: its length)."""
BACKEND_BOUNDS: dict[str, tuple[type, float, float, bool]] = {
    "timeout": (float, 1e-3, 86_400.0, False),
    "max_retries": (int, 0, 100, False),
    "max_in_flight": (int, 1, 10_000, True),
}
"""The HTTP backend's transport settings, under their ``backend_settings`` names (and ``make_backend``'s
keywords, so ``evaluate(backend_options=)`` is checked against them too).
"""


def setting_problem(name: str, value: Any, bounds: Mapping[str, tuple[type, float, float, bool]] = SETTING_BOUNDS) -> str | None:
    """Why ``value`` is not a valid ``name`` (None when it is, or when ``name`` has no bound)."""
    if name not in bounds:
        return None
    kind, low, high, optional = bounds[name]
    if value is None:
        return None if optional else "missing (None)"
    if kind is str:
        if not isinstance(value, str):
            return f"a {type(value).__name__}, not a text"
        return None if len(value) <= high else f"longer than {int(high)} characters"
    if isinstance(value, bool) or not isinstance(value, (int, float)) or (kind is int and not isinstance(value, int)):
        return f"{value!r:.40} is not {'a whole number' if kind is int else 'a number'}"
    if not math.isfinite(value) or not low <= value <= high:
        shown = (f"{int(low):,}", f"{int(high):,}") if kind is int else (f"{low:g}", f"{high:g}")
        return f"{value!r:.40} is outside {shown[0]}..{shown[1]}"
    return None


def seed_range_problem(seed: int, episodes: int, *, seed_name: str = "seed", episodes_name: str = "episodes") -> str | None:
    """Why episodes ``seed`` .. ``seed + episodes - 1`` cannot all be played (None when they can): the last one
    would pass :data:`~gem_core.env.MAX_SEED`, which every env's reset refuses, so that episode would fail after
    the others had run. Both values are whole numbers already (:func:`setting_problem`); the names are as the
    caller knows them (``--seed``)."""
    if seed + episodes - 1 <= MAX_SEED:
        return None
    return (f"{seed_name} {seed} with {episodes_name} {episodes} plays seeds up to {seed + episodes - 1}, past the largest "
            f"seed {MAX_SEED}; lower {seed_name} to at most {MAX_SEED - episodes + 1}, or ask for fewer {episodes_name}")


def check_settings(settings: Mapping[str, Any], *, where: str, env_count: int = 1) -> None:
    """Raise ValueError naming the first setting out of bounds (``where`` prefixes the name), when the last
    episode's seed (``seed + episodes - 1``) passes the largest seed, and when the episodes asked for, all envs
    and samples together, exceed :data:`MAX_PLANNED_EPISODES`.

    Raises:
        InvalidArgument: if a setting is out of bounds, the seeds run past the largest one, or the run asks for
            too many episodes.
    """
    for name in SETTING_BOUNDS:
        if name in settings:
            problem = setting_problem(name, settings[name])
            if problem:
                raise InvalidArgument(f"{where}{name}: {problem}.")
    if "seed" in settings and "episodes" in settings:
        problem = seed_range_problem(settings["seed"], settings["episodes"])
        if problem:
            raise InvalidArgument(f"{where.rstrip('.') + ': ' if where else ''}{problem}.")
    episodes, samples = settings.get("episodes", 1), settings.get("samples", 1)
    if episodes * samples * max(env_count, 1) > MAX_PLANNED_EPISODES:
        raise InvalidArgument(
            f"{where}episodes x samples x envs = {episodes} x {samples} x {env_count} is more than the "
            f"{MAX_PLANNED_EPISODES} episodes one run may ask for; split it into several runs."
        )


BACKEND_KINDS: dict[str, tuple[tuple[type, ...], str]] = {
    "api_key": ((str,), "a text"),
    "extra_body": ((Mapping,), "a dict"),
}
"""``make_backend``'s options that have a kind but no bound (``name: (kinds, said as)``; None is allowed): the
client uses them only when it builds a request, so a wrong one would fail every episode instead of the call."""


def check_backend_settings(settings: Mapping[str, Any], *, label: str = "{name}") -> None:
    """Raise naming the first HTTP backend setting out of :data:`BACKEND_BOUNDS` or not of its
    :data:`BACKEND_KINDS`; ``label`` formats the name as the caller knows it (e.g. ``"backend_options[{name!r}]"``).
    These are ``make_backend``'s keywords, where ``max_in_flight=None`` has no meaning (the command line's
    None, "as --concurrency", is resolved before it gets here).

    Raises:
        InvalidArgument: if a setting is out of :data:`BACKEND_BOUNDS`, or None.
        InvalidArgumentType: if ``api_key`` or ``extra_body`` is neither None nor of its kind.
    """
    for name in BACKEND_BOUNDS:
        if name in settings:
            value = settings[name]
            problem = "missing (None)" if value is None else setting_problem(name, value, BACKEND_BOUNDS)
            if problem:
                raise InvalidArgument(f"{label.format(name=name)}: {problem}.")
    for name, (kinds, kind) in BACKEND_KINDS.items():
        value = settings.get(name)
        if value is not None and not isinstance(value, kinds):
            raise InvalidArgumentType(f"{label.format(name=name)}: {value!r:.40} is not {kind}; give {kind} or None.")


def base_url_problem(base_url: Any) -> str | None:
    """Why ``base_url`` cannot be an OpenAI-compatible API root (None when it can): it must be an
    ``http://`` or ``https://`` URL with a host, e.g. ``http://127.0.0.1:8000/v1``."""
    from urllib.parse import urlsplit

    if isinstance(base_url, str):
        try:
            parts = urlsplit(base_url.strip())
        except ValueError:
            parts = None
        if parts is not None and parts.scheme.lower() in ("http", "https") and parts.hostname:
            return None
    return (f"base_url must be an http:// or https:// URL with a host, the API root (e.g. http://127.0.0.1:8000/v1), "
            f"got {base_url!r:.200}.")
