"""math grading of numbers written exactly: no float tolerance, and no two numbers merged by deleting a space."""

from __future__ import annotations

import pytest

pytest.importorskip("math_verify")

from gem_core.envs.math.grading import exact_verdict, grade, grade_inline, normalized_equal


def _verdicts(prediction: str, gold: str) -> set[bool]:
    """Every grading entry point's verdict (``grade`` with a limit decides exact numbers without a worker)."""
    return {
        normalized_equal(prediction, gold),
        grade_inline(prediction, gold),
        grade(prediction, gold, timeout=None).correct,
    }


@pytest.mark.parametrize(
    ("prediction", "gold", "expected"),
    [
        ("12345678901234567890.5", "12345678901234567890", False),  # within 1e-9 relative as floats
        ("123456789012345678.9", "123456789012345679", False),
        ("0", "0.0000000001", False),  # within 1e-9 absolute below 1
        ("0.0000000005", "0", False),
        ("1.0000000001", "1", False),
        ("12345678901234567890.0", "12345678901234567890", True),
        ("0.5", "\\frac{1}{2}", True),
        ("1.50", "3/2", True),
        ("-0.0", "0", True),
        ("1e3", "1000", True),
        ("2.5E-3", "\\frac{1}{400}", True),
    ],
)
def test_exact_numbers_are_compared_without_tolerance(prediction, gold, expected):
    assert exact_verdict(prediction, gold) is expected
    assert _verdicts(prediction, gold) == {expected}
    assert grade(prediction, gold, timeout=5.0).correct is expected


def test_a_decimal_rounding_a_number_no_decimal_writes_out_is_left_to_math_verify():
    """0.3333333333 for 1/3 is a rounding, not a wrong number: exact arithmetic leaves it to math-verify (and to the
    1e-9 tolerance without it), as before exact decimals were compared exactly."""
    assert exact_verdict("0.3333333333", "\\frac{1}{3}") is None
    assert exact_verdict("\\frac{2}{3}", "0.6666666667") is None
    assert _verdicts("0.3333333333", "\\frac{1}{3}") == {True}
    assert not normalized_equal("0.33", "\\frac{1}{3}")


def test_an_exponent_too_large_to_expand_is_not_expanded():
    assert exact_verdict("1e999999999", "1") is None
    assert not grade_inline("1e999999999", "1")


@pytest.mark.parametrize(
    ("prediction", "gold"),
    [
        ("2 1/2", "21/2"),  # a mixed number, 2.5, is not 10.5
        ("21/2", "2 1/2"),
        ("3 1/3", "31/3"),
        ("1 2", "12"),
        ("12", "1 2"),
        ("1\\,2", "12"),
        ("1\\quad 2", "12"),
    ],
)
def test_a_space_never_joins_two_numbers(prediction, gold):
    assert _verdicts(prediction, gold) == {False}


@pytest.mark.parametrize(
    ("prediction", "gold"),
    [
        ("2 1/2", "\\frac{5}{2}"),
        ("2 1/2", "2.5"),
        ("3 1/3", "10/3"),
        ("-2 1/2", "-2.5"),
        ("2\\ \\frac{1}{2}", "5/2"),
        ("2\\frac{1}{2}", "2.5"),  # as math-verify reads it
    ],
)
def test_a_whole_number_then_a_proper_fraction_is_a_mixed_number(prediction, gold):
    assert exact_verdict(prediction, gold) is True
    assert _verdicts(prediction, gold) == {True}


@pytest.mark.parametrize(
    ("prediction", "gold", "expected"),
    [
        ("1\\,000", "1000", True),  # spaces that group digits by three are thousands separators
        ("1 000 000", "1000000", True),
        ("10,\\!000", "10000", True),
        ("x + 1", "x+1", True),  # spaces around operators and LaTeX spacing still do not count
        ("\\text{ Paris }", "paris", True),
        ("2 \\times 3", "2\\times3", True),
        ("12 34", "1234", False),  # not groups of three
    ],
)
def test_spaces_that_join_no_numbers_are_ignored(prediction, gold, expected):
    assert normalized_equal(prediction, gold) is expected


@pytest.mark.parametrize(
    ("prediction", "gold", "expected"),
    [
        ("50\\%", "0.5", True),  # a percentage on one side is either reading, as math-verify has it
        ("0.5", "50\\%", True),
        ("12.5\\%", "12.5", True),
        ("12.5%", "\\frac{1}{8}", True),
        ("50\\%", "50\\%", True),
        ("50\\%", "0.5\\%", False),  # on both sides: the same reading
        ("50\\%", "0.49", False),
        ("50\\%", "49", False),
    ],
)
def test_a_percentage_against_a_number_is_compared_exactly_either_way(prediction, gold, expected):
    assert exact_verdict(prediction, gold) is expected
    assert _verdicts(prediction, gold) == {expected}
