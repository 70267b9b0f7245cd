"""What one action may make a tool do: the calls its tools declare they take (the step bound rests on it), the
arguments a native call must give, and an MCP tool whose private event loop died."""

from __future__ import annotations

import time

import pytest
from toy_env import AnswerEnv

from gem_core.tools.python import PythonTool
from gem_core.tools.tool import SyncTool, ToolCall, ToolResult
from gem_core.wrappers.tools import ToolRewards, ToolUse


def native(name: str, arguments: str) -> str:
    return f'<tool_call>{{"name": "{name}", "arguments": {arguments}}}</tool_call>'


class OncePerActionTool(SyncTool):
    """``<once>x</once>`` (every one is a call) or a native ``once`` call; declares that one call per action runs."""

    name = "once"
    argument_name = "x"
    max_calls_per_action = 1
    max_call_seconds = 1.0

    def __init__(self) -> None:
        self.executed: list[str] = []

    def parse(self, action: str) -> list[ToolCall]:
        from gem_core.tools.tags import tag_spans

        return [ToolCall(self.name, t.body(action), (t.start, t.end)) for t in tag_spans(action, "<once>", "</once>")]

    def execute(self, call: ToolCall) -> ToolResult:
        self.executed.append(call.content)
        return ToolResult(f"ran {call.content}", True)


@pytest.mark.parametrize("call_format", ["hermes", None])
@pytest.mark.parametrize("asynchronous", [False, True])
async def test_calls_beyond_a_tools_max_calls_per_action_are_answered_not_run(call_format, asynchronous):
    """Native calls ran every call to a tool that declares one per action (max_step_seconds counts on one)."""
    tool = OncePerActionTool()
    env = ToolUse(AnswerEnv(), [tool], call_format=call_format, max_tool_calls=5, rewards=ToolRewards(per_call=-0.1))
    env.reset(seed=0)
    assert env.max_step_seconds == 1.0
    one = (lambda x: native("once", f'{{"x": "{x}"}}')) if call_format else (lambda x: f"<once>{x}</once>")
    action = "".join(one(x) for x in "abc")
    observation, reward, terminated, _, info = await env.astep(action) if asynchronous else env.step(action)
    assert tool.executed == ["a"]
    assert observation.startswith("ran a\n\n[once call not run]") and observation.count("not run") == 2, observation
    assert [record["ok"] for record in info["tool_calls"]] == [True, False, False]
    assert info["tool_calls"][1]["info"] == {"not_run": True}  # not a malformed action
    # Only the call that ran is counted and priced, as for a tag the tool's parser leaves alone.
    assert info["tool_call_count"] == 1 and reward == pytest.approx(-0.1) and not terminated
    assert env.step(one("d"))[0] == "ran d" and tool.executed == ["a", "d"]


def test_native_python_calls_keep_the_declared_step_bound():
    """Five native python calls ran five programs (5.2 s) under a declared max_step_seconds of 3 s."""
    env = ToolUse(AnswerEnv(), [PythonTool(mode="process", timeout=0.5)], call_format="hermes", max_tool_calls=5)
    env.reset(seed=0)
    started = time.monotonic()
    observation, _, _, _, info = env.step(native("python", '{"code": "while True: pass"}') * 5)
    took = time.monotonic() - started
    assert [record["ok"] for record in info["tool_calls"]] == [False] * 5 and observation.count("[python call not run]") == 4
    assert took <= env.max_step_seconds == 2.5, took


@pytest.mark.parametrize(
    ("arguments", "shown"),
    [
        ('{"code": 42}', "`code` must be the program as text, got int"),
        ('{"code": {"source": "print(1)"}}', "`code` must be the program as text, got dict"),
        ("{}", "write the program in the `code` argument"),
        ('{"source": "print(1)"}', "write the program in the `code` argument"),
    ],
)
def test_a_native_python_call_without_code_text_is_a_malformed_call(arguments, shown):
    """An int or dict reached the sandbox as the program ("TypeError: compile() arg 1 must be a string")."""
    env = ToolUse(AnswerEnv(), [PythonTool(mode="process", timeout=3)], call_format="hermes", rewards=ToolRewards(per_error=-0.5))
    env.reset(seed=0)
    observation, reward, terminated, _, info = env.step(native("python", arguments))
    assert observation.startswith("[python call error]") and shown in observation, observation
    assert info["tool_calls"][0]["info"] == {"format_error": True} and reward == -0.5 and not terminated


