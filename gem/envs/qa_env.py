"""``gem.envs.qa_env:QaEnv``: GEM 0.1.0's question-answering env, behind GEM's ``qa:*``, ``logic:*`` and QA
``eval:*`` ids under ``import gem``.

The rows are read by the core (:class:`gem_core.envs.qa.env.QAEnv`: the hub, ``data_files=`` or GEM's
``dataset=``); what the model sees and earns is GEM's:

- the observation is GEM's template: reason in ``<think>`` tags, answer in ``<answer>`` tags, then
  ``Question: {question}``;
- the answer is the last ``<answer>...</answer>`` (``extract_boxed=True``: the last ``\\boxed{}``), scored by
  exact match after SQuAD normalization against each reference answer: 1.0 or 0.0, no answer 0.0 (GEM 0.1.0
  fails there with an UnboundLocalError); the episode ends ``(True, True)`` on GEM's terminal state;
- rows are ordered and drawn as :mod:`gem.envs.math_env` draws them (``dataset.shuffle(seed=seed)``, then in
  order; ``reset(seed=s)``: ``random.seed(s); random.randint(0, n - 1)``).
"""

from __future__ import annotations

import re
from typing import Any

from gem.envs.math_env import TERMINAL_STATE, gem_rows, gold_list, next_gem_row
from gem_core.env import StepResult
from gem_core.envs.math.answer import extract_boxed
from gem_core.envs.qa.env import QAEnv
from gem_core.envs.qa.scoring import best_exact_match
from gem_core.errors import ResetNeeded

__all__ = ["QaEnv", "PROMPT_TEMPLATE", "extract_last_tagged_answer"]

PROMPT_TEMPLATE = (
    "For any question, always reason through your thought process using:\n"
    "<think> your reasoning here </think>\n"
    "Then, provide your final answer using:\n"
    "<answer> your answer here </answer>\n\n"
    "Question: {question}\n"
)
"""GEM's QA prompt, the question filled in as the dataset writes it."""

_ANSWER_TAG = re.compile(r"<answer>(.*?)</answer>", re.DOTALL)


def extract_last_tagged_answer(text: str) -> str | None:
    """The stripped content of the last ``<answer>...</answer>``; None when there is none."""
    matches = _ANSWER_TAG.findall(text)
    return matches[-1].strip() if matches else None


class QaEnv(QAEnv):
    """One question per episode from ``dataset_name`` (a hub id), ``data_files=`` or ``dataset=``, as GEM 0.1.0
    serves it (see the module docstring).

    Args:
        dataset_name: The hub dataset (empty: none, with ``data_files=`` or ``dataset=``).
        split: The split to read (None: ``"train"``, or a ``dataset=``'s only split).
        dataset: Rows in memory (a ``datasets.Dataset``, ``DatasetDict`` or list of dict rows), used instead of ``dataset_name``.
        question_key: The column holding the question.
        answer_key: The column holding the reference answer(s).
        seed: Seeds the row order (GEM's shuffle seed).
        extract_boxed: Read the answer from the last ``\\boxed{}`` instead of ``<answer>`` tags.
        load_from_cache_file: Accepted for GEM's signature; unused (the template is applied at reset).
        data_files: A local copy of the rows read instead of the hub.
        score_timeout: Seconds scoring may take before the answer counts as wrong.
        use_mp: Accepted for GEM's signature (its training examples pass it to every env); unused.

    Raises:
        gem.envs.code_env.DatasetSplitError: ``dataset`` has several splits and ``split`` names none of them.
        InvalidArgumentType: ``dataset`` is not a ``Dataset``/``DatasetDict`` or a list of dict rows.
        InvalidArgument: The rows lack ``question_key`` or ``answer_key``, or are empty.
    """

    state_excludes = QAEnv.state_excludes | {"dataset"}

    def __init__(
        self,
        dataset_name: str | None = "",
        split: str | None = None,
        dataset: Any = None,
        question_key: str = "question",
        answer_key: str = "answer",
        seed: int = 0,
        extract_boxed: bool = False,
        load_from_cache_file: bool = True,
        data_files: Any = None,
        score_timeout: float | None = 5.0,
        use_mp: bool = False,
    ):
        del load_from_cache_file, use_mp  # GEM's hints about datasets' cache and a process pool
        data_files, split = gem_rows(dataset, split, data_files)
        super().__init__(
            dataset_name or None, split=split, data_files=data_files, question_field=question_key,
            answer_field=answer_key, prompt_suffix="", score_timeout=score_timeout,
        )
        self.seed, self.question_key, self.answer_key, self.extract_boxed = seed, question_key, answer_key, extract_boxed
        self.dataset = self.rows.shuffle(seed=seed)
        self.idx = 0
        self.epoch = 0
        self.first_obs = ""
        self.answer: Any = None

    def reset(
        self, seed: int | None = None, options: dict[str, Any] | None = None, idx: int | None = None
    ) -> tuple[str, dict[str, Any]]:
        """Take the episode's row the way GEM does (see the module docstring).

        Returns:
            GEM's template around the question, and an empty info.

        Raises:
            InvalidArgument: ``seed`` is not None or a whole number from 0 up, or ``idx`` is not a row.
        """
        row = next_gem_row(self, seed, options, idx)
        self.first_obs = PROMPT_TEMPLATE.format(question=row[self.question_key])
        self.answer = row[self.answer_key]
        self.question, self.golds = str(row[self.question_key]), gold_list(self.answer)
        return self.first_obs, {}

    def step(self, action: str) -> StepResult:
        """Score the extracted answer by exact match; the episode ends.

        Returns:
            ``(TERMINAL_STATE, 1.0 or 0.0, True, True, {"correct": ...})``, as GEM returns it.

        Raises:
            ResetNeeded: No episode has been started.
        """
        if self.index is None:
            raise ResetNeeded("QaEnv: call reset() before step().")
        text = action if isinstance(action, str) else ""
        answer = extract_boxed(text) if self.extract_boxed else extract_last_tagged_answer(text)
        correct = answer is not None and best_exact_match(answer, self.golds)
        return TERMINAL_STATE, 1.0 if correct else 0.0, True, True, {"correct": bool(correct)}

    def sample_random_action(self) -> str:
        """GEM's random action."""
        return "<answer>Hello World!</answer>"
