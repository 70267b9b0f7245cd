"""``gem replay FILE``: the command line of :mod:`gem_core.rollout.replay` (the engine stays in rollout/).

FILE is a trajectory JSONL file, or a ``gem eval`` run: its folder, its ``episodes.jsonl`` or its
``report.json`` (each episode's transcript holds its actions). The command reads the env kwargs, env id and
judge a replay may use from the command line only; the exit code says whether any stored reward changed
(0: none, 1: some, 2: the file could not be replayed, 3: some turns could not be scored: the judge gave no
verdict or the env step failed, 4: the report could not be written: a full disk, ``> /dev/full``). A reader
that stops early (``gem replay f | head``) leaves the code the replay found.

FILE may be a pipe (``cat f | gem replay /dev/stdin``, ``<(...)``, a FIFO): it is read once, into a temporary
copy, since telling an eval run from a trajectory file reads its first record; a FIFO that no program writes
to is refused after a moment (exit 2) instead of waiting forever.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import select
import stat
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from gem_core.cli.options import env_kwargs_option, run_until_pipe_closes
from gem_core.errors import InvalidArgument
from gem_core.rollout import replay as engine

__all__ = ["add_replay_parser"]


#: The exit code of a replay whose report could not be written (1 is "some reward changed").
OUTPUT_NOT_WRITTEN_EXIT = 4

#: How long a FIFO that reads as ended before its first byte is given for its writer to open it.
_WRITER_GRACE_S = 1.0


def _run(args: argparse.Namespace) -> int:
    from gem_core.judge.options import judge_from_args
    from gem_core.registry import spec

    judge = None
    path = args.file
    if args.env_id is not None:  # checked up front: a file with no episode never builds the env, so a typo exited 0
        try:
            spec(args.env_id)
        except (KeyError, ValueError) as exc:  # UnknownEnvError names the closest ids; InvalidArgument a malformed remote: id
            print(f"gem replay: --env-id: {exc}", file=sys.stderr)
            return 2
    try:
        with contextlib.ExitStack() as cleanup:
            overrides = None if args.env_kwargs is None else env_kwargs_option(args.env_kwargs)
            judge, rubric = judge_from_args(args)
            path = cleanup.enter_context(_read_once(args.file))
            left_out: list[str] = []
            stored = _eval_run_episodes(path, left_out) if _is_eval_run(path) else engine.trajectory_episodes(path)
            episodes, changes = engine.replay_episodes(args.file, stored, overrides, args.env_id, judge, rubric)
    except (OSError, ValueError, KeyError) as exc:  # unreadable file, bad record, unknown env id
        print(f"gem replay: {str(exc).replace(path, args.file)}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        raise
    except Exception as exc:  # noqa: BLE001 - an env that fails to build: one line naming it, no traceback
        print(f"gem replay: {args.file}: {type(exc).__name__}: {str(exc).replace(path, args.file)}", file=sys.stderr)
        return 2
    finally:
        if judge is not None:
            judge.close()
    failed = [c for c in changes if c.error]
    code = 3 if failed else (1 if changes else 0)
    # Flushed here, so a report that cannot be written ends with a code of its own, not the 1 that means a change.
    return run_until_pipe_closes(lambda: _report(left_out, episodes, changes, code), prog="gem replay",
                                 closed_pipe_exit=code, unwritable_exit=OUTPUT_NOT_WRITTEN_EXIT)


def _report(left_out: list[str], episodes: int, changes: list[Any], code: int) -> int:
    """Print what the replay found; returns ``code``."""
    for reason in left_out:
        print(f"not replayed: {reason}")
    failed = [c for c in changes if c.error]
    changed = [c for c in changes if not c.error]
    for change in changes:
        if change.error:  # no verdict: the replayed 0 is no score, so no reward is compared
            print(f"episode {change.episode} turn {change.turn}: judge/env failed (stored reward {change.stored_reward:+g}): {change.error}")
            continue
        print(
            f"episode {change.episode} turn {change.turn}: reward {change.stored_reward:+g} -> {change.replayed_reward:+g}"
            + (f" ({change.note})" if change.note != "reward" else "")
        )
    summary = f"{episodes} episodes replayed, {len(changed)} turns changed"
    if failed:
        print(f"{summary}, {len(failed)} turns failed (judge or env errors; no reward compared).")
    else:
        print(f"{summary}.")
    return code


@contextlib.contextmanager
def _read_once(path: str) -> Iterator[str]:
    """``path`` itself if it is a regular file or a folder (or missing: the reader says so), else a temporary
    copy of what it holds: a pipe can be read only once, and telling an eval run from a trajectory file reads
    the first record (the second open found the pipe drained: 0 episodes, exit 0, "nothing changed").

    The FIFO is opened without waiting (a FIFO that no program writes to blocks ``open`` forever); one that
    reads as ended before its first byte gets :data:`_WRITER_GRACE_S` for its writer to open it.

    Raises:
        InvalidArgument: the input ended before its first byte (a FIFO nothing writes to).
        OSError: it cannot be read.
    """
    try:
        mode = os.stat(path).st_mode
    except OSError:
        mode = 0
    if not mode or stat.S_ISREG(mode) or stat.S_ISDIR(mode):
        yield path
        return
    with tempfile.TemporaryDirectory(prefix="gem-replay-") as folder:
        copy = os.path.join(folder, "input.jsonl")
        descriptor = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
        try:
            with open(copy, "wb") as out:
                copied = _copy_all(descriptor, out)
        finally:
            os.close(descriptor)
        if not copied:
            raise InvalidArgument(f"{path}: no input (a pipe or FIFO that no program writes to?); start the writer first, "
                                  "or give the file itself.")
        yield copy


def _copy_all(descriptor: int, out: Any) -> int:
    """Copy what a non-blocking ``descriptor`` holds to ``out`` until its writer closes it; the bytes copied."""
    copied, waited = 0, False
    while True:
        try:
            chunk = os.read(descriptor, 1 << 16)
        except BlockingIOError:  # a writer is there, its next bytes are not yet
            select.select([descriptor], [], [])
            continue
        if chunk:
            out.write(chunk)
            copied += len(chunk)
        elif copied or waited:
            return copied
        else:  # ended before any byte: a FIFO whose writer has not opened it yet reads so too
            waited = True
            select.select([descriptor], [], [], _WRITER_GRACE_S)


def _is_eval_run(path: str) -> bool:
    """Whether ``path`` is a ``gem eval`` run (a folder, a report.json, or episodes whose first record is not a
    trajectory's but has a transcript) rather than a trajectory file."""
    from gem_core.eval.report import REPORT_FILENAME
    from gem_core.rollout.trajectory_io import read_records

    location = Path(path)
    if location.is_dir() or location.name == REPORT_FILENAME:
        return True
    try:
        first = next(read_records(location), None)
    except (OSError, ValueError):  # unreadable: the trajectory reader says why
        return False
    return isinstance(first, dict) and "format" not in first and "transcript" in first


def _eval_run_episodes(path: str, left_out: list[str]) -> Any:
    from gem_core.eval.rescore import run_episodes_to_replay

    return run_episodes_to_replay(path, left_out=left_out)


def add_replay_parser(commands: Any) -> None:
    """Add ``gem replay`` to the CLI's subcommands."""
    parser = commands.add_parser(
        "replay",
        help="re-score stored trajectories against the current env (exit 1 if any reward changed, 2 if the file could "
        "not be replayed, 3 if a judge or env step failed, 4 if the report could not be written)",
        description=(engine.__doc__ or "").split("\n\n")[0],
    )
    parser.add_argument(
        "file",
        help="a JSONL file written by gem_core.rollout.trajectory_io.write_trajectories, or a gem eval run "
        "(its --out folder, episodes.jsonl or report.json)",
    )
    parser.add_argument(
        "--env-kwargs",
        default=None,
        help="JSON object replacing every episode's stored env kwargs; the only way to set one a file may not "
        "choose (a sandbox mode, URL, path, module or limit)",
    )
    parser.add_argument(
        "--env-id",
        default=None,
        help="env id replacing every episode's stored one; the only way to replay on a remote: id",
    )
    from gem_core.judge.options import add_judge_arguments

    # Judged envs (judge:*) re-judge with the judge given here (another model re-scores every answer; the
    # same model and --judge-cache replay for free); a trajectory file never names a judge.
    add_judge_arguments(parser)
    parser.set_defaults(run=_run)
