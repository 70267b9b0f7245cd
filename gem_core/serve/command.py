"""``gem serve ENV_ID``: the command line of the env server (parsing, then uvicorn on a bound socket)."""

from __future__ import annotations

import argparse
import os
import sys

from gem_core.serve.app import ServeConfig
from gem_core.serve.connections import ConnectionLimits, add_connection_arguments, connection_limits_from, port_error, positive_float, positive_int

__all__ = ["add_serve_parser"]

#: Seconds that Ctrl-C or SIGTERM leaves requests in flight to finish before they are cancelled. Without a bound,
#: uvicorn waited for them all: a hung step held the stopping server for the whole --step-timeout (60 s).
GRACEFUL_SHUTDOWN = 3.0


def _serve(args: argparse.Namespace) -> int:
    if port_error(args.port):
        print(f"gem serve: {port_error(args.port)}", file=sys.stderr)
        return 2
    try:
        import uvicorn  # noqa: F401  (checked here: one clear message when the extra is missing)

        from gem_core.serve.app import create_app
    except ImportError as error:
        print(f'gem serve needs the serve extra ({error.name} is missing): pip install -e ".[serve]"', file=sys.stderr)
        return 2
    from gem_core.errors import InvalidArgument, StartFailed
    from gem_core.registry import UnknownEnvError, import_env_modules
    from gem_core.serve.asgi import listen_error, listening_socket
    from gem_core.serve.connections import ConnectionGuard

    try:
        import_env_modules(args.imports)
    except Exception as error:
        print(f"gem serve: importing {args.imports} failed: {type(error).__name__}: {error}", file=sys.stderr)
        return 2
    try:
        config = ServeConfig(
            max_sessions=args.max_sessions,
            idle_timeout=args.idle_timeout,
            max_body_bytes=args.max_body_bytes,
            max_action_bytes=args.max_action_bytes,
            body_timeout=args.body_timeout,
            step_timeout=args.step_timeout,
            token=args.token,
        )
    except InvalidArgument as error:  # an empty --token (an unset $GEM_TOKEN) must not serve without authentication
        print(f"gem serve: {error}", file=sys.stderr)
        return 2
    try:
        app = create_app(args.env_id, config)
    except (UnknownEnvError, StartFailed) as error:  # an unknown id, or one that can never be served
        print(error, file=sys.stderr)
        return 2
    guard = ConnectionGuard(connection_limits_from(args))
    try:
        sock = guard.listen(listening_socket(args.host, args.port))
    except OSError as error:
        print(f"gem serve: {listen_error(args.host, args.port, error)}", file=sys.stderr)
        return 2
    host, port = sock.getsockname()[:2]
    if host not in ("127.0.0.1", "::1", "localhost") and not args.token:
        print("gem serve: warning: listening beyond loopback without --token; anyone who reaches the port can use it", file=sys.stderr)
    print(f"gem serve: {args.env_id} at http://{host}:{port} (WebSocket ws://{host}:{port}/ws)", flush=True)
    # The guard bounds what uvicorn does not: header and body deadlines, connections in total (under the
    # open-file limit) and per client. A WebSocket step message may be up to twice --max-action-bytes.
    # Stopping, requests in flight get GRACEFUL_SHUTDOWN seconds; env calls still running after that are left behind.
    guard.serve(app, sock, timeout_keep_alive=30, ws_max_size=max(args.max_body_bytes, 2 * args.max_action_bytes),
                timeout_graceful_shutdown=GRACEFUL_SHUTDOWN)
    _exit_past_stuck_calls()
    return 0


def _exit_past_stuck_calls() -> None:
    """Exit now if env calls still run once the server has stopped: the env threads cannot be stopped, and
    Python's exit would wait for them (for ever, for a hung one), so Ctrl-C would not stop the server."""
    from gem_core.env import ENV_THREADS

    running = ENV_THREADS.running_longer_than(0)
    if not running:
        return
    calls = "1 env call is" if running == 1 else f"{running} env calls are"
    print(f"gem serve: stopped; {calls} still running (past --step-timeout) and left behind", file=sys.stderr, flush=True)
    sys.stdout.flush()
    os._exit(0)


def add_serve_parser(commands: argparse._SubParsersAction) -> None:
    """Register ``gem serve`` on the ``gem`` command's subparsers."""
    defaults = ServeConfig()
    parser = commands.add_parser(
        "serve",
        help="serve an env over HTTP and WebSocket (one env per session)",
        description="Serve ENV_ID over HTTP and WebSocket, one env instance per session; gem_core.serve.remote.RemoteEnv "
        "(or make('remote:http://HOST:PORT/ENV_ID')) is the client. Protocol: see gem_core/serve/__init__.py.",
    )
    parser.add_argument("env_id", help="a registered env id, e.g. game:Wordle-v0")
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on (default: loopback only)")
    parser.add_argument("--port", type=int, default=8765, help="port, 0 to 65535 (0 picks a free one; the chosen port is printed)")
    parser.add_argument("--max-sessions", type=positive_int, default=defaults.max_sessions, help="sessions held at once")
    parser.add_argument("--idle-timeout", type=positive_float, default=defaults.idle_timeout, help="seconds before an idle session is ended")
    parser.add_argument("--step-timeout", type=positive_float, default=defaults.step_timeout, help="seconds one reset or step may take")
    parser.add_argument("--max-body-bytes", type=positive_int, default=defaults.max_body_bytes, help="largest request or message (steps aside)")
    parser.add_argument(
        "--max-action-bytes", type=positive_int, default=defaults.max_action_bytes,
        help="largest step body; a larger action gets the env's malformed-action answer (format penalty), like a local env's bad move",
    )
    add_connection_arguments(parser, ConnectionLimits(body_timeout=defaults.body_timeout))
    parser.add_argument(
        "--import", dest="imports", action="append", default=[], metavar="MODULE",
        help="a module or .py file to import first (one that registers your env); repeatable",
    )
    parser.add_argument("--token", default=None, help="require 'Authorization: Bearer TOKEN' on every request")
    parser.set_defaults(run=_serve)