def test_a_native_python_call_ignores_arguments_besides_code():
    """Extra arguments (a model's ``"language"``) are ignored, as MCPTool's own form ignores them: the program runs."""
    env = ToolUse(AnswerEnv(), [PythonTool(mode="process", timeout=3)], call_format="hermes")
    env.reset(seed=0)
    observation, _, _, _, info = env.step(native("python", '{"code": "print(6*7)", "language": "python"}'))
    assert observation == "<output>\n42\n</output>" and info["tool_calls"][0]["ok"]



@pytest.mark.parametrize(("arguments", "shown"), [('{"query": 42}', "`query` must be the query as text, got int"), ('{"q": "x"}', "`query` argument")])
def test_a_native_search_call_without_query_text_is_a_malformed_call_and_sends_nothing(arguments, shown):
    """A search call whose query is not text is the model's format error: nothing is sent (the URL has no server)."""
    from gem_core.tools.search import SearchTool

    env = ToolUse(AnswerEnv(), [SearchTool(url="http://127.0.0.1:9/retrieve", timeout=1)], call_format="hermes")
    env.reset(seed=0)
    observation, _, _, _, info = env.step(native("search", arguments))
    assert observation.startswith("[search call error]") and shown in observation, observation
    assert info["tool_calls"][0]["info"] == {"format_error": True}

@pytest.fixture
def exiting_server():
    """An in-process FastMCP server one of whose tools calls sys.exit(), which ends the MCP client's event loop."""
    pytest.importorskip("fastmcp")
    import sys

    from fastmcp import FastMCP

    server = FastMCP("exiting")

    @server.tool
    def echo(x: int) -> str:
        return f"got {x}"

    @server.tool
    def quit_() -> str:
        sys.exit(3)

    return server


def _timed(tool, action: str) -> tuple[float, ToolResult]:
    from gem_core.tools.mcp import parse_tool_calls

    started = time.monotonic()
    result = tool.execute(parse_tool_calls(action)[0])
    return time.monotonic() - started, result


# The SystemExit that ends the loop thread is the case under test, reported as the thread's unhandled exception.
@pytest.mark.filterwarnings("ignore::pytest.PytestUnhandledThreadExceptionWarning")
def test_an_mcp_tool_whose_loop_thread_died_says_so_at_once_and_restarts(exiting_server):
    """Once the private loop thread died, every call waited timeout + 5 s and said "timed out", forever."""
    from gem_core.tools.mcp import MCPTool

    tool = MCPTool(exiting_server, timeout=2, connect_timeout=10)
    try:
        took, result = _timed(tool, native("echo", '{"x": 1}'))
        assert result.ok and result.observation == "<tool_response>got 1</tool_response>"
        took, result = _timed(tool, native("quit_", "{}"))
        assert took < 2 and not result.ok and "event loop stopped" in result.observation, (took, result)
        took, result = _timed(tool, native("echo", '{"x": 2}'))
        assert took < 2 and result.ok and result.observation == "<tool_response>got 2</tool_response>", (took, result)
    finally:
        tool.close()


# The SystemExit that ends the loop thread is the case under test, reported as the thread's unhandled exception.
@pytest.mark.filterwarnings("ignore::pytest.PytestUnhandledThreadExceptionWarning")
def test_closing_an_mcp_tool_whose_loop_thread_died_is_quick(exiting_server):
    """close() waited 15 s for a shutdown that a dead loop never runs."""
    from gem_core.tools.mcp import MCPTool

    tool = MCPTool(exiting_server, timeout=1, connect_timeout=10)
    assert _timed(tool, native("echo", '{"x": 1}'))[1].ok
    _timed(tool, native("quit_", "{}"))
    started = time.monotonic()
    tool.close()
    assert time.monotonic() - started < 2 and tool._loop_thread is None
