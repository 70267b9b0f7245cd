"""The episode engine on ``swe:Sample-v0`` with a scripted policy: the path every adapter's rollout takes.
Tool calls go in as sampled tokens, the grader's reward lands on the last policy token."""

from __future__ import annotations

import json

import pytest

from gem_core import make
from gem_core.rollout.runner import run_episode
from gem_core.testing import ScriptedPolicy
from gem_core.tools.sandbox import available_modes
from ci_guard import module_needs

_bubblewrap = module_needs("bwrap" in available_modes(), "the SWE grader runs in the bubblewrap sandbox")

FIX = {"path": "gemstats/__init__.py", "old": "    return (ordered[middle] + ordered[middle + 1]) / 2",
       "new": "    return (ordered[middle - 1] + ordered[middle]) / 2"}


def tool_call(name: str, **arguments) -> str:
    return f"<tool_call>{json.dumps({'name': name, 'arguments': arguments})}</tool_call>"


@pytest.mark.parametrize(("actions", "expected"), [
    ([tool_call("view", path=FIX["path"]), tool_call("replace", **FIX), tool_call("submit")], 1.0),
    ([tool_call("run_tests"), tool_call("submit")], 0.0),
])
async def test_a_scripted_swe_episode_is_rewarded_by_the_grader(tiny_tokenizer, actions, expected):
    env = make("swe:Sample-v0")
    try:
        trajectory = await run_episode(env, ScriptedPolicy(tiny_tokenizer, actions), tiny_tokenizer, seed=0)
    finally:
        env.close()
    assert trajectory.rewards == [0.0] * (len(actions) - 1) + [expected]
    assert trajectory.episode_return == expected
    last_policy_token = max(i for i, m in enumerate(trajectory.loss_mask) if m)
    assert trajectory.token_rewards[last_policy_token] == expected
