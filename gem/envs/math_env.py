"""``gem.envs.math_env:MathEnv``: GEM 0.1.0's math env, the entry point GEM's docs register new math datasets with
and behind GEM's ``math:*`` and ``eval:*`` math ids under ``import gem``.

The rows are read by the core (:class:`gem_core.envs.math.env.MathEnv`: the hub, ``data_files=`` for a local
copy, or GEM's ``dataset=`` rows in memory) and graded by the core's grader; what the model sees and earns is
GEM's, so a GEM user's numbers stay comparable:

- the observation is the question as the dataset writes it (no answer-format hint appended);
- the last ``\\boxed{}`` is graded against the answer (or each answer of a list): 1.0 right, 0.0 otherwise,
  nothing boxed included (no format penalty); the observation is then GEM's terminal state and the episode
  ends ``(True, True)``;
- the rows are ``dataset.shuffle(seed=seed)`` (``eval=True``: unshuffled); ``reset()`` walks them in order and
  reshuffles with ``seed + epoch`` after the last; ``reset(seed=s)`` takes row ``random.seed(s);
  random.randint(0, n - 1)`` (drawn from a private generator: the process-wide ``random`` is left alone);
  ``reset(idx=i)`` row ``i``.
"""

from __future__ import annotations

import random
from typing import Any

from gem.envs.code_env import _local_copy
from gem_core.env import Env as CoreEnv
from gem_core.env import StepResult
from gem_core.envs.dataset import check_index
from gem_core.envs.math.answer import extract_boxed
from gem_core.envs.math.env import MathEnv as CoreMathEnv
from gem_core.envs.math.grading import grade
from gem_core.errors import InvalidArgumentType, ResetNeeded

__all__ = ["MathEnv", "TERMINAL_STATE", "gem_rows"]

TERMINAL_STATE = "<｜TERMINAL_STATE｜>"
"""GEM's observation after the last step of a single-step env."""


def gem_rows(dataset: Any, split: str | None, data_files: Any) -> tuple[Any, str]:
    """``(data_files, split)`` for the core's loader: GEM's in-memory ``dataset=`` written to a private file
    (see :mod:`gem.envs.code_env`), and GEM's ``split=None`` (the dataset's only split) read as ``"train"``."""
    if dataset is not None:
        return _local_copy(dataset, split), "train"
    return data_files, split or "train"


def gold_list(answer: Any) -> list[str]:
    """GEM's reference answers: a str or number is one answer, a list several.

    Raises:
        InvalidArgumentType: the answer column holds something else (GEM raises a ValueError there too).
    """
    if isinstance(answer, (str, int, float)):
        return [str(answer)]
    if isinstance(answer, list):
        return [str(item) for item in answer]
    raise InvalidArgumentType(f"Unexpected answer type {type(answer).__name__}: the answer column must hold a str, a number or a list.")


def next_gem_row(env: Any, seed: int | None, options: dict[str, Any] | None, idx: int | None) -> Any:
    """The episode's row of a GEM dataset env (``env.dataset``, ``env.idx``, ``env.epoch``, ``env.seed``), picked as
    GEM 0.1.0 picks it: ``idx`` (or ``options["index"]``); else for a seeded reset ``random.Random(seed).randint``
    over the shuffled rows; else the next row, the rows shuffled again (seed + epoch) after the last.

    Raises:
        InvalidArgument: ``seed`` is not None or a whole number from 0 up, or ``idx`` is not a row.
    """
    CoreEnv.reset(env, seed=seed)  # checks the seed and seeds np_random, as the core's envs do
    if idx is None and options and "index" in options:
        idx = options["index"]
    if idx is not None:
        env.idx = check_index(idx, len(env.dataset))
    elif seed is not None:
        env.idx = random.Random(seed).randint(0, len(env.dataset) - 1)
    elif env.idx == len(env.dataset):
        env.epoch += 1
        env.dataset = env.dataset.shuffle(seed=env.seed + env.epoch)
        env.idx = 0
    env.index = env.idx
    env.idx += 1
    return env.dataset[env.index]


