"""The judge's command-line flags, shared by ``gem eval`` and ``gem replay``.

The judge's URL, model and API key come only from the command line (or code): a run folder or a
trajectory file never names them, so a file someone else wrote cannot send answers, or a key, anywhere.
"""

from __future__ import annotations

import argparse
import inspect
from typing import Any

from gem_core.errors import InvalidArgument
from gem_core.judge.client import Judge
from gem_core.judge.rubric import Rubric

__all__ = ["add_judge_arguments", "judge_from_args", "judge_env_kwargs", "takes_judge"]


def add_judge_arguments(parser: Any) -> None:
    """Add ``--judge-url``, ``--judge-model`` and the judge's settings to ``parser`` (a parser or a group)."""
    parser.add_argument("--judge-url", default=None, metavar="URL",
                        help="OpenAI-compatible API root of the judge model for judged envs (judge:*), e.g. http://127.0.0.1:8001/v1.")
    parser.add_argument("--judge-model", default=None, metavar="NAME", help="The judge model's served name (with --judge-url).")
    parser.add_argument("--judge-api-key", default=None, help="Bearer token for --judge-url (default: none).")
    parser.add_argument("--judge-cache", default=None, metavar="FILE",
                        help="SQLite file of verdicts: the same answer under the same judge, rubric and task is never judged twice.")
    parser.add_argument("--judge-rubric", default=None, metavar="FILE", help="Rubric JSON for judged envs (default: the env's own).")
    parser.add_argument("--judge-timeout", type=float, default=30.0, help="Seconds for one judge request (default: 30).")
    parser.add_argument("--judge-retries", type=int, default=2, help="Retries per judgement on timeouts, 429 and 5xx (default: 2).")
    parser.add_argument("--judge-max-in-flight", type=int, default=8, help="Judge requests open at once (default: 8).")


def judge_from_args(args: argparse.Namespace) -> tuple[Judge | None, Rubric | None]:
    """The judge and rubric the flags ask for (None, None without ``--judge-url``).

    Raises:
        ValueError: one of ``--judge-url``/``--judge-model`` without the other, a bad URL or rubric file.
    """
    url, model = getattr(args, "judge_url", None), getattr(args, "judge_model", None)
    rubric_file = getattr(args, "judge_rubric", None)
    if not url and not model:
        if rubric_file or getattr(args, "judge_cache", None):
            raise InvalidArgument("--judge-rubric and --judge-cache need a judge: give --judge-url URL and --judge-model NAME.")
        return None, None
    if not (url and model):
        raise InvalidArgument("give both --judge-url URL and --judge-model NAME (the judge's API root and served model name).")
    rubric = Rubric.load(rubric_file) if rubric_file else None
    judge = Judge(
        url, model, api_key=args.judge_api_key, timeout=args.judge_timeout, max_retries=args.judge_retries,
        max_in_flight=args.judge_max_in_flight, cache=args.judge_cache,
    )
    return judge, rubric


def takes_judge(env_id: str) -> bool:
    """Whether the env registered as ``env_id`` is built with a ``judge=`` argument (a judged env)."""
    from gem_core.registry import spec

    try:
        factory = spec(env_id).load()
        return "judge" in inspect.signature(factory).parameters
    except (TypeError, ValueError, ImportError, KeyError):
        return False


def judge_env_kwargs(env_id: str, judge: Judge | None, rubric: Rubric | None = None) -> dict[str, Any]:
    """The ``make`` overrides that hand ``judge`` (and ``rubric``) to ``env_id`` when it is a judged env."""
    if judge is None or not takes_judge(env_id):
        return {}
    return {"judge": judge, **({"rubric": rubric} if rubric is not None else {})}
