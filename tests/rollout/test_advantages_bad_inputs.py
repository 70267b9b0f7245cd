"""Advantage helpers refuse NaN, inf, None, a batch where one episode is expected, and a negative eps,
with a ValueError naming the argument and the position, instead of spreading NaN over the batch."""

from __future__ import annotations

import numpy as np
import pytest

from gem_core.rollout.advantages import (
    discounted_returns,
    grpo_advantages,
    return_batch_normalize,
    same_state_advantages,
    turn_level_gae,
    turn_returns_to_token_advantages,
    turn_to_token_advantages,
)

nan, inf = float("nan"), float("inf")


def test_return_batch_normalize_refuses_a_nan_return():
    with pytest.raises(ValueError, match=r"^returns\[1\] is nan: returns must be finite numbers"):
        return_batch_normalize([1.0, nan, 0.0])


def test_grpo_advantages_refuse_a_nan_return():
    with pytest.raises(ValueError, match=r"^returns\[1\] is nan: returns must be finite numbers"):
        grpo_advantages([1, nan, 0, 1], [0, 0, 1, 1])


def test_batch_turn_returns_refuse_a_nan_episode_return():
    with pytest.raises(ValueError, match=r"^turn_returns\[1\]\[0\] is nan"):
        turn_returns_to_token_advantages([[1.0], [nan]], [[(0, 2)], [(0, 1)]], 4)
    with pytest.raises(ValueError, match=r"^population\[2\] is inf"):
        turn_returns_to_token_advantages([[1.0]], [[(0, 2)]], 4, population=[1.0, 0.0, inf], offset=0)


def test_turn_to_token_advantages_refuse_a_nan_advantage():
    with pytest.raises(ValueError, match=r"^turn_advantages\[0\] is nan"):
        turn_to_token_advantages([nan], [(0, 1)], 2)


def test_discounted_returns_refuse_inf_none_and_a_batch():
    with pytest.raises(ValueError, match=r"^rewards\[0\] is inf: rewards must be finite numbers"):
        discounted_returns([inf, -inf], 0.9)
    with pytest.raises(ValueError, match=r"^rewards\[1\] is None: rewards must be finite numbers"):
        discounted_returns([1.0, None], 0.9)
    with pytest.raises(ValueError, match=r"^rewards must be one episode's values \(a 1-D sequence of numbers\), got None"):
        discounted_returns(None, 0.9)
    with pytest.raises(ValueError, match=r"^rewards must be one episode's values \(a 1-D sequence of numbers\), got shape \(2, 2\)"):
        discounted_returns([[1, 2], [3, 4]], 0.9)
    with pytest.raises(ValueError, match=r"^rewards must be finite numbers, got \['a'\]"):
        discounted_returns(["a"], 0.9)


def test_turn_level_gae_refuses_nan_values_and_last_value():
    with pytest.raises(ValueError, match=r"^last_value is nan: last_value must be a finite number"):
        turn_level_gae([1], [0.5], 0.9, 0.95, last_value=nan)
    with pytest.raises(ValueError, match=r"^values\[0\] is nan: values must be finite numbers"):
        turn_level_gae([1], [nan], 0.9, 0.95)
    with pytest.raises(ValueError, match=r"^rewards\[1\] is inf"):
        turn_level_gae([1, inf], [0.0, 0.0], 0.9, 0.95)


@pytest.mark.parametrize("fn", [return_batch_normalize, lambda r, eps: grpo_advantages(r, [0, 0], eps=eps)])
def test_a_negative_or_nan_eps_is_refused(fn):
    with pytest.raises(ValueError, match=r"^eps must be a finite number >= 0, got -1.0"):
        fn([0.0, 2.0], eps=-1.0)
    with pytest.raises(ValueError, match=r"^eps is nan: eps must be a finite number"):
        fn([0.0, 2.0], eps=nan)
    assert np.all(np.isfinite(fn([0.0, 2.0], eps=0.0)))  # eps 0 never divides by 0: equal returns give 0


def test_same_state_advantages_refuse_a_branch_with_no_turn_at_the_fork():
    with pytest.raises(ValueError, match=r"^branch 0 has 1 turns, none at fork_turn 1: every branch must have played the fork turn"):
        same_state_advantages([[1.0], [0.0, 1.0]], fork_turn=1, gamma=0.9)


@pytest.mark.parametrize("fork_turn", [0.5, True, "1", -1])
def test_same_state_advantages_fork_turn_must_be_a_non_negative_int(fork_turn):
    with pytest.raises(ValueError, match=r"^fork_turn must be an int >= 0, got "):
        same_state_advantages([[1.0], [0.0, 1.0]], fork_turn=fork_turn, gamma=0.9)


def test_same_state_advantages_refuse_a_nan_branch_reward():
    with pytest.raises(ValueError, match=r"^branch_rewards\[1\]\[0\] is nan"):
        same_state_advantages([[1.0], [nan]], fork_turn=0, gamma=0.9)
