"""verl's agent loop (GemAgentLoop, built as verl's AgentLoopWorker builds it) on ``swe:Sample-v0`` with a
scripted policy behind a verl-like server manager: the grader's reward lands on the last sampled token."""

from __future__ import annotations

import json

import numpy as np
import pytest

pytest.importorskip("verl")

from gem_core.testing import ScriptedPolicy  # noqa: E402
from gem_core.tools.sandbox import available_modes  # noqa: E402
from ci_guard import module_needs

_bubblewrap = module_needs("bwrap" in available_modes(), "the SWE grader runs in the bubblewrap sandbox")

FIX = {"path": "gemstats/__init__.py", "old": "    return (ordered[middle] + ordered[middle + 1]) / 2",
       "new": "    return (ordered[middle - 1] + ordered[middle]) / 2"}


def tool_call(name: str, **arguments) -> str:
    return f"<tool_call>{json.dumps({'name': name, 'arguments': arguments})}</tool_call>"


@pytest.mark.parametrize(("actions", "expected"), [
    ([tool_call("replace", **FIX), tool_call("submit")], 1.0),
    ([tool_call("submit")], 0.0),
])
async def test_the_agent_loop_plays_a_scripted_swe_episode(
    make_trainer_config, make_agent_loop, sampling_params, server_for, tiny_tokenizer, make_row, actions, expected
):
    config = make_trainer_config(prompt_length=4096, response_length=2048)  # the issue and the layout are long
    loop = make_agent_loop(server_for(ScriptedPolicy(tiny_tokenizer, actions)), config)
    out = await loop.run(sampling_params, **make_row("swe:Sample-v0", 0))
    assert out.reward_score == pytest.approx(expected)
    assert out.extra_fields["turn_scores"] == pytest.approx([0.0] * (len(actions) - 1) + [expected])
    rm_scores = out.as_dict()["rm_scores"].numpy()
    last_sampled = int(np.flatnonzero(np.asarray(out.response_mask))[-1])
    assert float(rm_scores[last_sampled]) == pytest.approx(expected)
