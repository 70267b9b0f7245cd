"""The checks and the command line of ``examples/train_trl.py``: every bad argument is found here, before torch
and TRL load (about a minute on 2 cores), and reported in one line with the fix.

The functions take the example's ``Args`` dataclass as it is (they read its fields by name), so the example
keeps its arguments in view and this module holds what a reader need not see to follow a run.
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib.util
import json
import sys
import typing
from collections.abc import Sequence
from typing import Any

import gem_core
from gem_core.cli.options import OneLineErrors, env_kwargs_option, folder_problem
from gem_core.curriculum import Task, TaskError, TaskSampler
from gem_core.curriculum.weighting import Weighting
from gem_core.errors import InvalidArgument
from gem_core.registry import UnknownEnvError
from gem_core.rows import MixtureError, parse_env_options

__all__ = [
    "CURRICULA",
    "DEFAULT_ENV",
    "DEFAULT_ENV_KWARGS",
    "REPORT_TO",
    "InvalidRecipeArgument",
    "check_args",
    "check_tasks",
    "dataclass_parser",
    "env_kwargs_for",
    "env_mixture",
    "report_to_list",
    "task_sampler",
]

DEFAULT_ENV = "game:GuessTheNumber-v0"
"""The env the example trains on when no ``--env`` is given (the main job's)."""
DEFAULT_ENV_KWARGS = {"min_number": 1, "max_number": 4, "max_turns": 3}
"""The main job's own setting (1-4 in three guesses: small enough to learn on a CPU); only when no ``--env`` is given.
A named ``--env`` (this id too, alone or in a mixture) gets the kwargs its registry spec declares (``--env_kwargs`` overrides)."""
CURRICULA: dict[str, Weighting] = {"uniform": "uniform", "adaptive": "band", "progress": "progress"}
"""``--curriculum`` values: how each GRPO group's task is drawn from a mixture (the :mod:`gem_core.curriculum` weighting each names)."""
TURN_CREDITS = ("rebn", "reinforce", "baseline", "episode")
REPORT_TO = {"none": None, "wandb": "wandb", "tensorboard": "tensorboard"}
"""``--report_to`` values: where TRL (transformers' ``report_to``) sends its metrics, with the package each needs."""


class InvalidRecipeArgument(InvalidArgument):
    """A bad argument of ``examples/train_trl.py``, found before anything heavy loads or anything is written."""


def env_mixture(args: Any) -> dict[str, float]:
    """``--env`` as ``{env_id: weight}`` (one id: weight 1; repeated bare ids: weight 1 each; none: the main job's).

    Raises:
        InvalidRecipeArgument: an unknown id, a bad weight, or an id given twice.
    """
    if args.env is None:
        return {DEFAULT_ENV: 1.0}
    try:
        parsed = parse_env_options([args.env] if isinstance(args.env, str) else list(args.env), "--env")
    except MixtureError as error:
        raise InvalidRecipeArgument(str(error)) from None
    except UnknownEnvError as error:
        raise InvalidRecipeArgument(f"--env: {error}") from None
    if isinstance(parsed, dict):
        return parsed
    ids = [parsed] if isinstance(parsed, str) else parsed
    if len(set(ids)) != len(ids):
        raise InvalidRecipeArgument(f"--env {next(i for i in ids if ids.count(i) > 1)} is given twice: give each env once (ID:WEIGHT for a larger share)")
    return dict.fromkeys(ids, 1.0)


def env_kwargs_for(args: Any, env_id: str | None = None) -> dict:
    """The env kwargs of ``env_id`` (default: the run's only env) in this run, checked by building the env once
    (cheap; no torch).

    Raises:
        InvalidRecipeArgument: ``--env_kwargs`` is not a JSON object, or the env refuses the kwargs.
    """
    env_id = env_id or next(iter(env_mixture(args)))
    if args.env_kwargs is None or args.env_kwargs == "":
        # Only the main job (no --env) plays its 1-4 setting; a named env, in a mixture too, is the registered one.
        env_kwargs = dict(DEFAULT_ENV_KWARGS) if args.env is None else {}
    else:
        try:
            env_kwargs = env_kwargs_option(args.env_kwargs, "--env_kwargs")
        except ValueError as error:
            raise InvalidRecipeArgument(str(error)) from None
    try:
        registered = gem_core.spec(env_id).kwargs
    except UnknownEnvError as error:
        raise InvalidRecipeArgument(f"--env: {error}") from None
    try:
        gem_core.make(env_id, **env_kwargs).close()
    except TypeError as error:
        raise InvalidRecipeArgument(
            f"--env_kwargs {json.dumps(env_kwargs)} do not fit {env_id} ({error}); its registered kwargs are "
            f"{json.dumps(registered, default=str)}: pass only those names, or --env_kwargs '{{}}' to use them as they are"
        ) from None
    except ValueError as error:  # a known name with a value the env refuses (GuessTheNumber: max_number below min_number)
        if args.env_kwargs:
            raise InvalidRecipeArgument(f"--env_kwargs {json.dumps(env_kwargs)} are not valid for {env_id}: {error} Change the "
                                        f"values (its registered kwargs are {json.dumps(registered, default=str)})") from None
        raise InvalidRecipeArgument(f"--env {env_id} cannot be built with the kwargs {json.dumps(env_kwargs)}: {error} "
                                    "Set them with --env_kwargs") from None
    except ImportError as error:
        raise InvalidRecipeArgument(f"--env {env_id} cannot be built here: {error}") from None
    return env_kwargs


def check_args(args: Any) -> dict:
    """Everything that can be wrong with the arguments, before torch loads; returns the env kwargs (of the first
    env of a mixture: :func:`check_tasks` gives every task's). Raises :class:`InvalidRecipeArgument`."""
    return dict(check_tasks(args)[0].env_kwargs)


def check_tasks(args: Any) -> list[Task]:
    """Everything that can be wrong with the arguments, before torch loads; returns the run's tasks (one per
    ``--env``, with its kwargs and weight).

    Raises:
        InvalidRecipeArgument: the first bad argument, named with what to give instead.
    """
    if args.turn_credit not in TURN_CREDITS:
        raise InvalidRecipeArgument(f"--turn_credit must be 'rebn', 'reinforce', 'baseline' or 'episode', got {args.turn_credit!r}")
    if args.vocab_size < 259:
        raise InvalidRecipeArgument(f"--vocab_size must be at least 259 (the 256 bytes and 3 special tokens), got {args.vocab_size}")
    if args.warm_start_steps < 0:
        raise InvalidRecipeArgument(f"--warm_start_steps must be 0 or more, got {args.warm_start_steps}")
    for name in ("steps", "num_generations", "prompts_per_step"):
        if getattr(args, name) < 1:
            raise InvalidRecipeArgument(f"--{name} must be at least 1, got {getattr(args, name)}")
    if args.num_generations < 2:
        raise InvalidRecipeArgument("--num_generations must be at least 2 (GRPO compares the episodes of a group)")
    for name in ("max_new_tokens", "max_completion_length"):
        if getattr(args, name) is not None and getattr(args, name) < 1:
            raise InvalidRecipeArgument(f"--{name} must be at least 1, got {getattr(args, name)}")
    for name in ("temperature", "learning_rate"):  # a comparison with NaN is False: refused too
        if not getattr(args, name) > 0:
            raise InvalidRecipeArgument(f"--{name} must be a number above 0, got {getattr(args, name)}")
    if not args.beta >= 0:
        raise InvalidRecipeArgument(f"--beta must be a number 0 or more, got {args.beta}")
    if not 0 <= args.gamma <= 1:
        raise InvalidRecipeArgument(f"--gamma must be a number in [0, 1] (a discount over turns), got {args.gamma}")
    if args.curriculum not in CURRICULA:
        raise InvalidRecipeArgument(f"--curriculum must be 'uniform', 'adaptive' or 'progress', got {args.curriculum!r}")
    report_to_list(args.report_to)
    if problem := folder_problem(args.out):
        raise InvalidRecipeArgument(f"--out {problem}: give a folder path (new or existing)")
    if isinstance(args.env, list) and args.env and all(isinstance(task, Task) for task in args.env):
        tasks = list(args.env)  # from Python: each task's kwargs are its own
        for task in tasks:
            args_for_task = dataclasses.replace(args, env=task.env_id, env_kwargs=json.dumps(dict(task.env_kwargs)))
            env_kwargs_for(args_for_task)  # built once: kwargs that do not fit fail here, before torch loads
    else:
        tasks = [Task(env_id, env_kwargs_for(args, env_id), weight=weight) for env_id, weight in env_mixture(args).items()]
    if len(tasks) == 1 and args.curriculum != "uniform":
        raise InvalidRecipeArgument(f"--curriculum {args.curriculum} chooses among tasks, and there is one: repeat --env for a "
                                    "mixture (e.g. a game's -easy, -v0 and -hard levels)")
    if len(tasks) > 1:
        task_sampler(args, tasks)  # a floor or window that cannot work fails here, before torch loads
    return tasks


def report_to_list(report_to: str) -> list[str]:
    """``--report_to`` as transformers' ``TrainingArguments.report_to`` list (``none``: ``[]``, no logger).

    Raises:
        InvalidRecipeArgument: an unknown logger, or one whose package is not installed (with the install line).
    """
    if report_to not in REPORT_TO:
        raise InvalidRecipeArgument(f"--report_to must be one of {', '.join(REPORT_TO)}, got {report_to!r}")
    package = REPORT_TO[report_to]
    if package is not None and importlib.util.find_spec(package) is None:
        raise InvalidRecipeArgument(f"--report_to {report_to} needs the {package} package: pip install {package} "
                                    "(or --report_to none)")
    return [] if package is None else [report_to]


def task_sampler(args: Any, tasks: list[Task]) -> TaskSampler:
    """Where a mixture's episodes start: one draw per GRPO group, seeded by ``--seed`` (episode seeds as the
    single-env dataset's, from ``seed * 100_000``).

    Raises:
        InvalidRecipeArgument: a curriculum floor or window that cannot work with these tasks.
    """
    try:
        return TaskSampler(tasks, weighting=CURRICULA[args.curriculum], seed=args.seed, seed_start=args.seed * 100_000,
                           floor=args.curriculum_floor, window=args.curriculum_window,
                           min_episodes=min(8, args.curriculum_window), group_size=args.num_generations)
    except (TaskError, ValueError) as error:
        raise InvalidRecipeArgument(f"--curriculum: {error}") from None


class _Parser(OneLineErrors, argparse.ArgumentParser):
    """One-line usage errors; ``--report-to`` is read as ``--report_to`` (TRL's and verl's spelling, as
    transformers' ``HfArgumentParser`` accepts both) without doubling every line of ``--help``."""

    flags: set[str]  # the dataclass's --flags, set by dataclass_parser

    def parse_args(self, args: Sequence[str] | None = None, namespace: Any = None) -> Any:  # type: ignore[override]
        words = list(sys.argv[1:] if args is None else args)
        known: set[str] = getattr(self, "flags", set())  # set by dataclass_parser
        for i, word in enumerate(words):
            flag, sep, value = word.partition("=")
            if flag.startswith("--") and "-" in flag[2:] and (underscored := "--" + flag[2:].replace("-", "_")) in known:
                words[i] = underscored + sep + value
        return super().parse_args(words, namespace)


class _DefaultsOnce(argparse.ArgumentDefaultsHelpFormatter):
    """Appends "(default: X)" only where the help does not already say what the default is (a default that
    depends on the model or the env is explained in words there; argparse would add "(default: None)")."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        if "default" in (action.help or "").lower():
            return action.help
        return super()._get_help_string(action)


def dataclass_parser(args_class: type, prog: str, description: str) -> argparse.ArgumentParser:
    """``--name value`` for every field of the dataclass ``args_class`` (its ``help`` and ``choices`` metadata).

    transformers' ``HfArgumentParser`` builds the same parser, but importing transformers takes 1.2 s of
    CPU (4 s on a loaded 2-core machine) before a mistyped flag could be reported. A field typed
    ``str | list[str] | ...`` is repeatable (``--env`` twice is a mixture) and absent when not given.
    """
    parser = _Parser(prog=prog, description=description, formatter_class=_DefaultsOnce)
    parser.flags = {f"--{f.name}" for f in dataclasses.fields(args_class)}
    hints = typing.get_type_hints(args_class)
    for f in dataclasses.fields(args_class):
        kind, help_text = hints[f.name], f.metadata["help"]
        if kind is bool:
            parser.add_argument(f"--{f.name}", action="store_true", help=help_text)
            continue
        if list[str] in typing.get_args(kind):
            parser.add_argument(f"--{f.name}", action="append", default=argparse.SUPPRESS, metavar="ID[:WEIGHT]", help=help_text)
            continue
        kind = next(t for t in typing.get_args(kind) if t is not type(None)) if typing.get_args(kind) else kind
        parser.add_argument(f"--{f.name}", type=kind, default=f.default, choices=f.metadata.get("choices"), help=help_text)
    return parser
