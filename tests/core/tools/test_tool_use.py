"""gem_core.wrappers.tools.ToolUse: tool calls become observations, limits, rewards, several tools, fuzz."""

from __future__ import annotations

import asyncio
import functools
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gem_core.tools.mcp import parse_tool_calls
from gem_core.tools.python import PythonTool
from gem_core.tools.search import SearchTool
from gem_core.tools.tool import SyncTool, Tool, ToolCall, ToolResult
from gem_core.wrappers.tools import ToolRewards, ToolUse

from toy_env import AnswerEnv


class EchoTool(SyncTool):
    """``<echo>x</echo>`` answers ``x``; ``<echo>fail</echo>`` fails."""

    def __init__(self, name: str = "echo"):
        self.name = name
        self.executed: list[str] = []

    @property
    def instruction(self) -> str:
        return f"Use <{self.name}>text</{self.name}>."

    def parse(self, action: str) -> list[ToolCall]:
        import re

        return [
            ToolCall(self.name, m.group(1), m.span())
            for m in re.finditer(rf"<{self.name}>(.*?)</{self.name}>", action, re.DOTALL)
        ]

    def execute(self, call: ToolCall) -> ToolResult:
        self.executed.append(call.content)
        return ToolResult(f"{self.name}: {call.content}", call.content != "fail", {"content": call.content})


class CrashingTool(EchoTool):
    def execute(self, call: ToolCall) -> ToolResult:
        raise RuntimeError("tool bug")


def test_echo_tool_follows_the_protocol():
    assert isinstance(EchoTool(), Tool)


def test_tool_call_is_answered_and_the_env_is_not_stepped():
    env = AnswerEnv()
    wrapped = ToolUse(env, [EchoTool()])
    observation, info = wrapped.reset(seed=0)
    assert observation.startswith("What is 6 * 7?") and "Use <echo>text</echo>." in observation
    assert info["tools"] == ["echo"]
    observation, reward, terminated, truncated, info = wrapped.step("Let me check <echo>hi</echo>")
    assert observation == "echo: hi" and reward == 0.0 and not terminated and not truncated
    assert info["tool_calls"] == [{"tool": "echo", "ok": True, "info": {"content": "hi"}}]
    assert env.received == []
    observation, reward, terminated, _, info = wrapped.step("42")
    assert (observation, reward, terminated) == ("Correct.", 1.0, True)
    assert env.received == ["42"] and info["tool_call_count"] == 1


def test_instructions_can_be_left_out():
    observation, _ = ToolUse(AnswerEnv(), [EchoTool()], add_instructions=False).reset(seed=0)
    assert observation == "What is 6 * 7?"


def test_tool_call_limit_per_episode():
    tool = EchoTool()
    wrapped = ToolUse(AnswerEnv(), [tool], max_tool_calls=2)
    wrapped.reset(seed=0)
    assert wrapped.step("<echo>1</echo>")[0] == "echo: 1"
    observation = wrapped.step("<echo>2</echo>")[0]
    assert observation.startswith("echo: 2") and "Tool call limit reached: 2" in observation
    observation, reward, terminated, _, info = wrapped.step("<echo>3</echo>")  # goes to the env now
    assert (observation, terminated, info["tool_call_limit_reached"]) == ("Wrong.", True, True)
    assert tool.executed == ["1", "2"]
    wrapped.reset(seed=1)  # the budget is per episode
    assert wrapped.step("<echo>4</echo>")[0] == "echo: 4"


def test_calls_beyond_the_limit_in_one_action_are_not_run():
    tool = EchoTool()
    wrapped = ToolUse(AnswerEnv(), [tool], max_tool_calls=2)
    wrapped.reset(seed=0)
    observation, _, _, _, info = wrapped.step("<echo>a</echo><echo>b</echo><echo>c</echo>")
    assert tool.executed == ["a", "b"] and len(info["tool_calls"]) == 2
    assert "Tool call limit reached" in observation


def test_rewards_per_call_success_and_error():
    rewards = ToolRewards(per_call=-0.1, per_success=0.5, per_error=-1.0)
    wrapped = ToolUse(AnswerEnv(), [EchoTool()], rewards=rewards, max_tool_calls=10)
    wrapped.reset(seed=0)
    assert wrapped.step("<echo>ok</echo>")[1] == pytest.approx(0.4)
    assert wrapped.step("<echo>fail</echo>")[1] == pytest.approx(-1.1)
    assert wrapped.step("<echo>ok</echo> <echo>fail</echo>")[1] == pytest.approx(0.4 - 1.1)
    assert wrapped.step("42")[1] == 1.0  # the env's reward is passed on unchanged


