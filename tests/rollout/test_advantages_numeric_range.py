"""Advantage helpers stay right over the whole float64 range and take only real numbers.

Returns so small that their std underflowed to 0 divided by 0 (with ``eps=0``) into inf and NaN; returns so large
that their mean or their squares overflowed gave NaN or wrong zeros; discounted sums past the largest float came
back as inf. Text, complex and bool values were parsed or cut down to floats, and a gamma of the wrong type fell
through as a bare TypeError.
"""

from __future__ import annotations

import numpy as np
import pytest

from gem_core.errors import InvalidArgument
from gem_core.rollout.advantages import check_finite, discounted_returns, grpo_advantages, return_batch_normalize, same_state_advantages, turn_level_gae

HALF_SQRT2 = np.sqrt(0.5)  # (x - mean) / std of two values, sample std (ddof=1)
THREE = np.sqrt(1.5)  # [-1, 0, 1] over its population std sqrt(2/3)


@pytest.mark.parametrize(
    "returns, expected",
    [([0.0, 1e-200], [-1.0, 1.0]), ([1e-170, 2e-170, 3e-170], [-THREE, 0.0, THREE]), ([5e-324, 1e-323], [-1.0, 1.0])],
)
def test_rebn_with_eps_0_normalizes_returns_whose_std_underflows(returns, expected):
    np.testing.assert_allclose(return_batch_normalize(returns, eps=0.0), expected, rtol=1e-12)


def test_grpo_with_eps_0_normalizes_returns_whose_std_underflows():
    np.testing.assert_allclose(grpo_advantages([0.0, 1e-200, 1.0, 3.0], [0, 0, 1, 1], eps=0.0), [-HALF_SQRT2, HALF_SQRT2] * 2, rtol=1e-12)


@pytest.mark.parametrize(
    "returns, expected",
    [([1.7e308, 1.6e308], [1.0, -1.0]), ([1e308, -1e308], [1.0, -1.0]), ([-1.7e308, 1.7e308, 1.7e308], [-np.sqrt(2), 1 / np.sqrt(2), 1 / np.sqrt(2)])],
)
def test_rebn_of_returns_near_the_float_limit_is_not_nan_or_zero(returns, expected):
    np.testing.assert_allclose(return_batch_normalize(returns), expected, rtol=1e-12)


def test_rebn_baseline_only_of_large_returns_is_exact_or_refused_when_it_overflows():
    np.testing.assert_allclose(return_batch_normalize([1.7e308, 1.6e308], scale=False), [5e306, -5e306], rtol=1e-12)
    with pytest.raises(InvalidArgument, match=r"^returns .*overflow"):  # 1.7e308 - (-5.7e307) is past the largest float
        return_batch_normalize([1.7e308, -1.7e308, -1.7e308], scale=False)


def test_grpo_of_returns_near_the_float_limit_is_not_nan():
    np.testing.assert_allclose(grpo_advantages([1.7e308, 1.6e308, 1e308, -1e308], [0, 0, 1, 1]), [HALF_SQRT2, -HALF_SQRT2] * 2, rtol=1e-12)
    with pytest.raises(InvalidArgument, match=r"^returns .*overflow"):
        grpo_advantages([1.7e308, -1.7e308, -1.7e308], [0, 0, 0], scale=False)


def test_discounted_returns_past_the_largest_float_are_refused_not_inf():
    with pytest.raises(InvalidArgument, match=r"^rewards .*overflow"):
        discounted_returns([1e308, 1e308], 1.0)
    np.testing.assert_allclose(discounted_returns([1e308, 1e308], 0.5), [1.5e308, 1e308])  # large, still a float


def test_turn_level_gae_past_the_largest_float_is_refused_not_inf():
    with pytest.raises(InvalidArgument, match=r"^rewards .*overflow"):
        turn_level_gae([1e308, 1e308], [0.0, 0.0], 1.0, 1.0)
    with pytest.raises(InvalidArgument, match=r"^rewards .*overflow"):  # lam 0: only the delta of turn 0 overflows
        turn_level_gae([1e308, 1e308], [-1e308, 0.0], 1.0, 0.0)
    advantages, returns = turn_level_gae([1e308, 1e308], [0.0, 0.0], 0.5, 1.0)
    np.testing.assert_allclose(advantages, [1.5e308, 1e308])
    np.testing.assert_allclose(returns, advantages)


@pytest.mark.parametrize(
    "values, what",
    [(["1.0", "2e3"], "text"), (np.array([1 + 5j, 2 + 0j]), "complex"), (np.array([True, False]), "bool"), ([None, "1"], "str"),
     ([True, None], "bool")],
)
def test_check_finite_refuses_values_that_are_not_real_numbers(values, what):
    with pytest.raises(InvalidArgument, match=rf"^rewards must be finite numbers, got .*{what}"):
        check_finite("rewards", values, ndim=1)


def test_check_finite_still_takes_ints_floats_none_marks_and_big_ints():
    np.testing.assert_array_equal(check_finite("r", [1, 2.5, np.float32(0.5), 2**70]), [1.0, 2.5, 0.5, 2.0**70])
    with pytest.raises(InvalidArgument, match=r"^r\[1\] is None"):
        check_finite("r", [1.0, None])
    with pytest.raises(InvalidArgument, match=r"^r must be finite numbers"):  # an int past the float range
        check_finite("r", [10**400])


def test_advantage_helpers_refuse_text_and_complex_returns():
    with pytest.raises(InvalidArgument, match=r"^returns must be finite numbers"):
        return_batch_normalize(["1", "2"])
    with pytest.raises(InvalidArgument, match=r"^rewards must be finite numbers"):
        discounted_returns(np.array([1 + 5j, 2 + 0j]), 0.5)


@pytest.mark.parametrize("eps", ["1e-4", True, 1j])
def test_an_eps_that_is_not_a_real_number_is_refused(eps):
    with pytest.raises(InvalidArgument, match=r"^eps must be a finite number"):
        grpo_advantages([1.0, 2.0], [0, 0], eps=eps)


@pytest.mark.parametrize("gamma", [None, "0.9", np.array([0.5, 0.6]), True, 1.5, float("nan")])
def test_a_gamma_or_lam_that_is_not_a_number_in_0_1_is_refused_naming_it(gamma):
    with pytest.raises(InvalidArgument, match=r"^gamma must be a number in \[0, 1\], got "):
        discounted_returns([1.0], gamma)
    with pytest.raises(InvalidArgument, match=r"^lam must be a number in \[0, 1\], got "):
        turn_level_gae([1.0], [0.0], 0.9, gamma)
    with pytest.raises(InvalidArgument, match=r"^gamma must be a number in \[0, 1\], got "):  # even with no branch
        same_state_advantages([], 0, gamma)


def test_gamma_as_a_numpy_number_still_works():
    np.testing.assert_allclose(discounted_returns([1.0, 1.0], np.float32(0.5)), [1.5, 1.0])
    np.testing.assert_allclose(discounted_returns([1.0, 1.0], np.array(0.5)), [1.5, 1.0])


@pytest.mark.parametrize("offset", [1.0, True, "1"], ids=["float", "bool", "text"])
def test_a_population_offset_that_is_not_a_whole_number_is_refused(offset):
    """A float offset raised a bare TypeError when slicing; True passed as 1."""
    from gem_core.rollout.advantages import turn_returns_to_token_advantages

    with pytest.raises(InvalidArgument, match="offset="):
        turn_returns_to_token_advantages([[1.0]], [[(0, 1)]], 2, population=[0.0, 1.0], offset=offset)
