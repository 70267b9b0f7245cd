"""gem_core.tools.mcp: the shipped MCP test server, over stdio and HTTP, called through ToolUse."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytest.importorskip("fastmcp")

import gem_core.tools.mcp as mcp_module  # noqa: E402
from gem_core.tools.mcp import MCPTool, parse_tool_calls  # noqa: E402
from gem_core.wrappers.tools import ToolRewards, ToolUse  # noqa: E402

from toy_env import AnswerEnv  # noqa: E402

SERVER = Path(__file__).with_name("mcp_server.py")


@pytest.fixture(scope="module")
def stdio_tool():
    tool = MCPTool(str(SERVER), timeout=20)
    yield tool
    tool.close()


def test_tool_list_is_rendered_into_the_instruction(stdio_tool):
    assert {t["name"] for t in stdio_tool.tools} == {"add", "reverse", "fail", "slow"}
    env = ToolUse(AnswerEnv(), [stdio_tool])
    observation, _ = env.reset(seed=0)
    assert "<tool_call>" in observation and "- add: Add two integers." in observation
    assert '"required": ["a", "b"]' in observation


def test_two_tools_through_the_wrapper(stdio_tool):
    env = ToolUse(AnswerEnv(), [stdio_tool], rewards=ToolRewards(per_success=0.1, per_error=-0.2))
    env.reset(seed=0)
    action = (
        '<tool_call>{"name": "add", "arguments": {"a": 40, "b": 2}}</tool_call>\n'
        '<tool_call>{"name": "reverse", "arguments": {"text": "24"}}</tool_call>'
    )
    observation, reward, terminated, _, info = env.step(action)
    assert observation == "<tool_response>42</tool_response>\n\n<tool_response>42</tool_response>"
    assert reward == pytest.approx(0.2) and not terminated
    assert [c["info"]["tool_name"] for c in info["tool_calls"]] == ["add", "reverse"]
    assert env.step("42")[:3] == ("Correct.", 1.0, True)


def test_server_errors_and_unknown_tools_are_observations(stdio_tool):
    env = ToolUse(AnswerEnv(), [stdio_tool], rewards=ToolRewards(per_error=-1.0), max_tool_calls=10)
    env.reset(seed=0)
    observation, reward, _, _, info = env.step('<tool_call>{"name": "fail", "arguments": {"reason": "no luck"}}</tool_call>')
    assert "no luck" in observation and reward == -1.0 and info["tool_calls"][0]["ok"] is False
    observation, *_ = env.step('<tool_call>{"name": "multiply", "arguments": {}}</tool_call>')
    assert "Unknown tool 'multiply'" in observation and "add, reverse, fail, slow" in observation
    observation, *_ = env.step('<tool_call>{"name": "add", "arguments": {"a": "x"}}</tool_call>')
    assert observation.startswith("<tool_response>") and "a" in observation


async def test_async_call(stdio_tool):
    env = ToolUse(AnswerEnv(), [stdio_tool])
    await env.areset(seed=0)
    observation, *_ = await env.astep('<tool_call>{"name": "add", "arguments": {"a": 1, "b": 2}}</tool_call>')
    assert observation == "<tool_response>3</tool_response>"


@pytest.mark.parametrize(
    ("body", "error"),
    [
        ('{"name": "add", ', "not valid JSON"),
        ('{"arguments": {}}', '"name"'),
        ('{"name": "add", "arguments": [1]}', '"arguments" must be'),
        ('["add"]', '"name"'),
    ],
)
def test_malformed_calls_are_parsed_as_errors(body, error):
    (call,) = parse_tool_calls(f"<tool_call>{body}</tool_call>")
    assert call.error and error in call.error


def test_json_encoded_arguments_are_accepted():
    (call,) = parse_tool_calls('<tool_call>{"name": "add", "arguments": "{\\"a\\": 1}"}</tool_call>')
    assert call.error is None and call.content == {"name": "add", "arguments": {"a": 1}}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_http_server():
    port = _free_port()
    server = subprocess.Popen([sys.executable, str(SERVER), "--http", str(port)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    tool = MCPTool(f"http://127.0.0.1:{port}/mcp", timeout=20)
    try:
        for _ in range(300):  # wait for the port to open (the server imports fastmcp first)
            with socket.socket() as probe:
                if probe.connect_ex(("127.0.0.1", port)) == 0:
                    break
            time.sleep(0.1)
        env = ToolUse(AnswerEnv(), [tool])
        env.reset(seed=0)
        observation, *_ = env.step('<tool_call>{"name": "reverse", "arguments": {"text": "abc"}}</tool_call>')
        assert observation == "<tool_response>cba</tool_response>"
    finally:
        tool.close()
        server.terminate()
        server.wait(10)


def test_forked_worker_process_opens_its_own_session(stdio_tool):
    """The process backend forks after the parent connected: the child must not use the parent's loop."""
    import functools

    from gem_core.vector import make_vec

    assert stdio_tool.tools  # connected in this process before the fork
    vec = make_vec(AnswerEnv, num_envs=1, wrappers=[functools.partial(ToolUse, tools=[stdio_tool])], backend="process")
    try:
        vec.reset(seed=0)
        observations, *_ = vec.step(['<tool_call>{"name": "add", "arguments": {"a": 20, "b": 22}}</tool_call>'])
        assert observations[0] == "<tool_response>42</tool_response>"
    finally:
        vec.close()
    observation = stdio_tool.execute(parse_tool_calls('<tool_call>{"name": "reverse", "arguments": {"text": "ok"}}</tool_call>')[0]).observation
    assert observation == "<tool_response>ko</tool_response>"  # the parent's session is intact


