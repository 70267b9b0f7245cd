"""mini-swe-agent, unchanged, runs an episode through the agent endpoint with a scripted policy behind it.

Its calls go through litellm to ``OPENAI_BASE_URL``; the test checks, token by token, that every call's
prompt in the recorded trajectory equals the chat template's rendering of the messages mini-swe-agent
saved in its own trajectory file (the messages it sent), and that the task's grader pays the episode.
"""

from __future__ import annotations

import copy
import json
import sys

import pytest

pytest.importorskip("minisweagent")

from minisweagent.models.utils.actions_toolcall import BASH_TOOL  # noqa: E402

from gem_core.agent import AgentEndpoint, AgentProgram  # noqa: E402
from gem_core.testing import ScriptedPolicy  # noqa: E402

# A Qwen-style ChatML template that renders tools and tool calls (the tiny "chatml" one renders neither).
TOOL_TEMPLATE = (
    "{% if tools %}<|im_start|>system\n# Tools\n<tools>{% for t in tools %}\n{{ t | tojson }}{% endfor %}\n</tools><|im_end|>\n{% endif %}"
    "{% for m in messages %}"
    "{% if m.role == 'assistant' %}<|im_start|>assistant\n{{ m.content or '' }}"
    "{% for c in m.tool_calls or [] %}<tool_call>\n{\"name\": \"{{ c.function.name }}\", \"arguments\": "
    "{% if c.function.arguments is string %}{{ c.function.arguments }}{% else %}{{ c.function.arguments | tojson }}{% endif %}}\n</tool_call>{% endfor %}"
    "<|im_end|>\n"
    "{% elif m.role == 'tool' %}<|im_start|>user\n<tool_response>\n{{ m.content }}\n</tool_response><|im_end|>\n"
    "{% else %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endif %}"
    "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
SOLUTION = [
    '<tool_call>\n{"name": "bash", "arguments": {"command": "echo hello > hello.txt"}}\n</tool_call>',
    '<tool_call>\n{"name": "bash", "arguments": {"command": "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"}}\n</tool_call>',
]


def mini_swe_agent(output):
    """The `mini` command line as its docs show it: yolo mode, exit when done, its own trajectory file."""
    return [sys.executable, "-m", "minisweagent.run.mini", "-m", "openai/gem-policy", "--yolo", "--exit-immediately",
            "-o", str(output), "-t", "Create a file hello.txt in the current directory that contains the word hello."]


MINI_ENV = {  # no first-run wizard, no cost lookups, no network fetch of litellm's price list
    "MSWEA_CONFIGURED": "true", "MSWEA_SILENT_STARTUP": "1", "MSWEA_COST_TRACKING": "ignore_errors",
    "LITELLM_LOCAL_MODEL_COST_MAP": "True",
}


def hello_written(run):
    path = run.workdir / "hello.txt"
    return float(path.exists() and path.read_text().strip() == "hello")


def test_mini_swe_agent_solves_a_task_and_its_trajectory_is_the_rendering_of_what_it_sent(tiny_tokenizer, tmp_path):
    tokenizer = copy.deepcopy(tiny_tokenizer)
    tokenizer.chat_template = TOOL_TEMPLATE
    workdir, output = tmp_path / "work", tmp_path / "mini.traj.json"
    workdir.mkdir()
    program = AgentProgram(command=mini_swe_agent(output), grader=hello_written, time_limit=240, max_turns=10,
                           env={**MINI_ENV, "MSWEA_GLOBAL_CONFIG_DIR": str(tmp_path / "config")})
    with AgentEndpoint(ScriptedPolicy(tokenizer, SOLUTION), tokenizer) as endpoint:
        run = program.run(endpoint, workdir=workdir)
    assert run.exit_code == 0, run.stdout_tail + run.stderr_tail
    assert run.reward == 1.0 and not run.truncated
    (trajectory,) = run.trajectories  # mini-swe-agent only appends: no fork
    assert trajectory.num_turns == 2 and trajectory.rewards == [0.0, 1.0]

    saved = json.loads(output.read_text())
    messages = [{k: v for k, v in m.items() if k != "extra"} for m in saved["messages"]]
    assistant_at = [i for i, m in enumerate(messages) if m["role"] == "assistant"]
    assert len(assistant_at) == 2
    ids = trajectory.prompt_ids + trajectory.response_ids
    tool_defs = [BASH_TOOL]  # the one tool mini-swe-agent declares on every call
    for (start, end), at in zip(trajectory.turn_spans, assistant_at):
        text = tokenizer.apply_chat_template(messages[:at], tools=tool_defs, tokenize=False, add_generation_prompt=True)
        expected = tokenizer.encode(text, add_special_tokens=False)
        assert ids[: len(trajectory.prompt_ids) + start] == expected
        assert trajectory.loss_mask[start:end] == [1] * (end - start)
    # The sampled tool calls reached mini-swe-agent as OpenAI tool calls, and their output came back as tool messages.
    assert messages[assistant_at[0]]["tool_calls"][0]["function"]["name"] == "bash"
    assert messages[assistant_at[0] + 1]["role"] == "tool"