def test_rewards_default_to_zero():
    wrapped = ToolUse(AnswerEnv(), [EchoTool()])
    wrapped.reset(seed=0)
    assert wrapped.step("<echo>fail</echo>")[1] == 0.0


def test_several_tools_run_in_order_of_appearance():
    first, second = EchoTool("alpha"), EchoTool("beta")
    wrapped = ToolUse(AnswerEnv(), [first, second], max_tool_calls=10)
    wrapped.reset(seed=0)
    observation, _, _, _, info = wrapped.step("<beta>1</beta> then <alpha>2</alpha> then <beta>3</beta>")
    assert observation == "beta: 1\n\nalpha: 2\n\nbeta: 3"
    assert [c["tool"] for c in info["tool_calls"]] == ["beta", "alpha", "beta"]


def test_real_tools_together(bwrap_mode):
    """Python and search (whose server is down) in one action: both answer, in order."""
    tools = [PythonTool(timeout=5, mode=bwrap_mode), SearchTool("http://127.0.0.1:9/retrieve", retries=0, timeout=1)]
    wrapped = ToolUse(AnswerEnv(), tools)
    wrapped.reset(seed=0)
    observation, _, _, _, info = wrapped.step("<search>six times seven</search> and <python>print(6 * 7)</python>")
    search_part, python_part = observation.split("\n\n")
    assert "Search failed" in search_part and python_part == "<output>\n42\n</output>"
    assert [(c["tool"], c["ok"]) for c in info["tool_calls"]] == [("search", False), ("python", True)]


def test_duplicate_tool_names_are_rejected():
    with pytest.raises(ValueError, match="distinct"):
        ToolUse(AnswerEnv(), [EchoTool(), EchoTool()])


def test_a_crashing_tool_becomes_an_observation():
    wrapped = ToolUse(AnswerEnv(), [CrashingTool()])
    wrapped.reset(seed=0)
    observation, _, terminated, _, info = wrapped.step("<echo>x</echo>")
    assert "RuntimeError: tool bug" in observation and not terminated and info["tool_calls"][0]["ok"] is False


async def test_astep_is_async_and_matches_step():
    wrapped = ToolUse(AnswerEnv(), [EchoTool()], rewards=ToolRewards(per_call=-0.1))
    await wrapped.areset(seed=0)
    assert (await wrapped.astep("<echo>x</echo>"))[:2] == ("echo: x", pytest.approx(-0.1))
    assert (await wrapped.astep("42"))[:3] == ("Correct.", 1.0, True)


async def test_astep_runs_the_python_tool_without_blocking_the_loop(bwrap_mode):
    wrapped = [ToolUse(AnswerEnv(), [PythonTool(mode=bwrap_mode)]) for _ in range(3)]
    for env in wrapped:
        await env.areset(seed=0)
    ticks = 0

    async def ticker():
        nonlocal ticks
        while True:
            ticks += 1
            await asyncio.sleep(0.01)

    task = asyncio.create_task(ticker())
    results = await asyncio.gather(*(env.astep("<python>import time; time.sleep(0.3); print('slept')</python>") for env in wrapped))
    task.cancel()
    assert all(r[0] == "<output>\nslept\n</output>" for r in results)
    assert ticks > 5


@pytest.mark.parametrize(
    ("backend", "backend_kwargs"),
    [("sync", {}), ("thread", {}), ("process", {}), ("process", {"context": "spawn"}), ("async", {})],
)
def test_every_vector_backend(backend, backend_kwargs, bwrap_mode):
    from gem_core.vector import make_vec

    wrapper = functools.partial(ToolUse, tools=[PythonTool(mode=bwrap_mode)])
    vec = make_vec(AnswerEnv, num_envs=2, wrappers=[wrapper], backend=backend, backend_kwargs=backend_kwargs)
    try:
        observations, _ = vec.reset(seed=0)
        assert all("<python>" in o for o in observations)
        observations, rewards, terminated, _, _ = vec.step(["<python>print(6 * 7)</python>", "41"])
        assert observations[0] == "<output>\n42\n</output>" and observations[1] == "Wrong."
        assert list(terminated) == [False, True] and list(rewards) == [0.0, 0.0]
        observations, rewards, terminated, _, _ = vec.step(["42", "42"])
        assert observations[0] == "Correct." and rewards[0] == 1.0 and terminated[0]
    finally:
        vec.close()


