"""The ``gem`` command: ``gem list``, ``gem play``, ``gem eval``."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from gem_core.registry import UnknownEnvError, list_envs, make


def _list(args: argparse.Namespace) -> int:
    if args.aliases:
        from gem_core.registry import aliases

        print("\n".join(f"{alias} -> {target}" for alias, target in aliases().items()))
        return 0
    ids = list_envs(args.pattern)
    if not ids:
        print(f"No env id matches {args.pattern!r}.", file=sys.stderr)
        return 1
    print("\n".join(ids))
    return 0


def _play(args: argparse.Namespace) -> int:
    """A person plays: the observation is printed, one line of stdin is one action."""
    try:
        env = make(args.env_id)
    except UnknownEnvError as error:
        print(error, file=sys.stderr)
        return 2
    observation, _ = env.reset(seed=args.seed)
    total, turn = 0.0, 0
    print(observation)
    while True:
        try:
            action = input(f"\n[turn {turn + 1}] your move> ")
        except EOFError:
            print(f"\nInput ended after {turn} turns; return so far {total:g}.")
            return 0
        observation, reward, terminated, truncated, info = env.step(action)
        turn += 1
        total += float(reward)
        print(observation)
        print(f"(reward {float(reward):+g}, return {total:g})")
        if terminated or truncated:
            verdict = "won" if info.get("success") else ("ran out of turns" if truncated else "ended")
            print(f"\nEpisode {verdict} after {turn} turns with return {total:g}.")
            return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="gem", description="GEM: multi-turn environments for LLM agents.")
    commands = parser.add_subparsers(dest="command", required=True)

    list_parser = commands.add_parser("list", help="list registered env ids")
    list_parser.add_argument("pattern", nargs="?", default=None, help="glob ('game:*') or substring")
    list_parser.add_argument("--aliases", action="store_true", help="list other names of ids (upstream GEM's) instead")
    list_parser.set_defaults(run=_list)

    play_parser = commands.add_parser("play", help="play an env in the terminal")
    play_parser.add_argument("env_id", help="e.g. game:Wordle-v0")
    play_parser.add_argument("--seed", type=int, default=None, help="seed of the episode (default: random)")
    play_parser.set_defaults(run=_play)

    from gem_core.check import add_check_parser
    from gem_core.rollout.replay import add_replay_parser
    from gem_core.serve.command import add_serve_parser

    add_replay_parser(commands)
    add_serve_parser(commands)
    add_check_parser(commands)

    try:
        from gem_core.eval.cli import add_eval_parser
    except ImportError:  # the eval toolkit is optional until its extra is installed
        pass
    else:
        add_eval_parser(commands)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return args.run(args)


if __name__ == "__main__":
    sys.exit(main())
