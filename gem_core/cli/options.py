"""Command-line options that several commands read the same way (``gem replay``, every ``make_dataset``,
the examples' ``--env-kwargs``; ``gem play --seed``)."""

from __future__ import annotations

import json
from typing import Any

__all__ = ["env_kwargs_option", "seed_option"]


def seed_option(text: str) -> int:
    """An episode seed from the command line (an argparse ``type``): an integer 0 or more, which is what an
    env's ``reset(seed=)`` takes; argparse names the option in the one-line error."""
    import argparse

    try:
        seed = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be an integer (0 or more), got {text!r}") from None
    if seed < 0:
        raise argparse.ArgumentTypeError(f"must be 0 or more, got {seed}")
    return seed


def env_kwargs_option(text: str, option: str = "--env-kwargs") -> dict[str, Any]:
    """The env kwargs a command line option holds as JSON; ValueError naming ``option`` and an example if
    ``text`` is not a JSON object (every command that takes env kwargs reads them the same way)."""
    example = f"e.g. {option} '{{\"max_turns\": 8}}'"
    try:
        env_kwargs = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"{option} is not JSON ({exc}): it must be a JSON object, {example}") from None
    if not isinstance(env_kwargs, dict):
        raise ValueError(f"{option} must be a JSON object, got {text!r}; {example}")
    return env_kwargs