# --- lifecycle: failed starts, a dying server, close() (issue 14 item 10, issue 13 item 3) ----------


def _children() -> list[int]:
    """Live (non-zombie) child processes of this test process, read from /proc."""
    import os

    children = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as stat:
                fields = stat.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == os.getpid() and fields[0] != "Z":
            children.append(int(entry))
    return children


def _mcp_threads() -> set[int]:
    """Loop threads of MCP tools (the module's shared tool has one: compare before and after)."""
    import threading

    return {t.ident for t in threading.enumerate() if t.name == "gem-mcp-client"}


def _settle(check, seconds: float = 10.0):
    """``check()`` once it is falsy, or its last value after ``seconds`` (processes take a moment to exit)."""
    deadline = time.monotonic() + seconds
    while (value := check()) and time.monotonic() < deadline:
        time.sleep(0.1)
    return value


def test_failed_starts_leave_no_process_or_thread_and_are_tool_errors(tmp_path):
    slow = tmp_path / "slow_server.py"
    slow.write_text(f"import time\ntime.sleep(60)\nexec(open({str(SERVER)!r}).read())\n")
    before, threads_before = set(_children()), _mcp_threads()
    tool = MCPTool(str(slow), connect_timeout=1, timeout=5)
    (call,) = parse_tool_calls('<tool_call>{"name": "add", "arguments": {"a": 1, "b": 2}}</tool_call>')
    for _ in range(3):
        answer = tool.execute(call)
        assert not answer.ok and "could not be reached" in answer.observation and "1 s" in answer.observation
    tool.close()
    assert _settle(lambda: set(_children()) - before) == set()
    assert _mcp_threads() - threads_before == set()


async def test_failed_start_async_is_a_tool_error(tmp_path):
    crash = tmp_path / "crash_server.py"
    crash.write_text("import sys\nsys.exit(3)\n")
    before, threads_before = set(_children()), _mcp_threads()
    tool = MCPTool(str(crash), connect_timeout=10, timeout=5)
    answer = await tool.aexecute(parse_tool_calls('<tool_call>{"name": "add", "arguments": {}}</tool_call>')[0])
    assert not answer.ok and "could not be reached" in answer.observation
    tool.close()
    assert _settle(lambda: set(_children()) - before) == set()
    assert _mcp_threads() - threads_before == set()


