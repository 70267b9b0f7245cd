"""The command line every adapter's ``python -m gem_adapters.<fw>`` (its dataset builder) shares.

The rows themselves are built by :func:`gem_core.rows.episode_rows`; this module only turns the options
into that call, so a bad option ends the command with one line naming it instead of a traceback.
:func:`run_dataset_cli` is the whole command; an adapter's ``__main__`` gives it only the way to write its format.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from types import FrameType
from typing import Any

from gem_core.cli.options import OneLineErrors, env_kwargs_option, folder_problem
from gem_core.env import MAX_SEED
from gem_core.errors import DependencyNotInstalled, InvalidArgument
from gem_core.eval.cli import STOP_SIGNALS
from gem_core.rows.jsonl import write_jsonl
from gem_core.rows.label import EnvKwargsError
from gem_core.rows.mixture import parse_env_options
from gem_core.rows.rows import EpisodeRow, episode_rows
from gem_core.transport.atomic_file import atomic_path

__all__ = ["MAX_ROWS", "WriteRows", "add_dataset_arguments", "jsonl_writer", "rows_from_arguments", "run_dataset_cli"]

MAX_ROWS = 1_000_000
"""The most rows one command writes. Every format's writer holds the rows in memory before the file
appears whole (a parquet table, a ``datasets.Dataset``): ``--n 100000000`` grew to 7.7 GB. A million is
past what a training run reads per epoch; a larger set is several files with disjoint ``--seed-start``.
"""

WriteRows = Callable[[list[EpisodeRow], argparse.Namespace], str]
"""Writes the rows to ``args.out`` in one framework's format and says what it wrote (``"4 rows"``), for the
command's last line; ``args`` also holds the options the adapter added. ``args.out`` is a temporary path beside
the target, with its suffix, renamed to the target once the writer returns."""


def jsonl_writer(dataset_row: Callable[[EpisodeRow], Mapping[str, Any]]) -> WriteRows:
    """The :data:`WriteRows` of a JSON-lines format (OpenRLHF's, RL2's): ``dataset_row`` lays out one episode's row."""
    return lambda rows, args: f"{write_jsonl([dataset_row(row) for row in rows], args.out)} rows"


