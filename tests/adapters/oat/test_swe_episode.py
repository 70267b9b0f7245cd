"""oat's own ``PPOMultiTurnActor.step`` (GPU modules stubbed as in ``test_actor.py``) on ``swe:Sample-v0``
with a scripted policy behind the stand-in ``vllm.LLM``: the tool calls reach the SWE env and the grader's
reward (the repository's tests in the sandbox) is the last transition's reward."""

from __future__ import annotations

import json

import pytest

from gem_core.testing import ScriptedPolicy, make_tokenizer
from gem_core.tools.sandbox import available_modes
from test_actor import make_actor  # oat's real actor class with the stand-ins ActorBase.init would set up
from ci_guard import module_needs

_bubblewrap = module_needs("bwrap" in available_modes(), "the SWE grader runs in the bubblewrap sandbox")

FIX = {"path": "gemstats/__init__.py", "old": "    return (ordered[middle] + ordered[middle + 1]) / 2",
       "new": "    return (ordered[middle - 1] + ordered[middle]) / 2"}


def tool_call(name: str, **arguments) -> str:
    return f"<tool_call>{json.dumps({'name': name, 'arguments': arguments})}</tool_call>"


@pytest.mark.parametrize(("actions", "expected"), [
    ([tool_call("view", path=FIX["path"]), tool_call("replace", **FIX), tool_call("submit")], 1.0),
    ([tool_call("submit")], 0.0),
])
def test_oats_step_plays_a_scripted_swe_episode_rewarded_by_the_grader(actions, expected):
    tokenizer = make_tokenizer("chatml")
    # One episode; the issue text and the repository layout make a long first prompt, a replace call a long turn.
    actor = make_actor(ScriptedPolicy(tokenizer, actions), tokenizer, env_id="swe:Sample-v0", num_env=1,
                       rollout_batch_size_per_device=1, max_total_tokens=8192)
    actor.sampling_params.max_tokens = 512
    (episode,) = actor.step()

    assert [t.rewards for t in episode] == pytest.approx([0.0] * (len(actions) - 1) + [expected])
    assert [t.done for t in episode] == [False] * (len(actions) - 1) + [True]
    assert all(action in tokenizer.decode(t.response_ids) for action, t in zip(actions, episode)), "each tool call is a turn"
    assert episode[0].info["actor/gem/return"] == pytest.approx(expected)
