"""Open-domain questions with gold answers; the answer goes in ``\\boxed{}`` (or ``<answer></answer>``).

Rewards: by default 1.0 for an exact match with any gold answer after SQuAD normalization, else 0.0;
``reward="f1"`` gives the best token F1 instead. Both scores are always in ``info`` (``exact_match``,
``f1``). A response without an answer gets the format penalty. Scoring runs in a killable worker with a
time limit, like every grader: a timeout or crash scores 0 with ``info["error"]`` set and one logged
warning per env id. One step per episode; the ``-search``
ids wrap this env with the search tool, so the agent may search first.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from gem_core.env import StepResult
from gem_core.envs.dataset import DataFiles, DatasetEnv, check_text
from gem_core.envs.math.answer import extract_final_answer
from gem_core.envs.qa.scoring import score_answer
from gem_core.envs.scoring_pool import check_time_limit, report_scoring, scoring_pool
from gem_core.errors import InvalidArgument, ResetNeeded

__all__ = ["QAEnv", "gold_answers"]

ANSWER_HINT = "Put your final answer (a short phrase) inside \\boxed{}, for example \\boxed{Paris}."


def gold_answers(value: Any) -> list[str]:
    """Every acceptable answer from a dataset cell, as strings: a string, a list of strings, a JSON-encoded list,
    or a TriviaQA-style ``{"value": ..., "aliases": [...]}`` record; a number anywhere (``{"value": 1945}``) is
    its text."""
    if value is None:
        return []
    if isinstance(value, Mapping):
        answers = gold_answers(value.get("value"))
        for key in ("aliases", "normalized_aliases", "text", "answers", "target"):
            if key in value:
                answers.extend(gold_answers(value[key]))
        return list(dict.fromkeys(a for a in answers if a))
    if isinstance(value, str):
        stripped = value.strip()
        if stripped.startswith("[") and stripped.endswith("]"):
            try:
                decoded = json.loads(stripped)
            except ValueError:
                decoded = None
            if isinstance(decoded, list):
                return gold_answers(decoded)
        return [stripped] if stripped else []
    if hasattr(value, "tolist"):  # numpy arrays from parquet
        value = value.tolist()
    if isinstance(value, (list, tuple)):
        return list(dict.fromkeys(a for item in value for a in gold_answers(item)))
    return [str(value)]


class QAEnv(DatasetEnv):
    """Question answering from a dataset, one question per episode, picked by ``self.np_random``.

    Args:
        dataset_path: the hub dataset the rows come from (see :func:`gem_core.envs.dataset.load_rows`).
        dataset_name: its config name.
        split: the split to read.
        data_files: a local copy to read instead of the hub.
        question_field: the column holding the question.
        answer_field: the column holding the gold answer(s).
        reward: ``"em"`` (1.0 on exact match) or ``"f1"`` (best token F1).
        prompt_suffix: appended to every question (the answer-format instruction).
        score_timeout: seconds scoring may take before the answer counts as wrong; ``None`` scores
            in-process with no limit (only for trusted answers).

    Raises:
        InvalidArgument: if ``reward`` is not ``"em"`` or ``"f1"``, or ``score_timeout`` is not None or a number of
            seconds above 0 (at most :data:`~gem_core.envs.scoring_pool.MAX_CALL_SECONDS`).
        InvalidArgumentType: if ``prompt_suffix`` is not a str.
    """

    def __init__(
        self,
        dataset_path: str | None = None,
        *,
        dataset_name: str | None = None,
        split: str = "train",
        data_files: DataFiles | None = None,
        question_field: str = "question",
        answer_field: str = "answer",
        reward: str = "em",
        prompt_suffix: str = "\n\n" + ANSWER_HINT,
        score_timeout: float | None = 5.0,
    ):
        if reward not in ("em", "f1"):
            raise InvalidArgument(f"reward must be 'em' (exact match) or 'f1', got {reward!r}.")
        self.prompt_suffix = check_text("prompt_suffix", prompt_suffix)
        if score_timeout is not None:
            score_timeout = check_time_limit("score_timeout", score_timeout, none_means="scoring in-process with no limit")
        self.score_timeout = score_timeout
        super().__init__(
            dataset_path, dataset_name=dataset_name, split=split, data_files=data_files,
            fields={"question_field": question_field, "answer_field": answer_field},
        )
        self.question_field, self.answer_field, self.reward = question_field, answer_field, reward
        self._setup_seconds = 0.0
        self.question = ""
        self.golds: list[str] = []

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
        """Draw a question; ``options={"index": i}`` picks row ``i`` instead."""
        row = self.draw_row(seed, options)
        self.question = str(row[self.question_field]).strip()
        self.golds = gold_answers(row[self.answer_field])
        return self.question + self.prompt_suffix, {"index": self.index}

    def step(self, action: str) -> StepResult:
        if self.index is None:
            raise ResetNeeded("Call reset() before step().")
        answer = extract_final_answer(action) if isinstance(action, str) else None
        if not answer:
            # The prompt's own instruction (True/False for the logic envs), else the generic one.
            return self.invalid_action("No final answer found. " + (self.prompt_suffix.strip() or ANSWER_HINT), golds=self.golds)
        (em, f1), error = self.score(answer)
        reward = float(em) if self.reward == "em" else f1
        info: dict[str, Any] = {"exact_match": em, "f1": f1, "correct": em, "answer": answer, "golds": self.golds}
        report_scoring(self, info, answer, error, self._setup_seconds)
        return ("Correct." if em else "Incorrect."), reward, True, False, info

    @property
    def max_step_seconds(self) -> float:  # type: ignore[override]
        """The scoring limit plus the worker round trip (infinite when scoring in-process)."""
        return float("inf") if self.score_timeout is None else self.score_timeout + 2.0

    def score(self, answer: str) -> tuple[tuple[bool, float], str | None]:
        """``((exact match, F1), error)``; on a timeout or crash ``((False, 0.0), error)``."""
        self._setup_seconds = 0.0
        if self.score_timeout is None:
            return score_answer(answer, self.golds), None
        result = scoring_pool("qa").call(
            "gem_core.envs.qa.scoring:score_answer", answer, self.golds, timeout=self.score_timeout
        )
        self._setup_seconds = result.setup_seconds
        if not result.ok:
            return (False, 0.0), result.scoring_error
        return result.value, None

    def sample_random_action(self) -> str:
        words = self.question.split() or ["unknown"]
        start = int(self.np_random.integers(len(words)))
        return "\\boxed{" + " ".join(words[start : start + 2]).replace("{", "").replace("}", "") + "}"

    def render(self) -> str:
        return f"QAEnv row={self.index} golds={self.golds}\n{self.question}"