# ---- fuzz: malformed tool calls never raise, and always answer with text -------------------------

_fragments = st.sampled_from(
    [
        "<python>", "</python>", "```python\n", "```", "<search>", "</search>", "<tool_call>", "</tool_call>",
        '{"name": "echo"', '{"name": 3}', '{"arguments": []}', '"arguments": "{"', "}", "{", "\n", "<echo>", "</echo>",
        "print(", "null", '{"name": "echo", "arguments": {"text": "x"}}', "\x00", "\ud7ff",
    ]
)
_actions = st.lists(st.one_of(_fragments, st.text(max_size=20)), max_size=12).map("".join)


class OfflineMCP:
    """The MCP tool's parsing with a fake server holding one tool, ``echo``."""

    name = "mcp"
    instruction = ""

    def parse(self, action: str) -> list[ToolCall]:
        return parse_tool_calls(action, self.name)

    def execute(self, call: ToolCall) -> ToolResult:
        assert call.error is None and isinstance(call.content["arguments"], dict)
        return ToolResult(f"called {call.content['name']}", call.content["name"] == "echo")

    async def aexecute(self, call: ToolCall) -> ToolResult:
        return self.execute(call)


class OfflinePython(SyncTool):
    """The Python tool's parsing, without running anything."""

    name = "python"

    def parse(self, action: str) -> list[ToolCall]:
        return PythonTool.parse(self, action)  # type: ignore[arg-type]

    def execute(self, call: ToolCall) -> ToolResult:
        assert isinstance(call.content, str)
        return ToolResult("<output>\n</output>", True)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(action=_actions)
def test_fuzz_malformed_tool_calls(action: str):
    search = SearchTool("http://127.0.0.1:9/retrieve", retries=0, timeout=0.2)
    search.execute = lambda call: ToolResult("<information>offline</information>", True)  # type: ignore[method-assign]
    wrapped = ToolUse(AnswerEnv(), [OfflinePython(), search, OfflineMCP(), EchoTool()], max_tool_calls=4, rewards=ToolRewards(per_error=-1))
    wrapped.reset(seed=0)
    observation, reward, terminated, truncated, info = wrapped.step(action)
    assert isinstance(observation, str) and observation
    assert isinstance(float(reward), float)
    calls = info.get("tool_calls")
    if calls is None:  # no call found: the env got the action
        assert terminated
    else:
        assert 1 <= len(calls) <= 4 and not terminated
        spans = [c.span for c in wrapped.find_calls(action)]
        assert spans == sorted(spans) and all(a[1] <= b[0] for a, b in zip(spans, spans[1:]))
        errors = [c for c in calls if not c["ok"]]
        assert reward == -len(errors)


def test_malformed_json_tool_call_is_explained():
    wrapped = ToolUse(AnswerEnv(), [OfflineMCP()])
    wrapped.reset(seed=0)
    observation, _, terminated, _, info = wrapped.step('<tool_call>{"name": "echo", </tool_call>')
    assert "not valid JSON" in observation and not terminated and info["tool_calls"][0]["info"]["format_error"]



def test_importing_the_tools_package_stays_light():
    import subprocess
    import sys

    code = "import sys, gem_core.tools, gem_core.wrappers.tools; print(sorted(m for m in ('httpx', 'fastmcp', 'bm25s') if m in sys.modules))"
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout == "[]\n"


@pytest.mark.parametrize("max_tool_calls", ["5", None, 2.5, -1, True])
def test_max_tool_calls_of_the_wrong_type_is_refused_when_made(max_tool_calls):
    from gem_core.errors import InvalidArgument

    with pytest.raises(InvalidArgument) as caught:
        ToolUse(AnswerEnv(), [EchoTool()], max_tool_calls=max_tool_calls)
    assert f"max_tool_calls={max_tool_calls!r}" in str(caught.value) and "ToolUse" in str(caught.value)


