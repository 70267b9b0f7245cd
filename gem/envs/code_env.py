"""``gem.envs.code_env:CodeEnv``: GEM's programming-problem entry point, taking GEM's argument names for
the core's :class:`gem_core.envs.code.env.CodeEnv` (programs run in the core's sandbox)."""

from __future__ import annotations

from typing import Any

from gem_core.envs.code.env import CodeEnv as CoreCodeEnv

__all__ = ["CodeEnv"]


class CodeEnv(CoreCodeEnv):
    """Problems from ``dataset_name`` (a hub id; or ``data_files=`` for a local copy) with their tests in
    ``test_key``. Other keyword arguments are the core env's (``timeout``, ``sandbox_mode``, ...)."""

    def __init__(
        self, dataset_name: str = "", split: str = "train", question_key: str = "problem", test_key: str = "tests", **kwargs: Any
    ):
        super().__init__(dataset_name or None, split=split, question_field=question_key, tests_field=test_key, **kwargs)
