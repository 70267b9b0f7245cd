"""The ``gem eval`` subcommand: arguments, then :func:`gem_core.eval.runner.evaluate`.

``gem_core.cli`` registers it with :func:`add_eval_parser` and dispatches to :func:`run_eval_command`;
``python -m gem_core.eval`` runs it alone.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import re
import shlex
import signal
import sys
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gem_core.cli.options import folder_problem, run_until_pipe_closes
from gem_core.eval.bounds import BACKEND_BOUNDS, MAX_PLANNED_EPISODES, SETTING_BOUNDS, base_url_problem, seed_range_problem, setting_problem
from gem_core.eval.config import existing_run
from gem_core.registry import needs_trust
from gem_core.settings import environment_value
from gem_core.transport.url_secrets import redact_user_info

if TYPE_CHECKING:
    from gem_core.eval.resume import RunHeader

__all__ = ["add_eval_parser", "configure_eval_parser", "fill_run_flags", "run_eval_command"]

#: Signals that stop a run: the partial report is written, the exit code is 128 + N.
STOP_SIGNALS = tuple(getattr(signal, name) for name in ("SIGINT", "SIGTERM", "SIGHUP") if hasattr(signal, name))

EXAMPLES = """examples:
  gem eval --model runs/trl/model --env game:GuessTheNumber-v0 --max-new-tokens 1   # after examples/train_trl.py --save_model
  gem eval --model Qwen/Qwen3-0.6B --env game:GuessTheNumber-v0-easy --env game:Wordle-v0 --episodes 20
  gem eval --model Qwen/Qwen3-8B --base-url http://127.0.0.1:8000/v1 --env game:Wordle-v0 --concurrency 64
  gem eval --model Qwen/Qwen3-0.6B --env math:GSM8K --episodes 50 --samples 8 --out runs/gsm8k   # pass@1..8
  gem eval --resume runs/gsm8k --model Qwen/Qwen3-0.6B   # after a crash or a kill: play only the missing episodes
  gem eval --rescore runs/gsm8k         # after a grader fix: re-grade the stored transcripts
  gem eval --compare runs/a/report.json runs/b/report.json
