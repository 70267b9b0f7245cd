"""``gem replay FILE``: the command line of :mod:`gem_core.rollout.replay` (the engine stays in rollout/).

FILE is a trajectory JSONL file, or a ``gem eval`` run: its folder, its ``episodes.jsonl`` or its
``report.json`` (each episode's transcript holds its actions). The command reads the env kwargs, env id and
judge a replay may use from the command line only; the exit code says whether any stored reward changed
(0: none, 1: some, 2: the file could not be replayed, 3: some turns could not be scored: the judge gave no
verdict or the env step failed).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from gem_core.cli.options import env_kwargs_option
from gem_core.rollout import replay as engine

__all__ = ["add_replay_parser"]


def _run(args: argparse.Namespace) -> int:
    from gem_core.judge.options import judge_from_args

    judge = None
    try:
        overrides = None if args.env_kwargs is None else env_kwargs_option(args.env_kwargs)
        judge, rubric = judge_from_args(args)
        left_out: list[str] = []
        stored = _eval_run_episodes(args.file, left_out) if _is_eval_run(args.file) else engine.trajectory_episodes(args.file)
        episodes, changes = engine.replay_episodes(args.file, stored, overrides, args.env_id, judge, rubric)
    except (OSError, ValueError, KeyError) as exc:  # unreadable file, bad record, unknown env id
        print(f"gem replay: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        raise
    except Exception as exc:  # noqa: BLE001 - an env that fails to build: one line naming it, no traceback
        print(f"gem replay: {args.file}: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 2
    finally:
        if judge is not None:
            judge.close()
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
        return 3
    print(f"{summary}.")
    return 1 if changed else 0


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
        help="re-score stored trajectories against the current env (exit 1 if any reward changed, 3 if a judge or env step failed)",
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
