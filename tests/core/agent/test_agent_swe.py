"""swe_agent_program: a SWE episode label becomes the agent's repository and prompt, and the task's tests its reward."""

from __future__ import annotations

import asyncio
import json
import sys
import textwrap

import pytest

pytest.importorskip("uvicorn")

from gem_core.agent.episodes import run_agent_programs  # noqa: E402
from gem_core.agent.swe import swe_agent_program  # noqa: E402
from gem_core.envs.swe.pack import SweError  # noqa: E402
from gem_core.rows.label import EpisodeLabel  # noqa: E402
from gem_core.testing import ScriptedPolicy  # noqa: E402
from gem_core.tools.sandbox import available_modes  # noqa: E402
from ci_guard import module_needs

_bubblewrap = module_needs("bwrap" in available_modes(), "the SWE grader runs in the bubblewrap sandbox")

FIX = {"path": "gemstats/__init__.py", "old": "    return (ordered[middle] + ordered[middle + 1]) / 2",
       "new": "    return (ordered[middle - 1] + ordered[middle]) / 2"}

# One call: the policy's answer is the edit (JSON), applied to the repository the agent runs in unless NOOP is set.
AGENT = textwrap.dedent(
    """
    import json, os, urllib.request
    body = {"model": "m", "messages": [{"role": "user", "content": os.environ["GEM_TASK_PROMPT"]}]}
    request = urllib.request.Request(os.environ["OPENAI_BASE_URL"] + "/chat/completions", json.dumps(body).encode(),
                                     {"Content-Type": "application/json", "Authorization": "Bearer " + os.environ["OPENAI_API_KEY"]})
    edit = json.loads(json.load(urllib.request.urlopen(request, timeout=120))["choices"][0]["message"]["content"])
    if not os.environ.get("NOOP"):
        source = open(edit["path"]).read()
        open(edit["path"], "w").write(source.replace(edit["old"], edit["new"]))
    """
)


@pytest.fixture
def command(tmp_path):
    path = tmp_path / "agent.py"
    path.write_text(AGENT)
    return [sys.executable, str(path)]


def test_the_agents_fix_is_graded_by_the_tasks_tests_and_no_fix_scores_zero(command, tiny_tokenizer):
    label = EpisodeLabel("swe:Sample-v0", 0)
    policy = ScriptedPolicy(tiny_tokenizer, [json.dumps(FIX)])
    (fixed,) = asyncio.run(run_agent_programs(swe_agent_program(command, time_limit=120), policy, tiny_tokenizer, [label]))
    (untouched,) = asyncio.run(run_agent_programs(swe_agent_program(command, time_limit=120, env={"NOOP": "1"}), policy, tiny_tokenizer, [label]))
    assert fixed.exit_code == 0 and fixed.reward == 1.0 and fixed.info["success"] is True, fixed.stderr_tail
    assert fixed.info["changed"] == [FIX["path"]] and fixed.trajectories[0].rewards == [1.0]
    assert untouched.exit_code == 0 and untouched.reward == 0.0 and untouched.info["success"] is False
    assert "gemstats" in fixed.setup.prompt and not fixed.workdir.exists()  # the task's tree, graded and removed


def test_a_task_that_is_not_a_swe_label_is_refused_with_what_it_must_be(command, tiny_tokenizer):
    program = swe_agent_program(command, time_limit=30)
    with pytest.raises(SweError, match="not a SWE env"):
        asyncio.run(run_agent_programs(program, ScriptedPolicy(tiny_tokenizer, ["{}"]), tiny_tokenizer, [EpisodeLabel("game:GuessTheNumber-v0", 0)]))
    with pytest.raises(SweError, match="episode label"):
        asyncio.run(run_agent_programs(program, ScriptedPolicy(tiny_tokenizer, ["{}"]), tiny_tokenizer, [42]))
