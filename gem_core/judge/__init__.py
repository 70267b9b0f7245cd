"""Rewards a model judges: a rubric, a fenced prompt, a strict verdict, a cache (issue 34).

>>> judge = Judge("http://127.0.0.1:8000/v1", "qwen3-8b", cache="verdicts.sqlite")
>>> verdict = judge.judge("Explain DNS in two sentences.", answer, rubric=Rubric.coerce("rubric.json"))
>>> verdict.reward, verdict.scores, verdict.error

:class:`~gem_core.wrappers.judged.Judged` turns any env's answers into judged rewards.
"""

from gem_core.judge.cache import VerdictCache, verdict_key
from gem_core.judge.client import Judge, Verdict
from gem_core.judge.prompt import PROMPT_VERSION, PromptBuilder, build_messages
from gem_core.judge.rubric import DEFAULT_RUBRIC, Criterion, Rubric
from gem_core.judge.verdict import VerdictError, parse_verdict

__all__ = [
    "Judge", "Verdict", "Rubric", "Criterion", "DEFAULT_RUBRIC", "VerdictCache", "verdict_key", "PROMPT_VERSION",
    "PromptBuilder", "build_messages", "VerdictError", "parse_verdict",
]
