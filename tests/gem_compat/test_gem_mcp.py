"""GEM's MCP module paths: ``gem.tools.mcp_tool.MCPTool`` (GEM's constructor, class methods and call format)
driving ``gem.tools.mcp_server.time_mcp`` over stdio."""

from __future__ import annotations

import sys

import pytest

pytest.importorskip("fastmcp")

from gem.tools.mcp_tool import MCPTool, UnsupportedMCPOptionError  # noqa: E402


@pytest.fixture(scope="module")
def time_tool():
    server = {"command": sys.executable, "args": ["-m", "gem.tools.mcp_server.time_mcp", "--transport", "stdio"]}
    tool = MCPTool.from_local_command(server, execution_timeout=30)
    yield tool
    tool.close()


def test_mcp_tool_lists_the_time_servers_tools(time_tool) -> None:
    names = {tool["name"] for tool in time_tool.get_available_tools()}
    assert names == {"current_time", "relative_time", "days_in_month", "get_timestamp", "convert_time", "get_week_year"}


def test_a_call_in_gems_format_runs(time_tool) -> None:
    action = ('I will convert it. <tool_call><tool_name>convert_time</tool_name><arguments>{"sourceTimezone": "Asia/Shanghai", '
              '"targetTimezone": "Europe/London", "time": "2025-03-23 12:30:00"}</arguments></tool_call> then answer')
    found, failed, observation, parsed = time_tool.execute_action(action)
    assert (found, failed, observation) == (True, False, "<tool_response>2025-03-23 04:30:00</tool_response>")
    assert parsed.endswith("</tool_call>") and not parsed.endswith("answer")


def test_a_call_in_the_cores_format_runs_and_bad_arguments_are_answered(time_tool) -> None:
    assert time_tool.execute_action('<tool_call>{"name": "days_in_month", "arguments": {"date": "2024-02-10"}}</tool_call>')[2] == (
        "<tool_response>29</tool_response>"
    )
    found, failed, observation, _ = time_tool.execute_action("<tool_call><tool_name>get_week_year</tool_name><arguments>{oops</arguments></tool_call>")
    assert (found, failed) == (True, True) and "not valid JSON" in observation


def test_handlers_the_core_client_does_not_take_are_refused_by_name() -> None:
    with pytest.raises(UnsupportedMCPOptionError, match="log_handler"):
        MCPTool("http://127.0.0.1:1/mcp", log_handler=print)


def test_the_time_servers_helpers_are_at_gems_names() -> None:
    # GEM's own tests (tests/test_tool/test_time_mcp.py) import these private helpers by name.
    from gem.tools.mcp_server.time_mcp import _moment_to_strftime, _parse_date, _parse_dt

    assert _moment_to_strftime("YYYY-MM-DD HH:mm:ss") == "%Y-%m-%d %H:%M:%S"
    assert _moment_to_strftime("h:mm A") == "%-I:%M %p"
    moment = _parse_dt("2023-01-01 12:30:45.123")
    assert (moment.hour, moment.minute, moment.second, moment.microsecond) == (12, 30, 45, 123000)
    assert moment.tzinfo is not None  # GEM reads times in the local zone
    day = _parse_date("2023-01-01")
    assert (day.year, day.month, day.day, day.hour) == (2023, 1, 1, 0) and day.tzinfo is not None
