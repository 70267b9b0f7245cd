"""rg:<name> answers that fool reasoning-gym's own scorers: an answer of NaN (compared false with everything,
so ``min(1, exp(-nan))`` is 1), a gold bool spelled as text (``bool("False")`` is true), a score that is not
a finite number. GEM scores them 0 without asking the scorer."""

from __future__ import annotations

import math

import pytest

pytest.importorskip("reasoning_gym")

import gem_core.envs.reasoning_gym  # noqa: F401  (registers the ids)
from gem_core.registry import make


@pytest.mark.parametrize("score_timeout", [None, 30.0])
def test_an_answer_of_nan_scores_zero_where_the_gold_is_a_number(score_timeout):
    env = make("rg:complex_arithmetic", score_timeout=score_timeout)
    for seed in range(2):
        env.reset(seed=seed)
        gold = env.entry["answer"]
        for nan in ("nan", "NaN", "nan + nan i", f"{gold.split(' ')[0]} + nan i"):
            env.reset(seed=seed)
            _, reward, terminated, _, info = env.step(f"<answer>{nan}</answer>")
            assert (reward, terminated, info["correct"]) == (0.0, True, False), (nan, info)
            assert "NaN" in info["score_note"] and "error" not in info
        env.reset(seed=seed)
        _, reward, _, _, info = env.step(f"<answer>{gold}</answer>")
        assert reward == 1.0 and "score_note" not in info
    env.close()


@pytest.mark.parametrize("name", ["game_of_life_halting", "course_schedule"])
def test_a_gold_bool_spelled_as_text_is_compared_as_text(name):
    env = make(f"rg:{name}", score_timeout=None)
    seen = set()
    for index in range(40):
        env.reset(options={"index": index})
        gold = env.entry["answer"]
        if gold in seen:
            continue
        seen.add(gold)
        other = {"True": "False", "False": "True"}[gold]
        for wrong in ("banana", other, other.lower(), "yes", f"Not {gold}", f"{gold} {other}", "nan"):
            env.reset(options={"index": index})
            assert env.step(f"<answer>{wrong}</answer>")[1] == 0.0, (gold, wrong)
        for right in (gold, gold.lower(), f" {gold.upper()} "):
            env.reset(options={"index": index})
            assert env.step(f"<answer>{right}</answer>")[1] == 1.0, (gold, right)
    assert seen == {"True", "False"}
    env.close()


def test_a_score_that_is_not_finite_is_zero_with_an_error(monkeypatch):
    env = make("rg:letter_counting", score_timeout=None)
    env.reset(seed=0)
    monkeypatch.setattr(env.dataset, "score_answer", lambda answer, entry: math.nan)
    _, reward, _, _, info = env.step(f"<answer>{env.entry['answer']}</answer>")
    assert (reward, info["correct"]) == (0.0, False)
    assert "not a finite number" in info["error"], info
