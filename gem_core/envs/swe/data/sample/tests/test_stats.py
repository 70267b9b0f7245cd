import pytest

from gemstats import clamp, mean, median


def test_mean():
    assert mean([1, 2, 3, 4]) == 2.5


def test_mean_of_nothing_is_an_error():
    with pytest.raises(ValueError):
        mean([])


@pytest.mark.parametrize(("values", "expected"), [([5, 1, 3], 3), ([7], 7), ([4, 1, 3, 2], 2.5), ([10, 2], 6)])
def test_median(values, expected):
    assert median(values) == expected


def test_clamp():
    assert (clamp(5, 0, 3), clamp(-1, 0, 3), clamp(2, 0, 3)) == (3, 0, 2)
