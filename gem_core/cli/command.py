"""The ``gem`` command: ``gem list`` and ``gem play`` here; ``replay``, ``serve``, ``check``, ``swe`` and ``eval`` from their own modules."""

from __future__ import annotations

import argparse
import fnmatch
import sys
from collections.abc import Sequence
from typing import Any

from gem_core.cli.options import OneLineErrors, run_until_pipe_closes, seed_option
from gem_core.multi_agent import MultiAgentEnv
from gem_core.registry import UnknownEnvError, list_envs, make


def _matches(name: str, pattern: str) -> bool:
    """``list_envs``'s rule: a glob when the pattern has ``*?[``, else a case-insensitive substring."""
    if any(ch in pattern for ch in "*?["):
        return fnmatch.fnmatchcase(name, pattern)
    return pattern.lower() in name.lower()


def _list(args: argparse.Namespace) -> int:
    if args.aliases:
        from gem_core.registry import aliases

        pairs = [
            (alias, target) for alias, target in aliases().items()
            if args.pattern is None or _matches(alias, args.pattern) or _matches(target, args.pattern)
        ]
        if not pairs:
            print(f"No alias matches {args.pattern!r} (an alias matches by its own name or the id it stands for).", file=sys.stderr)
            return 1
        print("\n".join(f"{alias} -> {target}" for alias, target in pairs))
        return 0
    ids = list_envs(args.pattern)
    if not ids:
        print(f"No env id matches {args.pattern!r}.", file=sys.stderr)
        return 1
    if args.ids:
        print("\n".join(ids))
        return 0
    from gem_core.cli.env_table import env_rows

    rows = env_rows(ids)
    print("\n".join(rows))
    if any("hub data" in row for row in rows):  # on stderr: stdout stays one line per id
        print("hub data downloads on first use; offline, use the category's :Sample id (shipped data), "
              "make(ID, data_files=...) with a local copy, or HF_HUB_OFFLINE=1 with it in the Hugging Face cache.",
              file=sys.stderr)
    return 0


def _fail(command: str, message: str) -> None:
    print(f"gem {command}: {message}", file=sys.stderr)


def _cause(error: BaseException) -> str:
    """The first line of what went wrong. An exception group (anyio's task groups raise one when a
    connection fails, e.g. to a remote: port out of range) says only "unhandled errors in a TaskGroup":
    its first exception, named with its type, is the cause."""
    unwrapped = False
    while isinstance(inner := getattr(error, "exceptions", None), (list, tuple)) and inner:
        error, unwrapped = inner[0], True
    line = str(error).splitlines()[0] if str(error) else ""
    if not line:
        return type(error).__name__
    return f"{type(error).__name__}: {line}" if unwrapped else line


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
    # The one action convention of the game suite and the self-play games (envs/game/action_format.py).
    return env_id.startswith(("game:", "multi:"))


def _read_action(env_id: str, prompt: str) -> str:
    """One move from stdin; a move without ``\\boxed{}`` where the env needs one gets a hint instead."""
    while True:
        action = _read_move(prompt)
        if _needs_boxed(env_id) and "\\boxed{" not in action and not action.startswith("!"):
            # A hint instead of the env's format penalty; the env itself is unchanged (a "!" sends as typed).
            print(f"Moves go inside \\boxed{{}}: type \\boxed{{{action.strip() or '...'}}} (or !{action} to send it as it is).")
            continue
        return action[1:] if action.startswith("!") else action


def _next_move(env_id: str, turn: int, total: float) -> str | int:
    """The person's next move, or the exit code once input ends (0) or Ctrl-C stops the game (130)."""
    try:
        return _read_action(env_id, f"\n[turn {turn + 1}] your move> ")
    except EOFError:
        print(f"\nInput ended after {turn} turns; return so far {total:g}.")
        return 0
    except KeyboardInterrupt:
        print(f"\nStopped after {turn} turns; return so far {total:g}.")
        return 130


def _play_seats(args: argparse.Namespace, env: Any, observations: Any) -> int:
    """A self-play game: the person takes one seat, the other seats move at random (the env's own sampler)."""
    seat = args.seat or env.agents[0]
    if seat not in env.agents:
        _fail("play", f"--seat {seat!r} is not a seat of {args.env_id}; choose one of {', '.join(env.agents)}.")
        return 2
    total, turn = 0.0, 0
    print(f"You play seat {seat!r}; the other seats ({', '.join(a for a in env.agents if a != seat)}) move at random.")
    if seat in observations:
        print(observations[seat])
    while env.acting_agents():
        actions = {}
        for agent in env.acting_agents():
            if agent != seat:
                actions[agent] = env.sample_random_action(agent)
                continue
            move = _next_move(args.env_id, turn, total)
            if isinstance(move, int):
                return move
            actions[agent] = move
        observations, rewards, terminations, truncations, infos = env.step(actions)
        if seat in actions:
            turn += 1
        total += float(rewards.get(seat, 0.0))
        if seat in observations:
            print(observations[seat])
        if rewards.get(seat):
            print(f"(reward {float(rewards[seat]):+g}, return {total:g})")
        if terminations.get(seat) or truncations.get(seat):
            break
    print(f"\nGame over after {turn} of your moves; your return {total:g}.")
    return 0


