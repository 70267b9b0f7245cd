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


def _fail(command: str, message: str) -> None:
    print(f"gem {command}: {message}", file=sys.stderr)


def _read_move(prompt: str) -> str:
    """One line of stdin, or a block: a line starting with ``` opens it and the next ``` line closes it
    (code tasks take a whole program as one move; the fences are part of the move). A line that opens and
    closes its fence (```bash ls```) is a whole move by itself."""
    line = input(prompt)
    stripped = line.strip()
    if not stripped.startswith("```") or (len(stripped) > 6 and stripped.endswith("```")):
        return line
    lines = [line]
    while True:
        line = input("... ")
        lines.append(line)
        if line.strip() == "```":
            return "\n".join(lines)


def _needs_boxed(env_id: str) -> bool:
    return env_id.startswith("game:")  # the game suite's one action convention (envs/game/action_format.py)


def _play(args: argparse.Namespace) -> int:
    """A person plays: the observation is printed, one line of stdin (or a ``` block) is one action."""
    try:
        env = make(args.env_id)
        observation, _ = env.reset(seed=args.seed)
    except UnknownEnvError as error:
        _fail("play", str(error))
        return 2
    except KeyboardInterrupt:
        return 130
    except Exception as error:  # a missing extra, an offline dataset, no bubblewrap: the message says the fix
        _fail("play", f"cannot start {args.env_id}: {str(error).splitlines()[0] if str(error) else type(error).__name__}")
        return 1
    total, turn = 0.0, 0
    print(observation)
    print("(one line is one move; a line starting with ``` begins a block that a ``` line ends, unless it ends with ``` itself; Ctrl-D quits)")
    while True:
        try:
            action = _read_move(f"\n[turn {turn + 1}] your move> ")
        except EOFError:
            print(f"\nInput ended after {turn} turns; return so far {total:g}.")
            return 0
        except KeyboardInterrupt:
            print(f"\nStopped after {turn} turns; return so far {total:g}.")
            return 130
        if _needs_boxed(args.env_id) and "\\boxed{" not in action and not action.startswith("!"):
            # A hint instead of the env's format penalty; the env itself is unchanged (a "!" sends as typed).
            print(f"Moves go inside \\boxed{{}}: type \\boxed{{{action.strip() or '...'}}} (or !{action} to send it as it is).")
            continue
        if action.startswith("!"):
            action = action[1:]
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

    # Always listed: without the eval extra, `gem eval` says which extra to install (gem_core.eval.cli
    # itself imports only the standard library).
    from gem_core.eval.cli import add_eval_parser

    add_eval_parser(commands)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.run(args)
    except KeyboardInterrupt:  # Ctrl-C in any command that does not handle it itself: no traceback
        print(f"\ngem {args.command}: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