"""

S = argparse.SUPPRESS  # for the run's settings: a flag not given is absent, so --resume can take the run's value

#: Defaults of the flags a resumed run takes from the run it continues when they are not given.
RUN_FLAG_DEFAULTS: dict[str, object] = {
    "model": None,
    "episodes": 10,
    "seed": 0,
    "samples": 1,
    "concurrency": 8,
    "max_turns": None,
    "max_new_tokens": 256,
    "temperature": 1.0,
    "top_p": 1.0,
    "top_k": 0,
    "system_prompt": None,
    "base_url": None,
    "timeout": 60.0,
    "retries": 3,
    "max_in_flight": None,
}
#: Where a run's backend settings keep the value of a flag.
_BACKEND_SETTING = {"base_url": "base_url", "timeout": "timeout", "retries": "max_retries", "max_in_flight": "max_in_flight"}


def configure_eval_parser(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """Add the ``gem eval`` arguments to ``parser``."""
    what = parser.add_argument_group("what to evaluate")
    what.add_argument("--model", default=S, help="A transformers model (local path or hub id), or with --base-url the served model name.")
    what.add_argument("--env", dest="env_ids", action="append", metavar="ID", default=[], help="Env id; repeat for several envs.")
    what.add_argument("--episodes", type=int, default=S, help="Episodes (seeds) per env (default: 10).")
    what.add_argument("--seed", type=int, default=S, help="Episode i of every env uses seed SEED+i (default: 0).")
    what.add_argument("--samples", type=int, default=S, metavar="K",
                      help="Episodes per seed; the report adds pass@k (unbiased estimator) and mean@k (default: 1).")
    what.add_argument("--concurrency", type=int, default=S, help="Episodes played at once (default: 8).")
    what.add_argument("--out", metavar="DIR", help="Directory for report.json and the plots (default: gem-eval/<model>-<time>).")

    other = parser.add_argument_group("instead of a new run")
    other.add_argument("--resume", metavar="DIR", help="Continue the interrupted run in DIR (its --out): play only the episodes "
                       "missing from DIR/episodes.jsonl. Settings not given are the run's; given ones must match it. "
                       "--model (in-process), --base-url and remote: --env ids are never taken from the run's files: give them.")
    other.add_argument("--rescore", metavar="DIR", help="Re-grade the transcripts of the run in DIR against the current envs (no "
                       "model calls; a judged env asks the --judge-url judge); writes the updated report to --out (default: "
                       "DIR/rescored) and lists the changed episodes.")
    other.add_argument("--compare", nargs=2, metavar=("A", "B"), help="Print two reports side by side.")

    episode = parser.add_argument_group("episodes and sampling")
    episode.add_argument("--max-turns", type=int, default=S, help="Turns per episode, replacing the env's own limit (default: the env's limit).")
    episode.add_argument("--max-new-tokens", type=int, default=S, help="Tokens per turn (default: 256).")
    episode.add_argument("--temperature", type=float, default=S, help="(default: 1.0)")
    episode.add_argument("--top-p", type=float, default=S, help="(default: 1.0)")
    episode.add_argument("--top-k", type=int, default=S, help="0 turns top-k off (default: 0).")
    episode.add_argument("--system-prompt", default=S)

    backend = parser.add_argument_group("model backend")
    backend.add_argument(
        "--base-url",
        default=S,
        help="Root of an OpenAI-compatible API (e.g. http://127.0.0.1:8000/v1 for vLLM); without it --model runs in-process.",
    )
    backend.add_argument("--api-key", default=None, help="Bearer token for --base-url (default: $OPENAI_API_KEY).")
    backend.add_argument("--timeout", type=float, default=S, help="Seconds for one whole HTTP request, first byte to last (default: 60).")
    backend.add_argument("--retries", type=int, default=S, help="Retries per HTTP request on timeouts, 429 and 5xx (default: 3).")
    backend.add_argument("--max-in-flight", type=int, default=S, help="HTTP requests open at once (default: --concurrency).")
    backend.add_argument("--device", default=None, help="torch device for an in-process model (default: the policy's choice).")

    from gem_core.judge.options import add_judge_arguments

    add_judge_arguments(parser.add_argument_group("judge (judged envs, judge:*; never taken from a run folder)"))

    output = parser.add_argument_group("output")
    output.add_argument("--overwrite", action="store_true",
                        help="Replace the run already in --out (without it, an --out holding episodes is refused).")
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


#: Default output folders tried for one run (``gem-eval/<model>-<time>``, then ``-2``, ``-3``, ...) before it
#: asks for ``--out``: runs started in the same second (a sweep launched at once) each get their own.
MAX_DEFAULT_OUT_TRIES = 1000


def _new_default_out_dir(model: str) -> Path:
    """Create and return a new default output folder: made exclusively (no other run can have it), with a suffix
    when the one of this second is taken.

    Raises:
        InvalidArgument: if all :data:`MAX_DEFAULT_OUT_TRIES` folders of this second exist.
        OSError: if ``gem-eval`` cannot be created or written (a read-only folder).
    """
    from gem_core.errors import InvalidArgument

    base = _default_out_dir(model)
    base.parent.mkdir(parents=True, exist_ok=True)
    for number in range(1, MAX_DEFAULT_OUT_TRIES + 1):
        candidate = base if number == 1 else base.with_name(f"{base.name}-{number}")
        try:
            candidate.mkdir()
        except FileExistsError:
            continue
        return candidate
    raise InvalidArgument(f"{base} and the next {MAX_DEFAULT_OUT_TRIES - 1} numbered folders all exist; give the run a folder with --out DIR.")


#: How to get what ``gem eval`` imports (the distribution on the package index named ``gem`` is another project).
INSTALL_HINT = 'pip install -c constraints-cpu.txt -e ".[eval]"'


def missing_modules(args: argparse.Namespace) -> list[str]:
    """The modules this run needs that are not installed (checked before anything loads)."""
    needed = ["rich"]
    if args.rescore:
        needed += [] if args.no_plots else ["matplotlib"]
    elif not args.compare:
        needed += ["tqdm", "httpx", "openai"] if args.base_url else ["tqdm", "transformers"]
        if not args.no_plots:
            needed.append("matplotlib")
    return [name for name in needed if importlib.util.find_spec(name) is None]


#: Flags a resumed run never takes from its run.json: they decide where requests (and the API key) go
#: and what code is loaded, and a run folder is a file anyone may have edited (issue 27.2).
FLAGS_NEVER_FROM_FILE = ("base_url",)
#: The backend whose --model is a path or hub id loaded in-process (loading a model can run code).
IN_PROCESS_BACKEND = "transformers"


def file_choice_refused(args: argparse.Namespace, header: RunHeader) -> str | None:
    """Why the resumed run cannot go on with what the command line gave (None when it can): each setting
    that sends traffic somewhere or loads code must be on the command line, not only in ``run.json``."""
    settings = header.config.get("backend_settings") or {}
    stored_url = settings.get("base_url")
    if header.backend != IN_PROCESS_BACKEND and not hasattr(args, "base_url"):
        named = f" ({header.path} names {stored_url!r:.200})" if stored_url else ""
        return (f"--resume: that run used an HTTP endpoint{named}, but the URL your API key goes to is never taken "
                "from a run file: give --base-url yourself (the same one, if you trust it).")
    if header.backend == IN_PROCESS_BACKEND and not hasattr(args, "model"):
        return (f"--resume: that run loaded the model {header.model!r:.200} in-process ({header.path}); loading a model "
                "can run code, so its path is never taken from a run file: give --model yourself.")
    if not args.env_ids:
        trusted = next((env_id for env_id in header.env_ids if needs_trust(env_id)), None)
        if trusted is not None:
            return (f"--resume: {header.path} lists the env {trusted!r:.200}; a remote: or verifiers: env id sends the run's "
                    "traffic to a server or imports a module, so it is never taken from a run file: give each --env of the "
                    "run yourself.")
    return None


def fill_run_flags(args: argparse.Namespace, header: RunHeader | None = None) -> None:
    """Give each run flag that was not on the command line its value: the resumed run's (``header``), else
    the default. :data:`FLAGS_NEVER_FROM_FILE` always take the default (see :func:`file_choice_refused`)."""
    stored: dict[str, object] = {}
    if header is not None:
        settings = header.config.get("backend_settings") or {}
        stored = {"model": header.model, **{k: header.config[k] for k in RUN_FLAG_DEFAULTS if k in header.config}}
        stored.update({flag: settings[key] for flag, key in _BACKEND_SETTING.items() if key in settings})
        for flag in FLAGS_NEVER_FROM_FILE:
            stored.pop(flag, None)
        if not args.env_ids:
            args.env_ids = list(header.env_ids)
    for dest, default in RUN_FLAG_DEFAULTS.items():
        if not hasattr(args, dest):
            setattr(args, dest, stored.get(dest, default))


#: Flags that only shape HTTP requests, and the backend setting each is stored as.
HTTP_FLAGS = {"timeout": "timeout", "retries": "max_retries", "max_in_flight": "max_in_flight"}


def _flag_problem(args: argparse.Namespace, given: set[str]) -> str | None:
    """The first flag whose value cannot be used, as one line naming it (None when all can)."""
    if "base_url" in given and not str(args.base_url).strip():
        return "--base-url is empty: give the API root (e.g. http://127.0.0.1:8000/v1), or drop --base-url to run --model in-process."
    url_problem = base_url_problem(args.base_url) if args.base_url else None
    if url_problem:
        return "--base-url " + url_problem.removeprefix("base_url ")
    if not args.base_url:
        unused = [flag for flag in HTTP_FLAGS if flag in given]
        if unused:
            return f"{_flag(unused[0])} applies to HTTP requests only: give --base-url too, or drop {_flag(unused[0])}."
    for name in SETTING_BOUNDS:
        problem = setting_problem(name, getattr(args, name, None))
        if problem:
            return f"{_flag(name)}: {problem}."
    for flag, setting in HTTP_FLAGS.items():
        problem = setting_problem(setting, getattr(args, flag, None), BACKEND_BOUNDS)
        if problem:
            return f"{_flag(flag)}: {problem}."
    problem = seed_range_problem(args.seed, args.episodes, seed_name="--seed", episodes_name="--episodes")
    if problem:
        return f"{problem}."
    planned = args.episodes * args.samples * max(len(set(args.env_ids)), 1)
    if planned > MAX_PLANNED_EPISODES:
        return (f"--episodes {args.episodes} x --samples {args.samples} x {len(set(args.env_ids))} env(s) is more than the "
                f"{MAX_PLANNED_EPISODES} episodes one run may ask for; split it into several runs.")
    return None


def _out_problem(out: Path) -> str | None:
    """Why ``--out`` cannot hold the run's files (None when it can): it, or a folder above it, is a file."""
    problem = folder_problem(out)
    return f"--out {problem}; give the path of a folder (a new one is created) for the run's files." if problem else None


