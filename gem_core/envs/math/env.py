"""One math question per episode; the answer goes in ``\\boxed{}`` and is graded by math-verify.

Rewards: 1.0 for a correct answer, 0.0 for a wrong one (including one whose grading ran out of time or
crashed: then ``info["error"]`` says which, and the first such step per env id logs a warning), the
format penalty for a response with no complete ``\\boxed{}``. Every episode is one step.
"""

from __future__ import annotations

import re
from typing import Any

from gem_core.env import StepResult
from gem_core.envs.dataset import DataFiles, DatasetEnv, check_text
from gem_core.envs.math.answer import BOXED_HINT, extract_boxed
from gem_core.envs.math.grading import grade
from gem_core.envs.scoring_pool import check_time_limit, report_scoring
from gem_core.errors import InvalidArgument, ResetNeeded

__all__ = ["MathEnv", "gold_from_field"]

_GSM8K_ANSWER = re.compile(r"####\s*(.+?)\s*$", re.DOTALL)


def gold_from_field(value: Any, answer_format: str = "plain") -> str:
    """The gold answer from a dataset cell.

    ``answer_format``: ``"plain"`` (the cell is the answer), ``"gsm8k"`` (worked solution ending in
    ``#### 72``) or ``"boxed"`` (a worked solution whose last ``\\boxed{}`` is the answer, as in MATH).

    Raises:
        InvalidArgument: if ``answer_format`` is not ``"plain"``, ``"gsm8k"`` or ``"boxed"``.
    """
    text = str(value).strip()
    if answer_format == "gsm8k":
        match = _GSM8K_ANSWER.search(text)
        return match.group(1).replace(",", "").strip() if match else text
    if answer_format == "boxed":
        boxed = extract_boxed(text)
        return boxed if boxed is not None else text
    if answer_format != "plain":
        raise InvalidArgument(f"answer_format must be 'plain', 'gsm8k' or 'boxed', got {answer_format!r}.")
    return text


class MathEnv(DatasetEnv):
    """Math word problems from a dataset, one per episode, picked by ``self.np_random``.

    Args:
        dataset_path: hub id of the dataset (ignored when ``data_files`` is given).
        dataset_name: hub config name (GSM8K's ``"main"``).
        split: split to draw questions from.
        data_files: local JSONL/Parquet/CSV file(s) with the same columns, read instead of the hub.
        question_field: the column holding the question.
        answer_field: the column holding the gold answer.
        answer_format: how the gold answer is written in ``answer_field`` (see :func:`gold_from_field`).
        grade_timeout: seconds a grade may take before it counts as wrong; ``None`` grades in-process with
            no limit (only for trusted answers).
        prompt_suffix: appended to every question (the answer-format instruction).

    Raises:
        InvalidArgument: if ``answer_format`` is unknown or ``grade_timeout`` is not None or a number of seconds
            above 0 (at most :data:`~gem_core.envs.scoring_pool.MAX_CALL_SECONDS`).
        InvalidArgumentType: if ``prompt_suffix`` is not a str.
    """

    def __init__(
        self,
        dataset_path: str | None = None,
        *,
        dataset_name: str | None = None,
        split: str = "train",
        data_files: DataFiles | None = None,
        question_field: str = "problem",
        answer_field: str = "answer",
        answer_format: str = "plain",
        grade_timeout: float | None = 5.0,
        prompt_suffix: str = "\n\nReason step by step. " + BOXED_HINT,
    ):
        gold_from_field("", answer_format)  # validate the format name now, not at the first reset
        if grade_timeout is not None:
            grade_timeout = check_time_limit("grade_timeout", grade_timeout, none_means="grading in-process with no limit")
        self.grade_timeout = grade_timeout
        self.prompt_suffix = check_text("prompt_suffix", prompt_suffix)
        super().__init__(
            dataset_path, dataset_name=dataset_name, split=split, data_files=data_files,
            fields={"question_field": question_field, "answer_field": answer_field},
        )
        self.question_field, self.answer_field, self.answer_format = question_field, answer_field, answer_format
        self.question = ""
        self.gold = ""

    @property
    def max_step_seconds(self) -> float:  # type: ignore[override]
        """The grading limit plus the worker round trip (infinite when grading in-process)."""
        return float("inf") if self.grade_timeout is None else self.grade_timeout + 2.0

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
        """Draw a question; ``options={"index": i}`` picks row ``i`` instead."""
        row = self.draw_row(seed, options)
        self.question = str(row[self.question_field])
        self.gold = gold_from_field(row[self.answer_field], self.answer_format)
        return self.question + self.prompt_suffix, {"index": self.index}

    def step(self, action: str) -> StepResult:
        if self.index is None:
            raise ResetNeeded("Call reset() before step().")
        answer = extract_boxed(action) if isinstance(action, str) else None
        if not answer:
            return self.invalid_action("No final answer found: put it inside \\boxed{}, e.g. \\boxed{42}.", gold=self.gold)
        result = grade(answer, self.gold, self.grade_timeout)
        info = {"correct": result.correct, "answer": answer, "gold": self.gold, "grading_timed_out": result.timed_out}
        report_scoring(self, info, answer, result.error, result.setup_seconds)
        feedback = "Correct." if result.correct else "Incorrect."
        return feedback, 1.0 if result.correct else 0.0, True, False, info

    def sample_random_action(self) -> str:
        return f"\\boxed{{{int(self.np_random.integers(0, 100))}}}"

    def render(self) -> str:
        return f"MathEnv row={self.index} gold={self.gold!r}\n{self.question}"
