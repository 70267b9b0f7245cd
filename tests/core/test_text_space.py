"""TextSpace.sample draws what gymnasium's Text.sample draws (it only joins the characters faster)."""

from __future__ import annotations

import pytest
from gymnasium import spaces

from gem_core.env import TextSpace


@pytest.mark.parametrize("min_length, max_length", [(0, 1_000_000), (0, 1), (5, 5), (3, 40)])
def test_sample_gives_gymnasiums_strings_call_for_call(min_length, max_length):
    ours = TextSpace(max_length, min_length=min_length, seed=11)
    theirs = spaces.Text(max_length, min_length=min_length, charset="".join(ours.character_list), seed=11)
    for _ in range(4):  # consecutive calls: the RNG is left where gymnasium leaves it
        sample = ours.sample()
        assert type(sample) is str and sample == theirs.sample()
        assert ours.contains(sample) and set(sample) <= set(ours.character_set)


def test_a_mask_is_sampled_by_gymnasium():
    import numpy as np

    ours = TextSpace(8, seed=3)
    only_a = np.zeros(len(ours.character_set), dtype=np.int8)
    only_a[ours.character_index("a")] = 1
    assert set(ours.sample(mask=(6, only_a))) == {"a"} and len(ours.sample(mask=(6, only_a))) == 6