#: What ``save_pretrained`` writes into a model folder (said when --model names a folder without it).
MODEL_FOLDER = ("config.json, the weights (*.safetensors) and the tokenizer files (tokenizer.json, "
                "tokenizer_config.json)")


def _model_folder_problem(model: str) -> str | None:
    """Why the in-process ``--model`` folder holds no model (None when it does, or ``model`` is no folder:
    a hub id): checked before transformers, whose error is five lines about a tokenizer."""
    folder = Path(model)
    if not folder.is_dir() or (folder / "config.json").is_file():
        return None
    try:
        inside = next((sub for sub in sorted(folder.iterdir()) if (sub / "config.json").is_file()), None)
    except OSError:
        inside = None
    one = f"; {inside} is one" if inside is not None else ""
    return (f"--model {model} is not a model folder (no config.json): a model folder, as save_pretrained writes it, "
            f"holds {MODEL_FOLDER}{one}. Give a model folder or a hub id.")


def resume_command(args: argparse.Namespace, out_dir: Path) -> str:
    """The ``gem eval --resume`` command that continues this run: with what :func:`file_choice_refused`
    never takes from the run's files (the in-process --model, --base-url, remote: --env ids, the judge),
    and without the password of any URL among them."""
    argv = ["gem", "eval", "--resume", str(out_dir)]
    if args.base_url:
        argv += ["--base-url", str(args.base_url)]
    else:
        argv += ["--model", str(args.model)]
    if any(needs_trust(env_id) for env_id in args.env_ids):
        for env_id in args.env_ids:
            argv += ["--env", env_id]
    for flag in ("judge_url", "judge_model", "judge_rubric"):
        if getattr(args, flag, None):
            argv += [_flag(flag), str(getattr(args, flag))]
    # The hint is printed (and logged): a password in a URL is masked, and the note says to put it back.
    command = shlex.join(redact_user_info(arg) for arg in argv)
    return command if command == shlex.join(argv) else f"{command} (with the URL's password where *** stands)"


