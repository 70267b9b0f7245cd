"""The rows of a GEM training dataset: one episode (env id, seed, env kwargs) per row, built once here.

Every framework reads its prompts from a dataset, so every adapter ships a ``make_dataset``. What a row
*is* does not depend on the framework: a validated :class:`EpisodeLabel` and, for frameworks that show
or length-filter the prompt, the env's first observation as chat messages. This module builds those
rows; an adapter only lays them out in its framework's columns (TRL's prompt messages, verl's parquet,
OpenRLHF's and RL2's JSON lines). :func:`add_dataset_arguments` gives every adapter's
``python -m gem_adapters.<fw>.make_dataset`` the same command line.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gem_core.rollout.episode_label import EpisodeLabel, parse_label

__all__ = ["EpisodeRow", "episode_rows", "add_dataset_arguments", "rows_from_arguments", "env_kwargs_option"]


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
    env_ids: str | Sequence[str],
    n: int,
    *,
    seed_start: int = 0,
    env_kwargs: Mapping[str, Any] | None = None,
    system_prompt: str | None = None,
    with_messages: bool = True,
) -> Iterator[EpisodeRow]:
    """``n`` rows per env id, seeds ``seed_start .. seed_start + n - 1``.

    Every env id is checked (unknown ids fail, naming the closest registered ids) before the first row
    is produced, so a dataset is never half written. ``with_messages`` resets each env once per seed to
    render the first observation; frameworks that replace the prompt themselves skip that cost.

    Raises:
        ValueError: ``n`` is not positive.
        gem_core.rollout.episode_label.LabelError: an unknown env id or bad ``env_kwargs``.
    """
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ValueError(f"n (the number of episodes per env id) must be a positive integer, got {n!r}.")
    ids = [env_ids] if isinstance(env_ids, str) else list(env_ids)
    if not ids:
        raise ValueError("episode_rows needs at least one env id.")
    labels = [parse_label({"env_id": env_id, "seed": seed_start, "env_kwargs": dict(env_kwargs or {})}) for env_id in ids]
    index = 0
    for first in labels:
        env = _make(first) if with_messages else None
        try:
            for seed in range(seed_start, seed_start + n):
                label = EpisodeLabel(first.env_id, seed, dict(first.env_kwargs))
                messages, images = None, None
                if env is not None:
                    observation, info = env.reset(seed=seed)
                    images = list(info.get("images") or []) or None
                    messages = ([{"role": "system", "content": system_prompt}] if system_prompt else []) + [
                        {"role": "user", "content": observation}
                    ]
                yield EpisodeRow(label=label, index=index, messages=messages, images=images)
                index += 1
        finally:
            if env is not None:
                env.close()


def write_jsonl(rows: Iterable[Mapping[str, Any]], path: str | Path) -> int:
    """Write ``rows`` as JSON lines (the format OpenRLHF and RL2 read); returns how many."""
    lines = [json.dumps(row) + "\n" for row in rows]
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    Path(path).write_text("".join(lines), encoding="utf-8")
    return len(lines)


def refuse_system_prompt(system_prompt: str | None, framework: str, where: str) -> None:
    """For frameworks whose rows carry only the label (the agent renders the first observation itself):
    a system prompt given to ``make_dataset`` would be silently lost, so it is refused, naming ``where`` it goes."""
    if system_prompt is not None:
        raise ValueError(f"{framework}'s rows carry no messages (its agent renders the first observation), so make_dataset "
                         f"cannot hold a system prompt; set it in {where}.")


def _make(label: EpisodeLabel) -> Any:
    from gem_core import placement

    return placement.make_env(label.env_id, **label.env_kwargs)


def add_dataset_arguments(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """The command line every adapter's ``make_dataset`` shares (``--env`` repeatable for a mixture)."""
    parser.add_argument("--env", action="append", required=True, help="a registered env id (repeat for a mixture); `gem list` shows them")
    parser.add_argument("--n", type=int, required=True, help="episodes (rows) per env id, one seed each")
    parser.add_argument("--out", required=True, help="the file to write")
    parser.add_argument("--seed-start", type=int, default=0, help="first seed; use a disjoint range for validation")
    parser.add_argument("--env-kwargs", default="{}", help='JSON object of env constructor kwargs, e.g. \'{"max_turns": 8}\'')
    parser.add_argument("--system-prompt", default=None, help="system message before the first observation (the same text the training config uses)")
    return parser


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


def rows_from_arguments(args: argparse.Namespace, *, with_messages: bool = True) -> list[EpisodeRow]:
    """The rows :func:`add_dataset_arguments`' options ask for; a bad option exits with one line naming it."""
    try:
        env_kwargs = env_kwargs_option(args.env_kwargs)
    except ValueError as exc:
        raise SystemExit(str(exc)) from None
    try:
        return list(
            episode_rows(
                args.env,
                args.n,
                seed_start=args.seed_start,
                env_kwargs=env_kwargs,
                system_prompt=args.system_prompt,
                with_messages=with_messages,
            )
        )
    except ValueError as exc:  # LabelError is a ValueError
        raise SystemExit(str(exc)) from None
