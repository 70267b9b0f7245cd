"""run_episodes refuses a keyword run_episode does not take before any episode starts, and a sampling setting
given beside ``sampling`` (``max_new_tokens=8``, a new user's first try) is named with where it goes."""

from __future__ import annotations

import pytest

from gem_core.errors import GemError
from gem_core.rollout import SamplingParams, run_episodes
from gem_core.testing import ScriptedPolicy


async def test_a_sampling_setting_given_to_run_episodes_names_sampling_params(tiny_tokenizer):
    policy = ScriptedPolicy(tiny_tokenizer, ["\\boxed{5}"])
    with pytest.raises(TypeError, match=r"max_new_tokens=8.*sampling=SamplingParams\(max_new_tokens=8\)") as caught:
        await run_episodes("game:GuessTheNumber-v0", policy, tiny_tokenizer, [0, 1], max_new_tokens=8)
    assert isinstance(caught.value, GemError)
    assert policy.calls == 0  # refused before any episode ran


async def test_an_unknown_keyword_lists_what_run_episodes_passes_on(tiny_tokenizer):
    policy = ScriptedPolicy(tiny_tokenizer, ["\\boxed{5}"])
    with pytest.raises(GemError, match=r"unexpected keyword 'max_turn'.*max_turns"):
        await run_episodes("game:GuessTheNumber-v0", policy, tiny_tokenizer, [0], max_turn=3)


async def test_run_episodes_still_takes_run_episode_keywords(tiny_tokenizer):
    policy = ScriptedPolicy(tiny_tokenizer, ["\\boxed{5}"])
    trajectories = await run_episodes("game:GuessTheNumber-v0", policy, tiny_tokenizer, [0, 1], max_turns=2,
                                      sampling=SamplingParams(max_new_tokens=8))
    assert [t.seed for t in trajectories] == [0, 1] and all(t.num_turns <= 2 for t in trajectories)


@pytest.mark.parametrize("concurrency", [1.5, True, "2", None, 0])
async def test_a_concurrency_that_is_not_a_positive_whole_number_is_refused_naming_it(tiny_tokenizer, concurrency):
    """1.5 and True were taken; "2" and None failed with a bare comparison TypeError."""
    policy = ScriptedPolicy(tiny_tokenizer, ["\\boxed{5}"])
    with pytest.raises(GemError, match="concurrency"):
        await run_episodes("game:GuessTheNumber-v0", policy, tiny_tokenizer, [0], concurrency=concurrency)
    assert policy.calls == 0


@pytest.mark.parametrize("seed", [-1, "x", 1.5, True])
async def test_a_seed_gymnasium_refuses_is_refused_before_any_episode_runs(tiny_tokenizer, seed):
    """gymnasium's own error came out of the first reset, not a GemError, after the other episodes had started."""
    policy = ScriptedPolicy(tiny_tokenizer, ["\\boxed{5}"])
    with pytest.raises(GemError, match=r"seeds\[1\]"):
        await run_episodes("game:GuessTheNumber-v0", policy, tiny_tokenizer, [0, seed])
    assert policy.calls == 0


@pytest.mark.parametrize("field, value", [("max_new_tokens", -3), ("max_new_tokens", 1.5), ("max_new_tokens", True), ("temperature", -1.0),
                                          ("temperature", float("nan")), ("top_p", 1.5), ("top_p", "0.9"), ("top_k", -2), ("top_k", 2.5)])
def test_sampling_params_out_of_range_are_refused_naming_the_field(field, value):
    """max_new_tokens=-3 and temperature=-1 were taken and played; 1.5 failed deep in a slice."""
    with pytest.raises(GemError, match=f"SamplingParams.{field}"):
        SamplingParams(**{field: value})


def test_sampling_params_take_numpy_numbers_and_the_runner_s_zero_budget():
    import numpy as np

    sampling = SamplingParams(max_new_tokens=np.int64(8), temperature=np.float32(0.5), top_p=np.float64(0.9), top_k=np.int32(5))
    assert (sampling.max_new_tokens, sampling.top_k) == (8, 5) and type(sampling.max_new_tokens) is int
    assert SamplingParams(max_new_tokens=0).max_new_tokens == 0  # a turn with no room left (generation_budget)
