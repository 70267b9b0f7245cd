"""Evaluate a model on GEM envs: ``gem eval`` and :func:`evaluate` for training scripts.

A run plays ``episodes`` seeded episodes per env with one of two backends (a token-level Policy such as
a local transformers model, or an OpenAI-compatible HTTP endpoint), and produces an
:class:`EvalReport` (JSON: per-env summary and every episode's transcript) plus PNG plots. Heavy
modules (transformers, httpx, matplotlib) load only when used.
"""

from __future__ import annotations

from gem_core.eval.config import EvalConfig
from gem_core.eval.report import EnvSummary, EpisodeRecord, EvalReport
from gem_core.eval.runner import evaluate, evaluate_async, make_backend

__all__ = ["EvalConfig", "EvalReport", "EnvSummary", "EpisodeRecord", "evaluate", "evaluate_async", "make_backend"]
