"""Hand-worked examples for gem_core/rollout/advantages.py (every expected number is worked out here)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from gem_core.rollout.advantages import (
    discounted_returns,
    grpo_advantages,
    return_batch_normalize,
    turn_level_gae,
    turn_returns_to_token_advantages,
    turn_to_token_advantages,
)


# -- discounted returns -------------------------------------------------------------------------


def test_discounted_returns_with_half_discount():
    # G_2 = 4; G_1 = 2 + 0.5*4 = 4; G_0 = 1 + 0.5*4 = 3
    np.testing.assert_allclose(discounted_returns([1.0, 2.0, 4.0], 0.5), [3.0, 4.0, 4.0])


def test_discounted_returns_gamma_zero_are_the_rewards():
    np.testing.assert_allclose(discounted_returns([1.0, -2.0, 4.0], 0.0), [1.0, -2.0, 4.0])


def test_discounted_returns_gamma_one_are_reward_to_go_sums():
    # 0 + 0 + 1 = 1; 0 + 1 = 1; 1
    np.testing.assert_allclose(discounted_returns([0.0, 0.0, 1.0], 1.0), [1.0, 1.0, 1.0])
    np.testing.assert_allclose(discounted_returns([1.0, 2.0, 3.0], 1.0), [6.0, 5.0, 3.0])


def test_discounted_returns_single_turn_and_empty():
    np.testing.assert_allclose(discounted_returns([0.7], 0.9), [0.7])
    assert discounted_returns([], 0.9).shape == (0,)


def test_discounted_returns_rejects_gamma_outside_unit_interval():
    with pytest.raises(ValueError, match="gamma"):
        discounted_returns([1.0], 1.5)


# -- ReBN ---------------------------------------------------------------------------------------


def test_return_batch_normalize_on_a_small_batch():
    # mean = 2, population std = sqrt(((1-2)^2 + 0 + (3-2)^2) / 3) = sqrt(2/3) = 0.816496...
    out = return_batch_normalize([1.0, 2.0, 3.0], eps=0.0)
    s = math.sqrt(2.0 / 3.0)
    np.testing.assert_allclose(out, [-1.0 / s, 0.0, 1.0 / s])
    np.testing.assert_allclose(out, [-1.224744871, 0.0, 1.224744871], rtol=1e-8)


def test_return_batch_normalize_pools_turns_of_different_episodes():
    # Episode A returns (gamma=1) [1, 1], episode B [0]: batch [1, 1, 0], mean 2/3,
    # std = sqrt((2*(1/3)^2 + (2/3)^2) / 3) = sqrt(2/9) = 0.471404...
    batch = np.concatenate([discounted_returns([0.0, 1.0], 1.0), discounted_returns([0.0], 1.0)])
    out = return_batch_normalize(batch, eps=0.0)
    s = math.sqrt(2.0 / 9.0)
    np.testing.assert_allclose(out, [(1 / 3) / s, (1 / 3) / s, -(2 / 3) / s])
    np.testing.assert_allclose(out, [0.70710678, 0.70710678, -1.41421356], rtol=1e-7)


def test_return_batch_normalize_eps_is_added_to_the_std():
    # [0, 2]: mean 1, std 1 -> (+-1) / (1 + 1) with eps = 1
    np.testing.assert_allclose(return_batch_normalize([0.0, 2.0], eps=1.0), [-0.5, 0.5])


def test_return_batch_normalize_without_scale_only_subtracts_the_mean():
    np.testing.assert_allclose(return_batch_normalize([1.0, 2.0, 6.0], scale=False), [-2.0, -1.0, 3.0])
    np.testing.assert_array_equal(return_batch_normalize([0.5, 0.5], scale=False), [0.0, 0.0])


def test_return_batch_normalize_single_transition_is_zero():
    np.testing.assert_array_equal(return_batch_normalize([5.0]), [0.0])


def test_return_batch_normalize_all_equal_returns_are_zero():
    np.testing.assert_array_equal(return_batch_normalize([0.1, 0.1, 0.1]), [0.0, 0.0, 0.0])


# -- GRPO ---------------------------------------------------------------------------------------


def test_grpo_advantages_normalize_within_each_group():
    # group "a": [1, 0, 0, 1] mean 0.5, sample std sqrt(4*0.25/3) = 0.57735 -> +-0.866025
    # group "b": [2, 4] mean 3, sample std sqrt(2) -> -+0.707107
    returns = [1.0, 2.0, 0.0, 0.0, 4.0, 1.0]
    groups = ["a", "b", "a", "a", "b", "a"]
    out = grpo_advantages(returns, groups, eps=0.0)
    a = 0.5 / math.sqrt(1.0 / 3.0)
    b = 1.0 / math.sqrt(2.0)
    np.testing.assert_allclose(out, [a, -b, -a, -a, b, a])
    np.testing.assert_allclose(out[:2], [0.8660254, -0.70710678], rtol=1e-7)


def test_grpo_advantages_without_scaling_are_centered_returns():
    np.testing.assert_allclose(grpo_advantages([1.0, 3.0, 10.0], [0, 0, 1], scale=False), [-1.0, 1.0, 0.0])


def test_grpo_advantages_degenerate_groups_are_zero():
    # a group of one, and a group whose returns are all equal
    out = grpo_advantages([3.0, 0.5, 0.5, 0.5], [0, 1, 1, 1])
    np.testing.assert_array_equal(out, [0.0, 0.0, 0.0, 0.0])


def test_grpo_advantages_need_one_group_id_per_return():
    with pytest.raises(ValueError, match="group id"):
        grpo_advantages([1.0, 2.0], [0])


# -- turn-level GAE -----------------------------------------------------------------------------


def test_turn_level_gae_small_example():
    # r = [0, 1], V = [0.5, 0.8], gamma = 0.9, lam = 0.5, terminal (last_value 0)
    # delta_1 = 1 + 0 - 0.8 = 0.2;          A_1 = 0.2
    # delta_0 = 0 + 0.9*0.8 - 0.5 = 0.22;   A_0 = 0.22 + 0.9*0.5*0.2 = 0.31
    adv, ret = turn_level_gae([0.0, 1.0], [0.5, 0.8], gamma=0.9, lam=0.5)
    np.testing.assert_allclose(adv, [0.31, 0.2])
    np.testing.assert_allclose(ret, [0.81, 1.0])


def test_turn_level_gae_bootstraps_from_last_value_when_cut():
    # one turn: delta = 0 + 1.0*2.0 - 1.0 = 1.0
    adv, ret = turn_level_gae([0.0], [1.0], gamma=1.0, lam=1.0, last_value=2.0)
    np.testing.assert_allclose(adv, [1.0])
    np.testing.assert_allclose(ret, [2.0])


def test_turn_level_gae_lambda_one_gives_returns_minus_values():
    rewards, values = [1.0, 0.0, 2.0], [0.3, -0.2, 0.9]
    adv, ret = turn_level_gae(rewards, values, gamma=0.8, lam=1.0)
    np.testing.assert_allclose(ret, discounted_returns(rewards, 0.8))
    np.testing.assert_allclose(adv, discounted_returns(rewards, 0.8) - np.array(values))


def test_turn_level_gae_gamma_zero_is_reward_minus_value():
    adv, _ = turn_level_gae([1.0, 2.0], [0.5, 0.5], gamma=0.0, lam=0.9)
    np.testing.assert_allclose(adv, [0.5, 1.5])


# -- turn to token ------------------------------------------------------------------------------


def test_turn_to_token_advantages_fill_each_span_only():
    out = turn_to_token_advantages([2.0, -1.0], [(1, 3), (5, 6)], length=7)
    np.testing.assert_array_equal(out, [0.0, 2.0, 2.0, 0.0, 0.0, -1.0, 0.0])


def test_turn_to_token_advantages_reject_spans_outside_the_sequence():
    with pytest.raises(ValueError, match="does not fit"):
        turn_to_token_advantages([1.0], [(2, 9)], length=4)


# -- a batch's turn returns to token advantages ----------------------------------------------------

# Two episodes: returns [3, 1] on tokens 0-1 and 3, and [5] on tokens 1-2, in rows of 5 tokens.
BATCH_RETURNS, BATCH_SPANS = [[3.0, 1.0], [5.0]], [[(0, 2), (3, 4)], [(1, 3)]]


def test_batch_turn_returns_are_rebn_normalized_over_all_turns_and_placed_on_their_tokens():
    # mean 3, population std sqrt(8/3): the returns become 0, -sqrt(1.5), sqrt(1.5)
    out = turn_returns_to_token_advantages(BATCH_RETURNS, BATCH_SPANS, 5)
    r = math.sqrt(1.5)
    np.testing.assert_allclose(out, [[0.0, 0.0, 0.0, -r, 0.0], [0.0, r, r, 0.0, 0.0]])
    assert out.shape == (2, 5) and out.dtype == np.float64


def test_batch_turn_returns_without_scale_subtract_the_mean_and_without_normalize_stay_as_they_are():
    np.testing.assert_array_equal(
        turn_returns_to_token_advantages(BATCH_RETURNS, BATCH_SPANS, 5, scale=False), [[0, 0, 0, -2, 0], [0, 2, 2, 0, 0]]
    )
    np.testing.assert_array_equal(
        turn_returns_to_token_advantages(BATCH_RETURNS, BATCH_SPANS, 5, normalize=False), [[3, 3, 0, 1, 0], [0, 5, 5, 0, 0]]
    )


def test_batch_turn_returns_normalize_over_a_population_split_across_processes():
    # This batch is process 1's; process 0 had one turn, return 7. Population mean 4, std sqrt(5).
    out = turn_returns_to_token_advantages(BATCH_RETURNS, BATCH_SPANS, 5, population=[7.0, 3.0, 1.0, 5.0], offset=1)
    r = 1 / math.sqrt(5)
    np.testing.assert_allclose(out, [[-r, -r, 0.0, -3 * r, 0.0], [0.0, r, r, 0.0, 0.0]])
    expected = return_batch_normalize([7.0, 3.0, 1.0, 5.0])[1:]
    assert out[0, 0] == expected[0] and out[0, 3] == expected[1] and out[1, 1] == expected[2]


def test_batch_turn_returns_refuse_spans_or_offsets_that_do_not_match():
    with pytest.raises(ValueError, match="need one of each per episode"):
        turn_returns_to_token_advantages(BATCH_RETURNS, BATCH_SPANS[:1], 5)
    with pytest.raises(ValueError, match="do not fit at offset 2"):
        turn_returns_to_token_advantages(BATCH_RETURNS, BATCH_SPANS, 5, population=[7.0, 3.0, 1.0, 5.0], offset=2)
    with pytest.raises(ValueError, match="need one per turn"):
        turn_returns_to_token_advantages([[3.0]], [[(0, 1), (2, 3)]], 5)