def _flag(setting: str) -> str:
    """The command-line flag of an :class:`EvalConfig` setting."""
    return {"env_ids": "--env", "backend": "--base-url"}.get(setting, "--" + setting.replace("_", "-"))


def _fail(message: str) -> None:
    print(f"gem eval: {message}", file=sys.stderr)


def _start(args: argparse.Namespace) -> int | None:
    """Check the flags that pick the command, read a resumed run's settings; an exit code on bad usage."""
    chosen = [flag for flag in ("resume", "rescore", "compare") if getattr(args, flag)]
    if len(chosen) > 1:
        _fail(f"--{chosen[0]} and --{chosen[1]} cannot be combined; run them one at a time.")
        return 2
    header = None
    given = {dest for dest in RUN_FLAG_DEFAULTS if hasattr(args, dest)}
    if args.overwrite and (args.resume or args.compare):
        _fail("--overwrite replaces the run in --out with a new run (or a --rescore); it cannot be combined with --resume or --compare.")
        return 2
    if args.resume:
        if args.out and Path(args.out).resolve() != Path(args.resume).resolve():
            _fail(f"--resume {args.resume} writes into that folder; drop --out {args.out}.")
            return 2
        from gem_core.eval.resume import read_run_header

        try:
            header = read_run_header(args.resume)
        except (OSError, ValueError) as exc:
            _fail(f"--resume: {exc}")
            return 2
        refused = file_choice_refused(args, header)
        if refused:
            _fail(refused)
            return 2
        args.out = args.resume
    fill_run_flags(args, header)
    if args.out and not args.compare and not args.resume:
        problem = _out_problem(Path(args.out))
        if problem:
            _fail(problem)
            return 2
    if args.compare or args.rescore:
        return None
    problem = _flag_problem(args, given)
    if problem:
        _fail(problem)
        return 2
    if args.out and not args.resume and not args.overwrite:
        existing = existing_run(args.out)
        if existing:
            _fail(f"--out {args.out} already holds a run ({existing}); continue it with --resume {args.out}, "
                  "replace it with --overwrite, or choose another --out.")
            return 2
    return None


