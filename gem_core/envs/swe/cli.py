"""``gem swe``: ``build`` (fetch the pinned sdists, inject the bugs, check every task) and ``list``."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

__all__ = ["add_swe_parser"]


def _build(args: argparse.Namespace) -> int:
    from gem_core.envs.swe.build import build_pack
    from gem_core.envs.swe.pack import SPEC_FILE, default_home
    from gem_core.errors import GemError

    home = Path(args.home) if args.home else default_home()
    task_ids = [t for t in args.tasks.split(",") if t] if args.tasks else None
    try:
        results = build_pack(home, spec=args.spec or SPEC_FILE, task_ids=task_ids, verify=not args.no_verify, mode=args.sandbox)
    except (GemError, OSError) as error:
        print(f"gem swe build: {error}", file=sys.stderr)
        return 1
    failed = {task: why for task, why in results.items() if why != "ok"}
    print(f"{len(results) - len(failed)} of {len(results)} tasks built in {home}" + (" (not checked)" if args.no_verify else ", each checked"))
    if failed:
        print(f"gem swe build: {len(failed)} task(s) failed their check and are not served: {', '.join(failed)}", file=sys.stderr)
        return 1
    return 0


def _list(args: argparse.Namespace) -> int:
    from gem_core.envs.swe.pack import SPEC_FILE, load_pack
    from gem_core.errors import GemError

    try:
        pack = load_pack(args.spec or SPEC_FILE)
    except (GemError, OSError) as error:
        print(f"gem swe list: {error}", file=sys.stderr)
        return 1
    for task in pack.tasks:
        first = task.issue.splitlines()[0]
        print(f"{task.id}\t{task.package.name} {task.package.version}\t{len(task.fail_to_pass)}+{len(task.pass_to_pass)} tests\t{first}")
    return 0


def add_swe_parser(commands: argparse._SubParsersAction) -> None:
    """Register ``gem swe`` and its subcommands on the ``gem`` parser."""
    parser = commands.add_parser("swe", help="software-engineering tasks: build the task pack, list its tasks")
    swe = parser.add_subparsers(dest="swe_command", required=True)
    build = swe.add_parser("build", help="download the pinned sdists (pip), inject each task's bug and check every task")
    build.add_argument("--home", default=None, help="where to put sdists and task trees (default: $GEM_SWE_HOME or ~/.cache/gem/swe)")
    build.add_argument("--spec", default=None, help="a pack spec file (default: the shipped pack)")
    build.add_argument("--tasks", default=None, help="comma-separated task ids (default: all)")
    build.add_argument("--no-verify", action="store_true", help="skip the checks (gold passes, bug fails) that run each task's tests")
    build.add_argument("--sandbox", default=None, choices=("bwrap", "process"), help="isolation of the check runs (default: $GEM_SANDBOX or bwrap)")
    build.set_defaults(run=_build)
    listing = swe.add_parser("list", help="list the pack's tasks")
    listing.add_argument("--spec", default=None, help="a pack spec file (default: the shipped pack)")
    listing.set_defaults(run=_list)