class MathEnv(CoreMathEnv):
    """One question per episode from ``dataset_name`` (a hub id), ``data_files=`` (a local copy) or ``dataset=``
    (rows in memory), as GEM 0.1.0 serves it (see the module docstring).

    Args:
        dataset_name: The hub dataset (empty: none, with ``data_files=`` or ``dataset=``).
        split: The split to read (None: ``"train"``, or a ``dataset=``'s only split).
        dataset: Rows in memory (a ``datasets.Dataset``, ``DatasetDict`` or list of dict rows), used instead of ``dataset_name``.
        question_key: The column holding the question.
        answer_key: The column holding the reference answer(s).
        seed: Seeds the row order (GEM's shuffle seed).
        use_mp: Accepted for GEM's signature; the core's grader runs in its own worker pool either way.
        eval: Keep the rows in dataset order (GEM's evaluation switch).
        data_files: A local copy of the rows (JSONL/Parquet/CSV) read instead of the hub.
        grade_timeout: Seconds a grade may take before it counts as wrong (GEM: 1).

    Raises:
        gem.envs.code_env.DatasetSplitError: ``dataset`` has several splits and ``split`` names none of them.
        InvalidArgumentType: ``dataset`` is not a ``Dataset``/``DatasetDict`` or a list of dict rows.
        InvalidArgument: The rows lack ``question_key`` or ``answer_key``, or are empty.
    """

    state_excludes = CoreMathEnv.state_excludes | {"dataset"}

    def __init__(
        self,
        dataset_name: str | None = "",
        split: str | None = None,
        dataset: Any = None,
        question_key: str = "problem",
        answer_key: str = "answer",
        seed: int = 0,
        use_mp: bool = True,
        eval: bool = False,  # noqa: A002 - GEM's keyword
        data_files: Any = None,
        grade_timeout: float | None = 1.0,
    ):
        data_files, split = gem_rows(dataset, split, data_files)
        super().__init__(
            dataset_name or None, split=split, data_files=data_files, question_field=question_key,
            answer_field=answer_key, grade_timeout=grade_timeout, prompt_suffix="",
        )
        self.seed, self.use_mp, self.question_key, self.answer_key = seed, use_mp, question_key, answer_key
        self.dataset = self.rows if eval else self.rows.shuffle(seed=seed)
        self.idx = 0
        self.epoch = 0
        self.first_obs = ""
        self.answer: Any = None

    def reset(
        self, seed: int | None = None, options: dict[str, Any] | None = None, idx: int | None = None
    ) -> tuple[str, dict[str, Any]]:
        """Take the episode's row the way GEM does (see the module docstring).

        Returns:
            The question as the dataset writes it, and an empty info.

        Raises:
            InvalidArgument: ``seed`` is not None or a whole number from 0 up, or ``idx`` is not a row.
        """
        row = next_gem_row(self, seed, options, idx)
        self.first_obs, self.answer = row[self.question_key], row[self.answer_key]
        self.question, self.gold = str(self.first_obs), gold_list(self.answer)[0] if gold_list(self.answer) else ""
        return self.first_obs, {}

    def step(self, action: str) -> StepResult:
        """Grade the last ``\\boxed{}`` against the reference answer(s); the episode ends.

        Returns:
            ``(TERMINAL_STATE, 1.0 or 0.0, True, True, {"correct": ...})``, as GEM returns it.

        Raises:
            ResetNeeded: No episode has been started.
        """
        if self.index is None:
            raise ResetNeeded("MathEnv: call reset() before step().")
        answer = extract_boxed(action) if isinstance(action, str) else None
        correct = bool(answer) and any(
            grade(answer, gold, self.grade_timeout).correct for gold in gold_list(self.answer)  # type: ignore[arg-type]
        )
        return TERMINAL_STATE, 1.0 if correct else 0.0, True, True, {"correct": correct}

    def sample_random_action(self) -> str:
        """GEM's random action."""
        return "\\boxed{42}"