def run_eval_command(args: argparse.Namespace) -> int:
    """Run ``gem eval`` for parsed ``args``; returns the exit code: 0 ok, 1 failed episodes or a write error
    (or an error nobody foresaw, said in one line), 2 bad usage, 128+N stopped by signal N (130 Ctrl-C,
    143 SIGTERM, 129 SIGHUP)."""
    try:
        return _run_eval_command(args)
    except KeyboardInterrupt:  # Ctrl-C before the run's own handler, e.g. while rich, torch or transformers import
        return _interrupted_before_start(args, Path(args.out) if args.out else None)
    except Exception as exc:  # noqa: BLE001 - the CLI's last word is one line naming the error, never a traceback
        lines = str(exc).splitlines()
        _fail(f"{type(exc).__name__}: {lines[0] if lines else 'no message'}")
        return 1


def _run_eval_command(args: argparse.Namespace) -> int:
    code = _start(args)
    if code is not None:
        return code
    missing = missing_modules(args)
    if missing:
        _fail(f"needs {', '.join(missing)}, from the eval extra: {INSTALL_HINT} (in the GEM checkout).")
        return 2
    if not args.compare and not args.rescore:
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
        problem = None if args.base_url else _model_folder_problem(args.model)
        if problem:
            _fail(problem)
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
    if args.rescore:
        return _rescore(args, console)

    from gem_core.eval.episode_log import ReportWriteError
    from gem_core.eval.resume import ResumeMismatch
    from gem_core.eval.runner import Interrupted, evaluate
    from gem_core.eval.tables import summary_table

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
    from gem_core.judge.options import judge_env_kwargs, judge_from_args, takes_judge

    try:
        judge, rubric = judge_from_args(args)
    except (ValueError, OSError) as exc:
        _fail(str(exc))
        return 2
    problem = _judge_problem(judge, [env_id for env_id in args.env_ids if takes_judge(env_id)])
    if problem:
        if judge is not None:
            judge.close()
        _fail(problem)
        return 2
    try:
        out_dir, made = (Path(args.out), False) if args.out else (_new_default_out_dir(args.model), True)
    except (ValueError, OSError) as exc:
        if judge is not None:
            judge.close()
        if not isinstance(exc, OSError):
            _fail(str(exc))
            return 2
        _fail(f"cannot create the output folder under gem-eval/: {exc.strerror or exc}; give the run a folder with --out DIR.")
        return 1
    try:
        report = evaluate(
            args.env_ids,
            env_overrides=lambda env_id: judge_env_kwargs(env_id, judge, rubric),
            model=args.model,
            base_url=args.base_url,
            backend_options=backend_options,
            stop_signals=STOP_SIGNALS,
            episodes=args.episodes,
            seed=args.seed,
            samples=args.samples,
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
            resume=bool(args.resume),
            overwrite=args.overwrite,
        )
    except KeyboardInterrupt as exc:
        # An Interrupted comes from the running episodes: run.json and the partial report are written. A plain
        # KeyboardInterrupt is Ctrl-C before that (the model loading): this run wrote nothing.
        signum = exc.signum if isinstance(exc, Interrupted) else signal.SIGINT
        name, resume = signal.Signals(signum).name, resume_command(args, out_dir)
        if isinstance(exc, Interrupted):
            print(f"Interrupted ({name}): the partial report is in {out_dir}/report.json; continue with: {resume}",
                  file=sys.stderr)
        elif args.resume:
            print(f"Interrupted ({name}) before the run went on: {out_dir} is as it was; continue with: {resume}",
                  file=sys.stderr)
        else:
            return _interrupted_before_start(args, out_dir)
        return 128 + signum
    except ReportWriteError as exc:
        _fail(str(exc))
        return 1
    except ResumeMismatch as exc:
        flag = _flag(exc.setting)
        if exc.setting.startswith("judge_"):
            shown = [_judge_shown(exc.setting, value) for value in (exc.requested, exc.stored)]
            _fail(f"--resume {out_dir}: {flag} gives {shown[0]}, but the run there was judged with {shown[1]}; give that "
                  f"run's {flag} again (a judge is never taken from a run file), or start a new run with another --out.")
        elif exc.setting == "backend":
            _fail(f"--resume {out_dir}: that run used the {exc.stored} backend, this one {exc.requested}; "
                  f"{'drop --base-url' if exc.stored == 'transformers' else 'give its --base-url'} to resume it.")
        else:
            _fail(f"--resume {out_dir}: {flag} is {exc.requested!r} but the run there used {exc.stored!r}; drop {flag} "
                  "to take the run's value, or start a new run with another --out.")
        return 2
    except (ValueError, OSError) as exc:
        _fail(str(exc))
        return 2
    finally:
        if judge is not None:
            judge.close()
        if made:  # a run refused before it wrote anything leaves no empty folder of its own behind
            _remove_if_empty(out_dir)
    console.print(summary_table(report))
    console.print(f"Report and plots written to {out_dir}/", markup=False, highlight=False)
    failed = report.failed_episodes()
    if failed:
        _fail(f"{len(failed)} of {report.episodes_finished} episodes failed; the first ({failed[0].env_id}, seed "
              f"{failed[0].seed}): {failed[0].error}")
        return 1
    return 0


