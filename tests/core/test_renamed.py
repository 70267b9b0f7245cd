"""gem_core/renamed.py: an old argument name keeps working, says the new one, and never hides a clash."""

import pytest

from gem_core.renamed import renamed_argument


def test_the_new_name_passes_through_silently(recwarn):
    assert renamed_argument("Loop", "max_tokens_per_turn", "max_new_tokens", None, 64, new_default=256) == 64
    assert not recwarn.list


def test_the_old_name_is_used_with_a_warning_naming_the_new_one():
    with pytest.warns(FutureWarning, match="max_tokens_per_turn is renamed max_new_tokens"):
        assert renamed_argument("Loop", "max_tokens_per_turn", "max_new_tokens", 32, 256, new_default=256) == 32


def test_both_names_at_once_is_an_error_naming_both():
    with pytest.raises(TypeError, match="max_tokens_per_turn=32 and max_new_tokens=64"):
        renamed_argument("Loop", "max_tokens_per_turn", "max_new_tokens", 32, 64, new_default=256)
