"""``gem.envs.math_env:MathEnv``: the entry point GEM's docs register new math datasets with, taking
GEM's argument names (``dataset_name``, ``question_key``, ``answer_key``) for the core's
:class:`gem_core.envs.math.env.MathEnv`."""

from __future__ import annotations

from typing import Any

from gem_core.envs.math.env import MathEnv as CoreMathEnv

__all__ = ["MathEnv"]


class MathEnv(CoreMathEnv):
    """Math questions from ``dataset_name`` (a hub id; or ``data_files=`` for a local copy), graded by
    math-verify. Other keyword arguments are the core env's (``answer_format``, ``grade_timeout``, ...).

    Args:
        dataset_name: The hub dataset (empty: none, with ``data_files=``).
        split: The split to read.
        question_key: The column holding the question.
        answer_key: The column holding the reference answer.
    """

    def __init__(
        self, dataset_name: str = "", split: str = "train", question_key: str = "problem", answer_key: str = "answer", **kwargs: Any
    ):
        super().__init__(dataset_name or None, split=split, question_field=question_key, answer_field=answer_key, **kwargs)