def test_reconnects_after_the_server_dies_and_close_ends_everything():
    import os
    import signal

    before, threads_before = set(_children()), _mcp_threads()
    tool = MCPTool(str(SERVER), timeout=20)
    (call,) = parse_tool_calls('<tool_call>{"name": "add", "arguments": {"a": 2, "b": 3}}</tool_call>')
    assert tool.execute(call).observation == "<tool_response>5</tool_response>"
    (server,) = set(_children()) - before
    os.kill(server, signal.SIGKILL)
    assert _settle(lambda: server in _children()) is False
    # The session's loop takes the close in on its own: the next call then goes to a new server, not the dead one
    # (a call sent before the close was seen would be answered as an error once, never sent twice).
    assert _settle(lambda: not mcp_module._session_closed(tool._client)) is False
    answer = tool.execute(call)
    assert answer.ok and answer.observation == "<tool_response>5</tool_response>"
    (restarted,) = set(_children()) - before
    assert restarted != server
    tool.close()
    tool.close()  # twice is fine
    assert _settle(lambda: set(_children()) - before) == set()
    assert _mcp_threads() - threads_before == set()


@pytest.mark.parametrize("encoding", ["gzip, gzip", "gzip"])
def test_an_http_server_answering_a_compression_bomb_is_a_tool_error_not_inflated(encoding):
    from http_bombs import LoopbackServer, gzip_bomb, http_answer, peak_memory

    bomb = gzip_bomb(256 << 20, layers=len(encoding.split(",")))
    server = LoopbackServer(lambda method, path, body: http_answer(bomb, headers={"Content-Type": "application/json", "Content-Encoding": encoding}))
    tool = MCPTool(f"{server.url}/mcp", timeout=10, connect_timeout=10, reconnects=0, max_response_bytes=1 << 20)
    try:
        with peak_memory() as peak:
            result = tool.execute(parse_tool_calls('<tool_call>{"name": "add", "arguments": {"a": 1, "b": 2}}</tool_call>')[0])
        assert not result.ok
        assert ("stacks 2 encodings" if "," in encoding else "cap of 1048576 bytes") in result.observation, result.observation
        assert peak[0] < 48 << 20, peak
    finally:
        tool.close()
        server.close()


# --- a call that timed out or reached the server is never sent again (issue: MCP timeouts retried) ---