class RaisingParseTool(SyncTool):
    """``<calc>21</calc>`` doubles a number; its parsers raise on anything else, as a tool's own code may."""

    name = "calc"
    argument_name = "expression"

    def parse(self, action: str) -> list[ToolCall]:
        from gem_core.tools.tags import tag_spans

        return [ToolCall(self.name, int(t.body(action)), (t.start, t.end)) for t in tag_spans(action, "<calc>", "</calc>")]

    def content_from_arguments(self, arguments: dict) -> int:
        return int(arguments["expression"])

    def execute(self, call: ToolCall) -> ToolResult:
        return ToolResult(str(call.content * 2), True)


@pytest.mark.parametrize(
    ("call_format", "action", "error"),
    [
        (None, "<calc>twenty</calc>", "ValueError"),
        ("hermes", '<tool_call>{"name": "calc", "arguments": {"expression": "twenty"}}</tool_call>', "ValueError"),
        ("hermes", '<tool_call>{"name": "calc", "arguments": {}}</tool_call>', "KeyError"),
    ],
)
def test_a_tool_whose_parser_raises_on_model_text_is_a_malformed_call(call_format, action, error):
    """A tool's parse (tags) or content_from_arguments (native calls) raising escaped env.step and ended the run."""
    env = ToolUse(AnswerEnv(), [RaisingParseTool()], call_format=call_format, rewards=ToolRewards(per_error=-0.5))
    env.reset(seed=0)
    observation, reward, terminated, truncated, info = env.step(action)
    assert observation.startswith("[calc call error]") and error in observation, observation
    assert reward == -0.5 and not (terminated or truncated) and info["tool_calls"][0]["info"] == {"format_error": True}
    good = "<calc>21</calc>" if call_format is None else '<tool_call>{"name": "calc", "arguments": {"expression": "21"}}</tool_call>'
    assert env.step(good)[0] == "42"
    assert env.step("42")[1:3] == (1.0, True)


@pytest.mark.parametrize("action", ["<echo>hi</echo>", "42"])
async def test_a_step_before_the_first_reset_is_refused_and_runs_no_tool(action):
    """A tool call before reset() was run (math:*-python ran the code, qa:*-search called the server)."""
    from gem_core.errors import ResetNeeded

    tool, env = EchoTool(), AnswerEnv()
    wrapped = ToolUse(env, [tool])
    with pytest.raises(ResetNeeded, match=r"reset\(\)"):
        wrapped.step(action)
    with pytest.raises(ResetNeeded, match=r"reset\(\)"):
        await wrapped.astep(action)
    assert tool.executed == [] and env.received == []
    wrapped.reset(seed=0)
    assert wrapped.step("<echo>hi</echo>")[0] == "echo: hi" and tool.executed == ["hi"]


@pytest.mark.parametrize(
    ("arguments", "shown"),
    [
        ({"tools": EchoTool()}, "ToolUse: tools must be a list of tools, got EchoTool; for one tool, give ToolUse(env, [tool])."),
        ({"tools": ["python"]}, "ToolUse: tools[0]='python' is not a tool"),
        ({"tools": [EchoTool(), None]}, "ToolUse: tools[1]=None is not a tool"),
        ({"tools": [EchoTool()], "call_format": ["hermes"]}, "ToolUse(call_format=['hermes']): expected one of ['deepseek_v3', 'hermes', "),
    ],
    ids=["one_tool", "tool_name", "none", "call_format_list"],
)
def test_tools_and_call_format_of_the_wrong_type_are_refused_when_made(arguments, shown):
    """A single tool, a tool's name or a list of formats failed with a bare TypeError or AttributeError."""
    from gem_core.errors import InvalidArgumentType

    tools = arguments.pop("tools")
    with pytest.raises(InvalidArgumentType) as caught:
        ToolUse(AnswerEnv(), tools, **arguments)
    assert str(caught.value).startswith(shown), str(caught.value)


def test_an_unknown_call_format_name_is_still_an_invalid_argument():
    from gem_core.errors import InvalidArgument, InvalidArgumentType

    with pytest.raises(InvalidArgument, match=r"call_format='hermes2'") as caught:
        ToolUse(AnswerEnv(), [EchoTool()], call_format="hermes2")
    assert not isinstance(caught.value, InvalidArgumentType)
