"""OpenRLHF's own ``MultiTurnAgentExecutor.execute``, through the shipped GEM agent file, on ``swe:Sample-v0``
with a scripted policy behind the vLLM-like engine of ``conftest.py``: the tool calls reach the SWE env and
the grader's reward (the repository's tests in the sandbox) is OpenRLHF's reward."""

from __future__ import annotations

import importlib.util
import json

import pytest

pytest.importorskip("openrlhf.utils.agent", reason="needs openrlhf==0.11.2 (nox -s openrlhf)")

from gem_adapters.files import shipped_path  # noqa: E402
from gem_core.rows.label import EpisodeLabel  # noqa: E402
from gem_core.testing import ScriptedPolicy  # noqa: E402
from gem_core.tools.sandbox import available_modes  # noqa: E402
from ci_guard import module_needs

_bubblewrap = module_needs("bwrap" in available_modes(), "the SWE grader runs in the bubblewrap sandbox")

FIX = {"path": "gemstats/__init__.py", "old": "    return (ordered[middle] + ordered[middle + 1]) / 2",
       "new": "    return (ordered[middle - 1] + ordered[middle]) / 2"}
MAX_LENGTH = 8192  # the issue text and the repository layout make a long first prompt


def tool_call(name: str, **arguments) -> str:
    return f"<tool_call>{json.dumps({'name': name, 'arguments': arguments})}</tool_call>"


def agent_executor():
    """``AgentExecutor()`` from the shipped agent file, loaded as OpenRLHF's vLLM engine loads it."""
    spec = importlib.util.spec_from_file_location("agent_module", shipped_path("openrlhf-agent"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.AgentExecutor()


@pytest.mark.parametrize(("actions", "expected"), [
    ([tool_call("view", path=FIX["path"]), tool_call("replace", **FIX), tool_call("submit")], 1.0),
    ([tool_call("submit")], 0.0),
])
async def test_the_executor_plays_a_scripted_swe_episode_rewarded_by_the_grader(
    tokenizer, engine_for, vllm_sampling_params, open_envs, actions, expected
):
    label = EpisodeLabel("swe:Sample-v0", 0).to_json()
    engine = engine_for(ScriptedPolicy(tokenizer, actions))
    result = await agent_executor().execute("ignored prompt", label, vllm_sampling_params(), MAX_LENGTH, tokenizer, engine)

    assert result["reward"] == pytest.approx(expected)
    assert result["scores"] == pytest.approx(expected)
    assert result["extra_logs"]["gem/num_turns"] == len(actions)
    assert len(result["action_ranges"]) == len(actions)
    assert not result["truncated"]
    sampled = [tokenizer.decode(result["observation_tokens"][start:end]) for start, end in result["action_ranges"]]
    assert all(action in text for action, text in zip(actions, sampled)), "each tool call is a sampled turn"
    assert open_envs.open == 0, "the finished episode closed its env (and its sandbox)"
