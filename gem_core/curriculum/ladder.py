"""Difficulty ladders: a game's levels as an ordered list of tasks for a :class:`~gem_core.curriculum.TaskSampler`.

The registry already holds most games at three levels (``game:GuessTheNumber-v0-easy``, ``-v0``,
``-v0-hard``; 2048 has ``-extreme-hard`` too). :func:`difficulty_ladder` lists those that exist, easiest
first; :func:`numeric_ladder` builds the steps of a game's own numeric difficulty (GuessTheNumber's
``max_number``, Mastermind's ``code_length``, Sokoban's ``boxes``) as kwargs of one id. Band or
progress weighting then moves the draws up the ladder as the lower rungs are learnt (success there
nears 1 and their groups stop being informative); ``TaskSampler(..., unlock_at=...)`` makes the climb
strict (a rung opens when the one below is passed).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from gem_core.curriculum.task import Task, TaskError, check_task_envs
from gem_core.registry import list_envs, spec

__all__ = ["LEVELS", "difficulty_ladder", "numeric_ladder"]

LEVELS: tuple[str, ...] = ("-easy", "", "-hard", "-extreme-hard")
"""Level suffixes of registered game ids, easiest first ("" is the plain ``-v0`` id)."""
_LEVEL = re.compile(r"^(?P<base>.+-v\d+)(?P<level>-easy|-hard|-extreme-hard|-random)?$")


def difficulty_ladder(env_id: str, *, env_kwargs: Mapping[str, Any] | None = None) -> list[Task]:
    """The registered levels of ``env_id``'s game (any of its ids: ``game:Wordle-v0-hard`` works too), easiest first.

    ``env_kwargs`` apply to every level (e.g. ``{"max_turns": 4}``). The ``-random`` variant is left out: it
    draws a level per episode itself, which is what the ladder replaces.

    Raises:
        TaskError: the id has fewer than two levels registered (the message lists what exists).
        gem_core.registry.UnknownEnvError: an unknown id.
    """
    canonical = spec(env_id).id
    match = _LEVEL.match(canonical)
    base = match.group("base") if match else canonical
    registered = set(list_envs())
    ids = [base + level for level in LEVELS if base + level in registered]
    if len(ids) < 2:
        raise TaskError(
            f"{canonical!r} has no difficulty levels registered (ids {base}-easy / {base} / {base}-hard); "
            f"build the rungs from one of its kwargs with numeric_ladder({base!r}, name, values) instead."
        )
    return [Task(level_id, env_kwargs or {}) for level_id in ids]


def numeric_ladder(env_id: str, name: str, values: Sequence[Any], *, env_kwargs: Mapping[str, Any] | None = None) -> list[Task]:
    """One task per value of the constructor kwarg ``name`` of ``env_id``, in the order given (easiest first),
    e.g. ``numeric_ladder("game:GuessTheNumber-v0", "max_number", [4, 8, 16, 32], env_kwargs={"max_turns": 5})``.

    Each rung is built once here, so a kwarg the env does not take fails now, not in a trainer's worker.

    Raises:
        TaskError: fewer than two values, a value given twice, or kwargs the env does not take (checked as
            :class:`~gem_core.curriculum.TaskSampler` checks them: :func:`~gem_core.curriculum.task.check_task_envs`).
    """
    values = list(values)
    if len(values) < 2 or len(set(map(repr, values))) != len(values):
        raise TaskError(f"numeric_ladder needs two or more distinct values of {name!r}, easiest first; got {values!r}.")
    tasks = [Task(env_id, {**(env_kwargs or {}), name: value}) for value in values]
    check_task_envs(tasks)
    return tasks
