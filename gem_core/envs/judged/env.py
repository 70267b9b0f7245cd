"""One open-ended task per episode; the answer is free text and a judge scores it.

:class:`OpenTaskEnv` only poses the task and ends the episode on the answer (its own reward is 0: it
has no checker); :func:`make_judged_task` wraps it in :class:`~gem_core.wrappers.judged.Judged`, which
pays the judge's verdict. The reference answer is the env's ``judge_reference``, read by the wrapper and
shown to the judge, never to the policy.
"""

from __future__ import annotations

import os
from typing import Any

from gem_core.env import StepResult
from gem_core.envs.dataset import DataFiles, DatasetEnv, check_text
from gem_core.errors import InvalidArgument, ResetNeeded
from gem_core.judge.client import Judge
from gem_core.judge.rubric import Rubric
from gem_core.registry import forwards_kwargs
from gem_core.wrappers.judged import Judged

__all__ = ["OpenTaskEnv", "make_judged_task"]


class OpenTaskEnv(DatasetEnv):
    """Poses one task from a dataset (columns ``task_field``, ``reference_field``); one answer ends it.

    Args:
        dataset_path: the hub dataset the rows come from (see :func:`gem_core.envs.dataset.load_rows`).
        dataset_name: its config name.
        split: the split to read.
        data_files: a local copy to read instead of the hub.
        task_field: the column holding the task.
        reference_field: the column holding the reference answer (None: no reference).
        prompt_suffix: appended to every task.

    Raises:
        InvalidArgumentType: if ``prompt_suffix`` is not a str.
    """

    format_penalty = 0.0  # an empty answer is simply not judged: the reward stays 0

    def __init__(
        self,
        dataset_path: str | None = None,
        *,
        dataset_name: str | None = None,
        split: str = "train",
        data_files: DataFiles | None = None,
        task_field: str = "task",
        reference_field: str | None = "reference",
        prompt_suffix: str = "",
    ):
        self.prompt_suffix = check_text("prompt_suffix", prompt_suffix)
        fields = {"task_field": task_field, **({"reference_field": reference_field} if reference_field else {})}
        super().__init__(dataset_path, dataset_name=dataset_name, split=split, data_files=data_files, fields=fields)
        self.task_field, self.reference_field = task_field, reference_field
        self.task = ""
        self.judge_reference: str | None = None

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
        """Draw a task; ``options={"index": i}`` picks row ``i`` instead."""
        row = self.draw_row(seed, options)
        self.task = str(row[self.task_field]).strip()
        reference = row[self.reference_field] if self.reference_field else None
        self.judge_reference = None if reference is None else str(reference)
        return self.task + self.prompt_suffix, {"index": self.index}

    def step(self, action: str) -> StepResult:
        if self.index is None:
            raise ResetNeeded("Call reset() before step().")
        if not isinstance(action, str) or not action.strip():
            return self.invalid_action("No answer: reply with your answer as text.")
        return "Your answer was recorded.", 0.0, True, False, {"answer_chars": len(action)}

    def sample_random_action(self) -> str:
        words = self.task.split() or ["answer"]
        start = int(self.np_random.integers(len(words)))
        return " ".join(words[start : start + 8])

    def render(self) -> str:
        return f"OpenTaskEnv row={self.index}\n{self.task}"


@forwards_kwargs(OpenTaskEnv)
def make_judged_task(
    dataset_path: str | None = None,
    *,
    judge: Judge | None = None,
    judge_url: str | None = None,
    judge_model: str | None = None,
    judge_cache: str | os.PathLike | None = None,
    rubric: Rubric | dict | str | None = None,
    truncate_on_error: bool = False,
    **env_kwargs: Any,
) -> Judged:
    """An :class:`OpenTaskEnv` whose final answer a judge scores.

    Args:
        judge: the judge; or give ``judge_url`` and ``judge_model`` (and optionally ``judge_cache``, a
            SQLite file of verdicts) to build one. Neither: answers pay 0 with ``info["error"]``.
        rubric: see :class:`~gem_core.wrappers.judged.Judged` (default: correctness, completeness, clarity).
        truncate_on_error: see :class:`~gem_core.wrappers.judged.Judged`.
        env_kwargs: :class:`OpenTaskEnv`'s arguments (``data_files=``, ``task_field=``, ...).

    Raises:
        InvalidArgument: if only one of ``judge_url`` and ``judge_model`` is given.
    """
    owned = False
    if judge is None and (judge_url or judge_model):
        if not (judge_url and judge_model):
            raise InvalidArgument("Give both judge_url= and judge_model= (gem eval: --judge-url and --judge-model), or judge=Judge(...).")
        judge, owned = Judge(judge_url, judge_model, cache=judge_cache), True
    env = OpenTaskEnv(dataset_path, **env_kwargs)
    return Judged(env, judge, rubric, on="final", truncate_on_error=truncate_on_error, close_judge=owned)
