"""The ``gem eval`` subcommand: arguments, then :func:`gem_core.eval.runner.evaluate`.

``gem_core.cli`` registers it with :func:`add_eval_parser` and dispatches to :func:`run_eval_command`;
``python -m gem_core.eval`` runs it alone.
"""

from __future__ import annotations

import argparse
import importlib.util
import re
import signal
import sys
from datetime import datetime, timezone
from pathlib import Path

from gem_core.settings import environment_value

__all__ = ["add_eval_parser", "configure_eval_parser", "run_eval_command"]

#: Signals that stop a run: the partial report is written, the exit code is 128 + N.
STOP_SIGNALS = tuple(getattr(signal, name) for name in ("SIGINT", "SIGTERM", "SIGHUP") if hasattr(signal, name))

EXAMPLES = """examples:
  gem eval --model runs/trl/model --env game:GuessTheNumber-v0 --max-new-tokens 1   # after examples/train_trl.py --save_model
  gem eval --model Qwen/Qwen3-0.6B --env game:GuessTheNumber-v0-easy --env game:Wordle-v0 --episodes 20
  gem eval --model Qwen/Qwen3-8B --base-url http://127.0.0.1:8000/v1 --env game:Wordle-v0 --concurrency 64
  gem eval --compare runs/a/report.json runs/b/report.json
"""