def _play(args: argparse.Namespace) -> int:
    """A person plays: the observation is printed, one line of stdin (or a ``` block) is one action."""
    try:
        env = make(args.env_id)
        observation, _ = env.reset(seed=args.seed)
        if isinstance(env.unwrapped, MultiAgentEnv):
            return _play_seats(args, env.unwrapped, observation)
        if args.seat is not None:
            env.close()
            _fail("play", f"--seat applies to multi-agent games (multi:*); {args.env_id} has one player: leave --seat out.")
            return 2
    except UnknownEnvError as error:
        _fail("play", str(error))
        return 2
    except KeyboardInterrupt:
        return 130
    except Exception as error:  # a missing extra, an offline dataset, no bubblewrap: the message says the fix
        _fail("play", f"cannot start {args.env_id}: {_cause(error)}")
        return 1
    total, turn = 0.0, 0
    print(observation)
    print("(one line is one move; a line starting with ``` begins a block that a ``` line ends, unless it ends with ``` itself; Ctrl-D quits)")
    while True:
        action = _next_move(args.env_id, turn, total)
        if isinstance(action, int):
            return action
        observation, reward, terminated, truncated, info = env.step(action)
        turn += 1
        total += float(reward)
        print(observation)
        print(f"(reward {float(reward):+g}, return {total:g})")
        if terminated or truncated:
            verdict = "won" if info.get("success") else ("ran out of turns" if truncated else "ended")
            print(f"\nEpisode {verdict} after {turn} turns with return {total:g}.")
            return 0


class _Parser(OneLineErrors, argparse.ArgumentParser):
    """``gem``'s parser, and each subcommand's (argparse makes them of the same class): a usage error is one
    line naming the option, exit 2, not the whole usage above it."""


def build_parser() -> argparse.ArgumentParser:
    """The ``gem`` parser; each subcommand's ``run`` is what :func:`main` calls."""
    parser = _Parser(prog="gem", description="GEM: multi-turn environments for LLM agents.")
    commands = parser.add_subparsers(dest="command", required=True)

    list_parser = commands.add_parser(
        "list", help="list registered env ids, with the data each needs (shipped, hub) and its pip extra"
    )
    list_parser.add_argument("pattern", nargs="?", default=None, help="glob ('game:*') or substring")
    list_parser.add_argument(
        "--aliases", action="store_true",
        help="list other names of ids (upstream GEM's) instead; the pattern matches an alias or the id it stands for",
    )
    list_parser.add_argument("--ids", action="store_true", help="ids only, without the data and extra columns")
    list_parser.set_defaults(run=_list)

    play_parser = commands.add_parser("play", help="play an env in the terminal")
    play_parser.add_argument("env_id", help="e.g. game:Wordle-v0")
    play_parser.add_argument("--seed", type=seed_option, default=None, help="seed of the episode, 0 or more (default: random)")
    play_parser.add_argument("--seat", default=None, help="multi-agent games (multi:*): the seat you play (default: the first); the others move at random")
    play_parser.set_defaults(run=_play)

    from gem_core.check import add_check_parser
    from gem_core.cli.replay import add_replay_parser
    from gem_core.serve.command import add_serve_parser

    add_replay_parser(commands)
    add_serve_parser(commands)
    add_check_parser(commands)

    from gem_core.envs.swe.cli import add_swe_parser

    add_swe_parser(commands)

    # Always listed: without the eval extra, `gem eval` says which extra to install (gem_core.eval.cli
    # itself imports only the standard library).
    from gem_core.eval.cli import add_eval_parser

    add_eval_parser(commands)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``gem`` with ``argv`` (default: ``sys.argv[1:]``); returns the exit code instead of exiting."""
    return run_until_pipe_closes(lambda: _run(argv))  # `gem list | head`: no BrokenPipeError traceback


def _run(argv: Sequence[str] | None) -> int:
    command = ""
    try:
        args = build_parser().parse_args(argv)  # imports every command's module: about a second
        command = f" {args.command}"
        return args.run(args)
    except KeyboardInterrupt:  # Ctrl-C while the commands load, or in one that does not handle it itself: no traceback
        print(f"\ngem{command}: interrupted", file=sys.stderr)
        return 130

