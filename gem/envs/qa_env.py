"""``gem.envs.qa_env:QaEnv``: GEM's question-answering entry point, taking GEM's argument names for the
core's :class:`gem_core.envs.qa.env.QAEnv`. The core reads the answer from ``\\boxed{}`` or
``<answer>...</answer>`` alike, so GEM's ``extract_boxed`` switch has nothing left to choose."""

from __future__ import annotations

from typing import Any

from gem_core.envs.qa.env import QAEnv

__all__ = ["QaEnv"]


class QaEnv(QAEnv):
    """Questions from ``dataset_name`` (a hub id; or ``data_files=`` for a local copy), scored by exact
    match. Other keyword arguments are the core env's (``reward``, ``prompt_suffix``, ...).

    Args:
        dataset_name: The hub dataset (empty: none, with ``data_files=``).
        split: The split to read.
        question_key: The column holding the question.
        answer_key: The column holding the reference answer.
        extract_boxed: Accepted for GEM's signature; ignored (both answer forms are read).
    """

    def __init__(
        self,
        dataset_name: str = "",
        split: str = "train",
        question_key: str = "question",
        answer_key: str = "answer",
        extract_boxed: bool = False,
        **kwargs: Any,
    ):
        del extract_boxed  # both answer forms are read; see the module docstring
        super().__init__(dataset_name or None, split=split, question_field=question_key, answer_field=answer_key, **kwargs)