def _remove_if_empty(folder: Path) -> None:
    try:
        folder.rmdir()
    except OSError:  # it holds the run's files (or is gone): kept as it is
        pass


def _judge_shown(setting: str, value: Any) -> str:
    """A judge setting as a resume refusal names it: the model's name, or the rubric by its digest."""
    if setting != "judge_rubric":
        return "no judge" if value is None else repr(value)
    return "the env's own rubric" if value is None else f"the rubric of digest {str(value)[:12]}"


def _interrupted_before_start(args: argparse.Namespace, out_dir: Path | None) -> int:
    """Ctrl-C before any episode ran: say that nothing was written (a resumed run's folder is as it was)."""
    if args.resume:
        print(f"Interrupted (SIGINT) before the run went on: {args.resume} is as it was; run the same command "
              "again to continue it.", file=sys.stderr)
    else:
        where = f" to {out_dir}" if out_dir is not None else ""
        print(f"Interrupted (SIGINT) before the run started: nothing was written{where}, so there is nothing to "
              "resume; run the same command again to start it.", file=sys.stderr)
    return 128 + signal.SIGINT


def _out_taken(args: argparse.Namespace, out_dir: Path, source: Path) -> bool:
    """Whether ``--rescore`` must refuse ``out_dir`` (said on stderr): it holds a run, and --overwrite was not given.
    An earlier re-scored report of the same run (``DIR/rescored`` after the last grader fix) is this command's own
    output, and is replaced."""
    existing = None if args.overwrite else existing_run(out_dir)
    if existing and not _rescore_of(out_dir, source):
        _fail(f"--rescore: --out {out_dir} already holds a run ({existing}); replace it with --overwrite, or choose "
              "another --out.")
        return True
    return False


def _rescore_of(out_dir: Path, source: Path) -> bool:
    """Whether ``out_dir`` holds only a re-scored report of the run at ``source`` (no episode log of its own)."""
    from gem_core.eval.episode_log import EPISODES_FILENAME
    from gem_core.eval.report import REPORT_FILENAME

    try:
        if (out_dir / EPISODES_FILENAME).exists():
            return False
        rescore = json.loads((out_dir / REPORT_FILENAME).read_text(encoding="utf-8")).get("rescore")
        return isinstance(rescore, dict) and Path(str(rescore.get("from"))).resolve() == source.resolve()
    except (OSError, ValueError, AttributeError, RecursionError):  # not a report this command wrote
        return False


