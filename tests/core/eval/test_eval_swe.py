"""``gem eval`` on ``swe:Sample-v0`` with a scripted model behind the OpenAI-compatible test server: a
model that applies the fix and submits solves every episode; one that submits at once solves none."""

from __future__ import annotations

import json

import pytest
from openai_test_server import OpenAITestServer

from gem_core.eval.cli import main
from gem_core.tools.sandbox import available_modes
from ci_guard import module_needs

_bubblewrap = module_needs("bwrap" in available_modes(), "the SWE grader runs in the bubblewrap sandbox")

FIX = {"path": "gemstats/__init__.py", "old": "    return (ordered[middle] + ordered[middle + 1]) / 2",
       "new": "    return (ordered[middle - 1] + ordered[middle]) / 2"}


def tool_call(name: str, **arguments) -> str:
    return f"<tool_call>{json.dumps({'name': name, 'arguments': arguments})}</tool_call>"


def fixer(messages):
    """Look at the file, apply the fix, then submit."""
    turns = sum(message["role"] == "assistant" for message in messages)
    return [tool_call("view", path=FIX["path"]), tool_call("replace", **FIX), tool_call("submit")][min(turns, 2)]


@pytest.mark.parametrize(("respond", "expected"), [(fixer, 1.0), (lambda messages: tool_call("submit"), 0.0)])
def test_gem_eval_scores_swe_episodes_with_the_real_grader(tmp_path, respond, expected):
    with OpenAITestServer(respond=respond) as server:
        code = main(["--model", "m", "--base-url", server.base_url, "--env", "swe:Sample-v0", "--episodes", "2",
                     "--concurrency", "1", "--no-progress", "--no-plots", "--out", str(tmp_path)])
    assert code == 0
    summary = json.loads((tmp_path / "report.json").read_text())["envs"]["swe:Sample-v0"]["summary"]
    assert summary["episodes_completed"] == 2 and summary["episodes_failed"] == 0
    assert summary["success_rate"] == expected and summary["mean_return"] == pytest.approx(expected)
