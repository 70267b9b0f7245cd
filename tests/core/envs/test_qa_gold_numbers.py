"""qa:<Dataset> gold answers stored as numbers (JSON and parquet cells often hold them) are scored as text."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("datasets")

from gem_core.envs.qa.env import QAEnv, gold_answers


@pytest.mark.parametrize(
    ("cell", "golds"),
    [
        ({"value": 1945}, ["1945"]),
        ({"value": 1945, "aliases": [1945, "1945", "MCMXLV"]}, ["1945", "MCMXLV"]),
        ({"value": 0}, ["0"]),  # a falsy number is still an answer
        ({"value": " Paris ", "aliases": []}, ["Paris"]),
        ({"value": None, "aliases": [3]}, ["3"]),
        ({"value": ""}, []),
    ],
)
def test_every_gold_answer_of_a_trivia_record_is_a_string(cell, golds):
    assert gold_answers(cell) == golds
    assert all(isinstance(gold, str) for gold in gold_answers(cell))


@pytest.mark.parametrize("score_timeout", [None, 30.0])
def test_a_numeric_trivia_gold_scores_the_right_answer_in_process_and_pooled(tmp_path, score_timeout):
    path = tmp_path / "qa.jsonl"
    path.write_text(json.dumps({"question": "When did WW2 end?", "answer": {"value": 1945, "aliases": [1945]}}) + "\n")
    env = QAEnv(data_files=str(path), score_timeout=score_timeout)
    env.reset(seed=0)
    _, reward, terminated, _, info = env.step("\\boxed{1945}")
    assert (reward, terminated, info["exact_match"], "error" in info) == (1.0, True, True, False), info
    env.reset(seed=0)
    assert env.step("\\boxed{1946}")[1] == 0.0