def add_dataset_arguments(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """The command line every adapter's ``make_dataset`` shares (``--env`` repeatable for a mixture, ``ID:WEIGHT`` for a weighted one)."""
    parser.add_argument(
        "--env", action="append", required=True, metavar="ID[:WEIGHT]",
        help="a registered env id (`gem list` shows them); repeat for a mixture. Bare ids: --n rows of each, one id after "
             "the other. With any ID:WEIGHT (a bare id weighs 1): --n rows in all, each drawn from the weighted mixture",
    )
    parser.add_argument("--n", type=int, required=True, help="rows per env id, one seed each (a weighted mixture: rows in all)")
    parser.add_argument("--out", required=True, help="the file to write")
    parser.add_argument("--seed-start", type=int, default=0, help="first seed; use a disjoint range for validation")
    parser.add_argument("--env-kwargs", default="{}", help='JSON object of env constructor kwargs, e.g. \'{"max_turns": 8}\'')
    parser.add_argument("--system-prompt", default=None, help="system message before the first observation (the same text the training config uses)")
    return parser


def rows_from_arguments(args: argparse.Namespace, *, with_messages: bool = True) -> list[EpisodeRow]:
    """The rows :func:`add_dataset_arguments`' options ask for.

    Raises:
        InvalidArgument: an option that cannot give rows (the message names it); :func:`run_dataset_cli`
            makes it a one-line usage error, exit 2.
        SystemExit: (one line, exit 1) the env family's extra is not installed: not a usage error.
    """
    if not with_messages and args.system_prompt is not None:  # the rows hold no messages: it would be silently lost
        raise InvalidArgument("--system-prompt: these rows carry only the label (the training framework's agent renders the first "
                              "observation), so the file cannot hold a system prompt; set it in the agent's config of the training run.")
    try:
        env_kwargs = env_kwargs_option(args.env_kwargs)
        env_ids = parse_env_options(args.env)
    except ValueError as exc:  # MixtureError names the option itself
        raise InvalidArgument(str(exc)) from None
    except KeyError as exc:  # UnknownEnvError names the closest ids
        raise InvalidArgument(f"--env: {exc}") from None
    if args.seed_start < 0:
        raise InvalidArgument(f"--seed-start must be 0 or more (gymnasium seeds are non-negative), got {args.seed_start}.")
    if args.n < 1:
        raise InvalidArgument(f"--n must be at least 1, got {args.n}.")
    if args.seed_start + args.n - 1 > MAX_SEED:  # the API's own message names seed_start, not the option
        raise InvalidArgument(f"--seed-start {args.seed_start} with --n {args.n} goes past the largest seed, {MAX_SEED} (a dataset "
                              f"column holds 64-bit seeds): give --seed-start {MAX_SEED - args.n + 1} or less, or a smaller --n.")
    ids = 1 if isinstance(env_ids, (str, Mapping)) else len(env_ids)  # a mixture's --n is rows in all
    total = args.n * ids
    if total > MAX_ROWS:
        each = f" ({args.n} for each of {ids} env ids)" if ids > 1 else ""
        raise InvalidArgument(f"--n {args.n} asks for {total} rows{each}, over the {MAX_ROWS} one file holds (the rows are built in "
                              "memory first); write several files with disjoint --seed-start ranges instead.")
    try:
        return list(
            episode_rows(
                env_ids,
                args.n,
                seed_start=args.seed_start,
                env_kwargs=env_kwargs,
                system_prompt=args.system_prompt,
                with_messages=with_messages,
            )
        )
    except DependencyNotInstalled as exc:  # an env family whose extra is missing: the message has the install line
        raise SystemExit(str(exc)) from None
    except EnvKwargsError as exc:
        raise InvalidArgument(f"--env-kwargs {str(exc).removeprefix('env_kwargs ')}") from None
    except ValueError as exc:  # LabelError is a ValueError
        raise InvalidArgument(str(exc)) from None


class _Parser(OneLineErrors, argparse.ArgumentParser):
    """A usage error is one line, exit 2, as for ``gem``'s own commands (a plain parser printed the usage above it)."""


def _out_problem(out: str) -> str | None:
    """Why ``--out`` can never be written (a folder, a path under a file, a folder this user may not write in), found
    before the rows are built, which takes minutes for a large dataset. A device or FIFO is written through."""
    target = Path(out)
    if target.is_dir():
        return f"{out} is a folder: give the path of the file to write"
    if out.endswith(tuple(filter(None, (os.sep, os.altsep)))):  # a folder's path (Path drops the separator): written as a file
        return f"{out} ends in a path separator, so names a folder: give the path of the file to write (e.g. {out.rstrip(os.sep)}.jsonl)"
    if target.exists() and not target.is_file():  # /dev/null, /dev/stdout, a FIFO: atomic_path writes through it
        return None
    return folder_problem(Path(os.path.realpath(target)).parent)


@contextlib.contextmanager
def _stop_signals_interrupt(received: list[int]) -> Iterator[None]:
    """SIGTERM and SIGHUP (a scheduler's stop, ``timeout``, a closed terminal) raise KeyboardInterrupt for the command's
    duration, as Ctrl-C does, so the temporary file is removed (atomic_path removes it only on an exception; the default
    action killed the process and left it behind). Only over the default action: a host's own handler, or nohup's ignored
    SIGHUP, stays."""

    def interrupt(signum: int, frame: FrameType | None) -> None:
        received.append(signum)
        raise KeyboardInterrupt

    replaced = []
    for signum in STOP_SIGNALS:
        if signum != signal.SIGINT and signal.getsignal(signum) is signal.SIG_DFL:
            try:
                signal.signal(signum, interrupt)
            except ValueError:  # not the main thread: no handler can be set (nor runs) here
                continue
            replaced.append(signum)
    try:
        yield
    finally:
        for signum in replaced:
            if signal.getsignal(signum) is interrupt:  # not one the command's own code set since
                signal.signal(signum, signal.SIG_DFL)


def run_dataset_cli(
    prog: str,
    description: str,
    write_rows: WriteRows,
    argv: Sequence[str] | None = None,
    *,
    with_messages: bool = True,
    add_arguments: Callable[[argparse.ArgumentParser], object] | None = None,
) -> None:
    """Parse the shared options (plus the adapter's own, from ``add_arguments``), build the rows, write them
    with ``write_rows`` and print ``wrote <what> to <out>``. ``with_messages=False`` for formats that hold only
    the label; a bad option exits with one line naming it (exit 2), before anything is written.

    Raises:
        SystemExit: 2 for a bad option, 1 if the rows cannot be built or written, 130 on Ctrl-C and 128 + N on
            SIGTERM or SIGHUP (nothing is written then).
    """
    parser = add_dataset_arguments(_Parser(prog=prog, description=description))
    if add_arguments is not None:
        add_arguments(parser)
    args = parser.parse_args(argv)
    received: list[int] = []
    try:
        with _stop_signals_interrupt(received):
            problem = _out_problem(args.out)
            if problem:
                parser.error(f"--out: {problem}")
            try:
                rows = rows_from_arguments(args, with_messages=with_messages)
            except InvalidArgument as exc:  # a usage error: exit 2, as an option argparse refuses
                parser.error(str(exc))
            # Written beside the target with its suffix, renamed when whole: a full disk or a signal leaves no half file.
            with atomic_path(args.out) as partial:
                written = write_rows(rows, argparse.Namespace(**{**vars(args), "out": str(partial)}))
    except OSError as exc:
        raise SystemExit(f"Cannot write {args.out}: {exc.strerror or exc}") from None
    except KeyboardInterrupt:
        print(f"interrupted: nothing written to {args.out}", file=sys.stderr)
        raise SystemExit(128 + (received[0] if received else signal.SIGINT)) from None
    print(f"wrote {written} to {args.out}")