def _http_server(port: int) -> subprocess.Popen:
    server = subprocess.Popen([sys.executable, str(SERVER), "--http", str(port)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    for _ in range(300):  # wait for the port to open (the server imports fastmcp first)
        with socket.socket() as probe:
            if probe.connect_ex(("127.0.0.1", port)) == 0:
                return server
        time.sleep(0.1)
    server.kill()
    raise RuntimeError("the MCP test server did not open its port")


@pytest.mark.parametrize("transport", ["http", "stdio"])
def test_a_call_that_timed_out_is_not_sent_again(tmp_path, transport):
    """fastmcp's timeout is an MCPError (REQUEST_TIMEOUT), not a TimeoutError: it was taken for a broken
    session and the call re-sent twice (three runs of a tool that may have side effects)."""
    log = tmp_path / "calls.log"
    server = None
    if transport == "http":
        port = _free_port()
        server = _http_server(port)
        tool = MCPTool(f"http://127.0.0.1:{port}/mcp", timeout=1, connect_timeout=30)
    else:
        tool = MCPTool(str(SERVER), timeout=1, connect_timeout=30)
    try:
        assert tool.tools  # connected: the timing below is the call's alone
        (call,) = parse_tool_calls('<tool_call>{"name": "slow", "arguments": {"seconds": 3, "log": "%s"}}</tool_call>' % log)
        started = time.monotonic()
        answer = tool.execute(call)
        elapsed = time.monotonic() - started
        time.sleep(0.5)  # a re-sent call would have been logged by now
        assert log.read_text().count("call") == 1
        assert not answer.ok and answer.observation == "<tool_response>The call to 'slow' failed: timed out after 1 s</tool_response>"
        assert answer.info["error"] == "timed out after 1 s"
        assert elapsed < 2.5, elapsed
        # the session is still usable after the timeout
        (add,) = parse_tool_calls('<tool_call>{"name": "add", "arguments": {"a": 2, "b": 3}}</tool_call>')
        assert tool.execute(add).observation == "<tool_response>5</tool_response>"
    finally:
        tool.close()
        if server is not None:
            server.kill()
            server.wait(10)


def _fake_mcp_server(calls: list[str], status: int = 500):
    """A loopback MCP server that initializes and lists one tool, then answers ``tools/call`` with HTTP ``status``."""
    import json

    from http_bombs import LoopbackServer, http_answer

    def answer(method: str, path: str, body: bytes) -> bytes:
        if method != "POST":
            return http_answer(b"", status=405)
        message = json.loads(body)
        if "id" not in message:  # a notification
            return http_answer(b"", status=202)
        if message["method"] == "tools/call":
            calls.append(message["params"]["name"])
            return http_answer(b"internal failure", status=status, headers={"Content-Type": "text/plain"})
        if message["method"] == "initialize":
            result = {"protocolVersion": message["params"]["protocolVersion"], "capabilities": {"tools": {}}, "serverInfo": {"name": "fake", "version": "1"}}
        elif message["method"] == "tools/list":
            result = {"tools": [{"name": "add", "description": "Add.", "inputSchema": {"type": "object"}}]}
        else:
            result = {}
        return http_answer(json.dumps({"jsonrpc": "2.0", "id": message["id"], "result": result}).encode())

    return LoopbackServer(answer)


def test_an_http_500_names_the_server_and_status_and_is_not_sent_again():
    calls: list[str] = []
    server = _fake_mcp_server(calls)
    tool = MCPTool(f"{server.url}/mcp", timeout=10, connect_timeout=10)
    try:
        answer = tool.execute(parse_tool_calls('<tool_call>{"name": "add", "arguments": {"a": 1, "b": 2}}</tool_call>')[0])
        assert not answer.ok
        assert answer.info["error"] == f"the MCP server at {server.url}/mcp answered HTTP 500 (Server returned an error response)", answer.info
        assert calls == ["add"]  # it reached the server: not re-sent
    finally:
        tool.close()
        server.close()


def test_an_http_500_at_start_names_the_server_and_status():
    from http_bombs import LoopbackServer, http_answer

    server = LoopbackServer(lambda method, path, body: http_answer(b"down", status=503, headers={"Content-Type": "text/plain"}))
    tool = MCPTool(f"{server.url}/mcp", timeout=10, connect_timeout=10, reconnects=0)
    try:
        answer = tool.execute(parse_tool_calls('<tool_call>{"name": "add", "arguments": {"a": 1, "b": 2}}</tool_call>')[0])
        assert answer.info["error"] == (
            f"the MCP server could not be reached: the MCP server at {server.url}/mcp answered HTTP 503 (Server returned an error response)"
        ), answer.info
    finally:
        tool.close()
        server.close()


# --- a dead server at reset, surrogates, native calls, settings (attack_trl mcp2-4, cfg) -----------------


@pytest.mark.parametrize("call_format", [None, "hermes"])
def test_a_dead_server_is_named_in_the_instruction_and_the_episode_goes_on(tmp_path, call_format):
    """The instruction lists the server's tools, so reset reached the server: a dead one raised MCPError out of reset."""
    crash = tmp_path / "crash_server.py"
    crash.write_text("import sys\nsys.exit(3)\n")
    env = ToolUse(AnswerEnv(), [MCPTool(str(crash), connect_timeout=10, timeout=5)], call_format=call_format)
    try:
        observation, _ = env.reset(seed=0)
        assert f"The MCP server {crash} could not be reached" in observation and "Connection closed" in observation
        observation, _, terminated, truncated, info = env.step('<tool_call>{"name": "add", "arguments": {"a": 1, "b": 2}}</tool_call>')
        assert "could not be reached" in observation and not (terminated or truncated) and info["tool_calls"][0]["ok"] is False
        assert env.step("42")[:3] == ("Correct.", 1.0, True)
    finally:
        env.close()


def test_a_lone_surrogate_in_the_arguments_is_replaced_and_the_session_survives(stdio_tool):
    """The stdio writer cannot encode a lone surrogate: the session died (8-17 s, the server restarted)."""
    assert stdio_tool.tools  # connected: the server process below is the session's
    before = set(_children())
    (call,) = parse_tool_calls('<tool_call>{"name": "reverse", "arguments": {"text": "a\\ud800b", "\\udfff": ["\\ud800"]}}</tool_call>')
    answer = stdio_tool.execute(call)
    assert answer.observation.startswith("<tool_response>") and "Connection closed" not in answer.observation, answer.observation
    (call,) = parse_tool_calls('<tool_call>{"name": "reverse", "arguments": {"text": "a\\ud800b"}}</tool_call>')
    assert stdio_tool.execute(call).observation == "<tool_response>b?a</tool_response>"
    assert set(_children()) == before  # the same server process: no restart


def test_a_lone_surrogate_in_a_result_is_replaced():
    """A tokenizer raises on a lone surrogate (TypeError: TextInputSequence must be str), ending the episode."""
    from fastmcp import FastMCP
    from mcp.types import TextContent

    server = FastMCP("surrogates")

    @server.tool
    def lone():  # unannotated: this module's annotations are strings and TextContent is a local name
        """A result with a lone surrogate."""
        return [TextContent(type="text", text="a\ud800b")]

    tool = MCPTool(server, timeout=10, connect_timeout=30)
    try:
        answer = tool.execute(parse_tool_calls('<tool_call>{"name": "lone", "arguments": {}}</tool_call>')[0])
        assert answer.ok and answer.observation == "<tool_response>a?b</tool_response>"
    finally:
        tool.close()


def test_native_calls_name_the_server_s_tools(stdio_tool):
    """With call_format= the instruction showed {"name": "mcp", "arguments": {"input": ...}}, which failed with a
    TypeError, and a call by the server's tool name was an unknown tool."""
    env = ToolUse(AnswerEnv(), [stdio_tool], call_format="hermes", max_tool_calls=10)
    observation, _ = env.reset(seed=0)
    assert '"name": "mcp"' not in observation and "- add: Add two integers." in observation and '"required": ["a", "b"]' in observation
    observation, _, _, _, info = env.step('<tool_call>\n{"name": "add", "arguments": {"a": 40, "b": 2}}\n</tool_call>')
    assert observation == "<tool_response>42</tool_response>" and info["tool_calls"][0]["ok"] and info["observation_role"] == "tool"
    observation, *_ = env.step('<tool_call>{"name": "reverse", "arguments": {"text": "a\\ud800b"}}</tool_call>')
    assert observation == "<tool_response>b?a</tool_response>"
    observation, *_ = env.step('<tool_call>{"name": "multiply", "arguments": {}}</tool_call>')
    assert "unknown tool 'multiply'" in observation and "'add'" in observation and "'reverse'" in observation
    observation, _, _, _, info = env.step('<tool_call>{"name": "mcp", "arguments": {"input": "add"}}</tool_call>')
    assert "call error" in observation and "TypeError" not in observation and info["tool_calls"][0]["info"] == {"format_error": True}
    observation, *_ = env.step('<tool_call>{"name": "mcp", "arguments": {"name": "add", "arguments": {"a": 1, "b": 2}}}</tool_call>')
    assert observation == "<tool_response>3</tool_response>"
    assert env.step("42")[:3] == ("Correct.", 1.0, True)


@pytest.mark.parametrize(
    ("kwargs", "fragment"),
    [
        (dict(reconnects=-1), "reconnects=-1"),
        (dict(reconnects=1.5), "reconnects=1.5"),
        (dict(timeout="30"), "timeout='30'"),
        (dict(timeout=-1), "timeout=-1"),
        (dict(connect_timeout=0), "connect_timeout=0"),
        (dict(max_chars=0), "max_chars=0"),
        (dict(max_response_bytes="big"), "max_response_bytes='big'"),
        (dict(server=42), "server=42"),
        (dict(server=None), "server=None"),
    ],
)
def test_settings_that_would_fail_every_call_are_refused_when_made(kwargs, fragment):
    from gem_core.errors import InvalidArgument

    server = kwargs.pop("server", str(SERVER))
    with pytest.raises(InvalidArgument) as caught:
        MCPTool(server, **kwargs)
    assert fragment in str(caught.value) and "MCPTool" in str(caught.value)
