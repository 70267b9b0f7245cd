"""``import gem``'s ``rg:*`` envs (GEM 0.1.0's) keep the core's guards against reasoning-gym scorers that pay wrong
answers: GEM's own env paid them, and so did this one when it became GEM's (stop 67)."""

from __future__ import annotations

import pytest

pytest.importorskip("reasoning_gym")

import gem  # noqa: E402


def test_a_nan_answer_is_not_paid_for_a_complex_number():
    """complex_arithmetic's scorer pays min(1, exp(-distance)), and NaN's distance compares false: 1.0 for 'nan'."""
    env = gem.make("rg:complex_arithmetic")
    env.reset(seed=0)
    assert env.step("\\boxed{nan}")[1] == 0.0


def test_a_true_false_gold_is_compared_as_text():
    """game_of_life_halting's scorer compares bool(answer) == bool(gold): any non-empty answer was right."""
    env = gem.make("rg:game_of_life_halting")
    env.reset(seed=0)
    gold = str(env.data["answer"])
    wrong = "True" if gold.strip().lower() == "false" else "False"
    assert env.step(f"\\boxed{{{wrong}}}")[1] == 0.0
    env.reset(seed=0)
    assert env.step(f"\\boxed{{{gold}}}")[1] == 1.0
