"""The error for an action dict with the wrong agents stays readable whatever the dict holds."""

from __future__ import annotations

import pytest

import gem_core
from gem_core.errors import InvalidArgument


def test_a_huge_wrong_action_dict_gets_a_short_error_naming_a_few_keys_and_counting_the_rest():
    env = gem_core.make("multi:TicTacToe-v0")
    env.reset(seed=0)
    with pytest.raises(InvalidArgument, match="step\\(\\) needs exactly") as caught:
        env.step({str(i): "\\boxed{1}" for i in range(200_000)})
    message = str(caught.value)
    assert len(message) < 500, message[:500]
    assert "'0'" in message and "199995 more" in message


def test_a_wrong_action_dict_with_a_huge_key_gets_a_short_error():
    env = gem_core.make("multi:TicTacToe-v0")
    env.reset(seed=0)
    with pytest.raises(InvalidArgument, match="step\\(\\) needs exactly") as caught:
        env.step({"y" * 1_000_000: "\\boxed{1}"})
    assert len(str(caught.value)) < 500


def test_a_small_wrong_action_dict_names_every_key():
    env = gem_core.make("multi:TicTacToe-v0")
    env.reset(seed=0)
    with pytest.raises(InvalidArgument) as caught:
        env.step({"nobody": "\\boxed{1}", "somebody": "\\boxed{2}"})
    assert "got ['nobody', 'somebody']" in str(caught.value)
