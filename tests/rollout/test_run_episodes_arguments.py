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
