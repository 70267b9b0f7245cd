"""One rule per episode option, the same in every adapter's config and in EpisodeSession."""

from __future__ import annotations

import numpy as np
import pytest

from gem_core.rollout import EpisodeSession
from gem_core.rollout.options import check_episode_options


@pytest.mark.parametrize("key", ["max_turns", "max_new_tokens", "max_total_tokens", "max_response_tokens"])
@pytest.mark.parametrize("bad", [0, -1, 2.5, "3", True])
def test_counts_are_positive_whole_numbers(key, bad):
    with pytest.raises(ValueError, match=rf"^MyConfig: {key}={bad!r} must be a positive whole number"):
        check_episode_options("MyConfig", **{key: bad})


@pytest.mark.parametrize("key", ["max_turns", "max_new_tokens"])
@pytest.mark.parametrize("good", [None, 1, 64, np.int64(3)])
def test_counts_accept_none_and_any_whole_number_type(key, good):
    check_episode_options("MyConfig", **{key: good})


@pytest.mark.parametrize("key", ["gamma", "reward_gamma"])
@pytest.mark.parametrize("bad", [-0.1, 1.5, float("nan"), "0.9", None, True])
def test_a_discount_lies_in_0_1(key, bad):
    with pytest.raises(ValueError, match=rf"^MyConfig: {key}=.* must be a number in \[0, 1\]"):
        check_episode_options("MyConfig", **{key: bad})
    check_episode_options("MyConfig", **{key: 0.99})


def test_a_system_prompt_is_text():
    with pytest.raises(ValueError, match=r"^MyConfig: system_prompt=5 must be a str, or None"):
        check_episode_options("MyConfig", system_prompt=5)
    check_episode_options("MyConfig", system_prompt="Be brief.", max_turns=None)


def test_an_unknown_key_is_a_programming_error():
    with pytest.raises(TypeError, match="no rule for 'max_turn'"):
        check_episode_options("MyConfig", max_turn=3)


def test_the_session_checks_its_limits_by_the_same_rules(tiny_tokenizer, scripted_env):
    with pytest.raises(ValueError, match=r"^EpisodeSession: max_turns=2.5 must be a positive whole number"):
        EpisodeSession(scripted_env(rewards=[1.0]), tiny_tokenizer, max_turns=2.5)
    with pytest.raises(ValueError, match=r"^EpisodeSession: max_total_tokens=0 must be a positive whole number"):
        EpisodeSession(scripted_env(rewards=[1.0]), tiny_tokenizer, max_total_tokens=0)


@pytest.mark.parametrize("key", ["n_samples_per_prompt", "responses_per_prompt", "num_env"])
@pytest.mark.parametrize("bad", [0, -2, 1.5, None, "4"])
def test_episode_counts_are_positive_whole_numbers_and_never_none(key, bad):
    with pytest.raises(ValueError, match=rf"^MyConfig: {key}={bad!r} must be a positive whole number\.$"):
        check_episode_options("MyConfig", **{key: bad})
    check_episode_options("MyConfig", **{key: np.int64(8)})