def _rescore(args: argparse.Namespace, console: Any) -> int:
    """``--rescore DIR``: re-grade the run's transcripts, write the new report, list what changed."""
    from gem_core.errors import InvalidArgument
    from gem_core.eval.episode_log import LOCK_FILENAME
    from gem_core.eval.report import REPORT_FILENAME
    from gem_core.eval.rescore import load_run, rescore_report
    from gem_core.eval.runner import remove_outputs, write_outputs
    from gem_core.eval.tables import summary_table
    from gem_core.judge.options import judge_env_kwargs, judge_from_args, takes_judge
    from gem_core.transport.folder_lock import lock_folder, release_folder

    source = Path(args.rescore)
    folder = source if source.is_dir() else source.parent
    out_dir = Path(args.out) if args.out else folder / "rescored"
    if out_dir.resolve() == folder.resolve():
        _fail(f"--rescore: --out {out_dir} is the run's own folder, whose {REPORT_FILENAME} is the original that the "
              f"re-scored report is compared with; give another --out (default: {folder / 'rescored'}).")
        return 2
    if _out_taken(args, out_dir, source):
        return 2
    judge = None
    try:
        report = load_run(source)
        trusted = next((e for e in report.env_ids if needs_trust(e) and e not in args.env_ids), None)
        if trusted is not None:
            _fail(f"--rescore: the run lists the env {trusted!r:.200}; a remote: or verifiers: env id sends traffic to a "
                  "server or imports a module, so it is never taken from a run file: give it with --env yourself if you trust it.")
            return 2
        judge, rubric = judge_from_args(args)
        problem = _judge_problem(judge, [env_id for env_id in report.env_ids if takes_judge(env_id)])
        if problem:
            _fail(problem)
            return 2
        rescored = rescore_report(report, source=source, env_overrides=lambda env_id: judge_env_kwargs(env_id, judge, rubric))
    except (OSError, ValueError, KeyError) as exc:  # no run there, a bad file, an env id no longer registered
        _fail(f"--rescore: {exc}")
        return 2
    finally:
        if judge is not None:
            judge.close()
    try:  # held while written, and checked again once held: a run may have started there meanwhile
        held = lock_folder(out_dir, LOCK_FILENAME, what="output folder", error=InvalidArgument,
                           why="a run or a rescore writing into it would mix their files")
    except (ValueError, OSError) as exc:
        _fail(f"--rescore: {exc}")
        return 2
    try:
        if _out_taken(args, out_dir, source):
            return 2
        remove_outputs(out_dir, with_run=True)
        write_outputs(rescored, out_dir, plots=not args.no_plots)
    except OSError as exc:
        _fail(f"cannot write the re-scored report to {out_dir}: {exc.strerror or exc}")
        return 1
    finally:
        release_folder(out_dir, LOCK_FILENAME, held)
    console.print(summary_table(rescored))
    assert rescored.rescore is not None  # rescore_report fills it
    changed = rescored.rescore["changed"]
    for episode in changed:
        sample = f" sample {episode['sample']}" if rescored.samples > 1 else ""
        (old_return, new_return), (old_success, new_success) = episode["return"], episode["success"]
        console.print(f"{episode['env_id']} seed {episode['seed']}{sample}: return {old_return:+g} -> {new_return:+g}, "
                      f"success {old_success} -> {new_success}", markup=False, highlight=False)
        for turn in episode["turns"]:
            note = f" ({turn['note']})" if turn["note"] != "reward" else ""
            console.print(f"  turn {turn['turn']}: reward {_signed(turn['stored_reward'])} -> {_signed(turn['replayed_reward'])}{note}",
                          markup=False, highlight=False)
    console.print(f"{rescored.rescore['episodes_rescored']} episodes re-scored, {len(changed)} changed; "
                  f"report written to {out_dir}/", markup=False, highlight=False)
    # As a live run: an episode the re-grading failed (a judge with no verdict) is no score, and the exit code says so.
    failed_before = {(r.env_id, r.seed, r.sample) for records in report.episodes.values() for r in records if r.failed}
    failed = [r for r in rescored.failed_episodes() if (r.env_id, r.seed, r.sample) not in failed_before]
    if failed:
        _fail(f"{len(failed)} of {report.episodes_finished - len(failed_before)} episodes failed when re-scored; the first "
              f"({failed[0].env_id}, seed {failed[0].seed}): {failed[0].error}")
        return 1
    return 0


def _signed(reward: Any) -> str:
    """A reward as the change list prints it: a number with its sign, or the text a non-finite one is stored as."""
    return f"{reward:+g}" if isinstance(reward, (int, float)) else str(reward)


def _judge_problem(judge: Any, judged: list[str]) -> str | None:
    """Why the judge flags do not fit the judged envs among the run's (None when they do), said as a live run says it."""
    if judge is None and judged:
        return f"{judged[0]} is a judged env: give --judge-url URL and --judge-model NAME (the judge that scores its answers)."
    if judge is not None and not judged:
        return "--judge-url is given but no --env is a judged env (judge:*); drop the --judge-* flags."
    return None


def main(argv: list[str] | None = None) -> int:
    """``python -m gem_core.eval``: the ``eval`` subcommand on its own."""
    parser = argparse.ArgumentParser(
        prog="python -m gem_core.eval",
        description="Evaluate a model on GEM envs (same as `gem eval`).",
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    configure_eval_parser(parser)
    return run_until_pipe_closes(lambda: run_eval_command(parser.parse_args(argv)))


if __name__ == "__main__":
    sys.exit(main())