def configure_eval_parser(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """Add the ``gem eval`` arguments to ``parser``."""
    what = parser.add_argument_group("what to evaluate")
    what.add_argument("--model", help="A transformers model (local path or hub id), or with --base-url the served model name.")
    what.add_argument("--env", dest="env_ids", action="append", metavar="ID", default=[], help="Env id; repeat for several envs.")
    what.add_argument("--episodes", type=int, default=10, help="Episodes per env (default: 10).")
    what.add_argument("--seed", type=int, default=0, help="Episode i of every env uses seed SEED+i (default: 0).")
    what.add_argument("--concurrency", type=int, default=8, help="Episodes played at once (default: 8).")
    what.add_argument("--out", metavar="DIR", help="Directory for report.json and the plots (default: gem-eval/<model>-<time>).")
    what.add_argument("--compare", nargs=2, metavar=("A", "B"), help="Print two reports side by side instead of evaluating.")

    episode = parser.add_argument_group("episodes and sampling")
    episode.add_argument("--max-turns", type=int, default=None, help="Turns per episode, replacing the env's own limit (default: the env's limit).")
    episode.add_argument("--max-new-tokens", type=int, default=256, help="Tokens per turn (default: 256).")
    episode.add_argument("--temperature", type=float, default=1.0)
    episode.add_argument("--top-p", type=float, default=1.0)
    episode.add_argument("--top-k", type=int, default=0, help="0 turns top-k off.")
    episode.add_argument("--system-prompt", default=None)

    backend = parser.add_argument_group("model backend")
    backend.add_argument(
        "--base-url",
        help="Root of an OpenAI-compatible API (e.g. http://127.0.0.1:8000/v1 for vLLM); without it --model runs in-process.",
    )
    backend.add_argument("--api-key", default=None, help="Bearer token for --base-url (default: $OPENAI_API_KEY).")
    backend.add_argument("--timeout", type=float, default=60.0, help="Seconds for one whole HTTP request, first byte to last (default: 60).")
    backend.add_argument("--retries", type=int, default=3, help="Retries per HTTP request on timeouts, 429 and 5xx (default: 3).")
    backend.add_argument("--max-in-flight", type=int, default=None, help="HTTP requests open at once (default: --concurrency).")
    backend.add_argument("--device", default=None, help="torch device for an in-process model (default: the policy's choice).")

    output = parser.add_argument_group("output")
    output.add_argument("--no-plots", action="store_true", help="Skip the PNG plots.")
    output.add_argument("--no-progress", action="store_true", help="No progress bar.")
    return parser


def add_eval_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Register ``eval`` on the ``gem`` command's subparsers; dispatch to :func:`run_eval_command`."""
    parser = subparsers.add_parser(
        "eval",
        help="Evaluate a model on envs: JSON report, plots, comparison.",
        description="Run a model on a set of envs and write a JSON report and PNG plots.",
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    configure_eval_parser(parser)
    parser.set_defaults(run=run_eval_command)  # gem_core.cli dispatches with `args.run(args)`
    return parser


def _default_out_dir(model: str) -> Path:
    slug = re.sub(r"[^A-Za-z0-9_.-]+", "_", model.rstrip("/").split("/")[-1]) or "model"
    stamp = datetime.now(timezone.utc).strftime("%Y%m%d-%H%M%S")
    return Path("gem-eval") / f"{slug}-{stamp}"


#: How to get what ``gem eval`` imports (the distribution on the package index named ``gem`` is another project).
INSTALL_HINT = 'pip install -e ".[eval]"'


def missing_modules(args: argparse.Namespace) -> list[str]:
    """The modules this run needs that are not installed (checked before anything loads)."""
    needed = ["rich"]
    if not args.compare:
        needed += ["tqdm", "httpx", "openai"] if args.base_url else ["tqdm", "transformers"]
        if not args.no_plots:
            needed.append("matplotlib")
    return [name for name in needed if importlib.util.find_spec(name) is None]


def _fail(message: str) -> None:
    print(f"gem eval: {message}", file=sys.stderr)


def run_eval_command(args: argparse.Namespace) -> int:
    """Run ``gem eval`` for parsed ``args``; returns the exit code: 0 ok, 1 failed episodes or a write error,
    2 bad usage, 128+N stopped by signal N (130 Ctrl-C, 143 SIGTERM, 129 SIGHUP)."""
    missing = missing_modules(args)
    if missing:
        _fail(f"needs {', '.join(missing)}, from the eval extra: {INSTALL_HINT} (in the GEM checkout).")
        return 2
    if not args.compare:
        if not args.model:
            _fail("--model is required (a path or hub id, or with --base-url the served name).")
            return 2
        if not args.env_ids:
            _fail("give at least one --env ID (`gem list` shows the ids).")
            return 2
        from gem_core.registry import UnknownEnvError, spec

        for env_id in args.env_ids:  # before a model loads or a hub is asked for one
            try:
                spec(env_id)
            except UnknownEnvError as exc:
                _fail(str(exc))
                return 2

    from rich.console import Console

    # Off a terminal (a log, a pipe) rich would squeeze tables into 80 columns.
    console = Console(width=None if sys.stdout.isatty() else 160)
    if args.compare:
        from gem_core.eval.tables import print_comparison

        try:
            print_comparison(*args.compare, console=console)
        except (OSError, ValueError) as exc:
            _fail(f"--compare: {exc}")
            return 2
        return 0

    from gem_core.eval.episode_log import ReportWriteError
    from gem_core.eval.runner import evaluate
    from gem_core.eval.tables import summary_table

    out_dir = Path(args.out) if args.out else _default_out_dir(args.model)
    backend_options = {}
    if args.base_url:
        backend_options = {
            "api_key": args.api_key or environment_value("OPENAI_API_KEY"),
            "timeout": args.timeout,
            "max_retries": args.retries,
            "max_in_flight": args.max_in_flight or args.concurrency,
        }
    elif args.device:
        backend_options = {"device": args.device}
    try:
        report = evaluate(
            args.env_ids,
            model=args.model,
            base_url=args.base_url,
            backend_options=backend_options,
            stop_signals=STOP_SIGNALS,
            episodes=args.episodes,
            seed=args.seed,
            concurrency=args.concurrency,
            max_turns=args.max_turns,
            max_new_tokens=args.max_new_tokens,
            temperature=args.temperature,
            top_p=args.top_p,
            top_k=args.top_k,
            system_prompt=args.system_prompt,
            out_dir=str(out_dir),
            plots=not args.no_plots,
            progress=not args.no_progress,
        )
    except KeyboardInterrupt as exc:
        signum = getattr(exc, "signum", signal.SIGINT)
        print(f"Interrupted ({signal.Signals(signum).name}): the partial report is in {out_dir}/report.json", file=sys.stderr)
        return 128 + signum
    except ReportWriteError as exc:
        _fail(str(exc))
        return 1
    except (ValueError, OSError) as exc:
        _fail(str(exc))
        return 2
    console.print(summary_table(report))
    console.print(f"Report and plots written to {out_dir}/")
    failed = report.failed_episodes()
    if failed:
        _fail(f"{len(failed)} of {report.episodes_finished} episodes failed; the first ({failed[0].env_id}, seed "
              f"{failed[0].seed}): {failed[0].error}")
        return 1
    return 0


def main(argv: list[str] | None = None) -> int:
    """``python -m gem_core.eval``: the ``eval`` subcommand on its own."""
    parser = argparse.ArgumentParser(
        prog="python -m gem_core.eval",
        description="Evaluate a model on GEM envs (same as `gem eval`).",
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    configure_eval_parser(parser)
    return run_eval_command(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
