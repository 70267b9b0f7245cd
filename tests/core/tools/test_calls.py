"""Native tool-call parsing (gem_core/tools/calls.py) on JSON Python cannot read: a call nested past the
interpreter's stack, or holding a number over 4300 digits, is a malformed call (an error observation, the
episode goes on), never a ``RecursionError`` or ``ValueError``."""

from __future__ import annotations

import json

import pytest

from gem_core.tools.calls import MAX_CALL_DEPTH, parse_native_calls, response_template_parser
from gem_core.tools.tool import SyncTool, ToolCall, ToolResult
from gem_core.wrappers.tools import ToolRewards, ToolUse

from toy_env import AnswerEnv


def nested(levels: int) -> str:
    return "[" * levels + "]" * levels


def call_in(call_format: str, arguments: str) -> str:
    """A call of tool ``echo`` whose arguments are the JSON text ``arguments``, in ``call_format``."""
    if call_format == "hermes":
        return f'<tool_call>{{"name": "echo", "arguments": {arguments}}}</tool_call>'
    if call_format == "llama3_json":
        return f'{{"name": "echo", "parameters": {arguments}}}'
    if call_format == "deepseek_v3":
        return f"<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>echo\n```json\n{arguments}\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜>"
    if call_format == "mistral":
        return f'[TOOL_CALLS] [{{"name": "echo", "arguments": {arguments}}}]'
    if call_format == "mistral_untagged":
        return f'[{{"name": "echo", "arguments": {arguments}}}]'
    raise AssertionError(call_format)


FORMATS = ["hermes", "llama3_json", "deepseek_v3", "mistral"]


@pytest.mark.parametrize("call_format", FORMATS)
def test_a_call_nested_a_thousand_levels_deep_is_a_malformed_call(call_format):
    action = call_in(call_format, '{"x": ' + nested(1000) + "}")
    assert len(action) < 2500  # about a kilobyte of text
    [call] = parse_native_calls(call_format, action)
    assert call.error and "nested" in call.error and not call.arguments


def test_an_untagged_mistral_list_nested_too_deeply_is_not_a_call():
    """Without [TOOL_CALLS] a message that is not a valid call list is plain text (as for invalid JSON)."""
    assert parse_native_calls("mistral", call_in("mistral_untagged", '{"x": ' + nested(1000) + "}")) == []
    assert parse_native_calls("mistral", nested(1000)) == []


def test_arguments_sent_as_a_json_string_are_held_to_the_same_depth():
    action = call_in("hermes", json.dumps(nested(1000)))
    [call] = parse_native_calls("hermes", action)
    assert call.error and "nested" in call.error


@pytest.mark.parametrize("call_format", FORMATS)
def test_calls_nested_up_to_the_cap_parse_and_brackets_in_strings_do_not_count(call_format):
    inner = nested(MAX_CALL_DEPTH - 3)  # the call object, the argument object, and for mistral the list
    [call] = parse_native_calls(call_format, call_in(call_format, f'{{"x": {inner}, "s": "{"[{" * 5000}\\"]"}}'))
    assert call.error is None and call.name == "echo"
    assert call.arguments["s"] == "[{" * 5000 + '"]'


def test_the_response_template_parser_reports_deep_calls_as_malformed():
    pytest.importorskip("transformers.utils.chat_parsing.response_parser")

    class Tokenizer:
        response_template = {
            "fields": {"content": {}, "tool_calls": {"open": "<tool_call>", "close": "</tool_call>", "content": "json", "repeats": True}},
        }

    parse = response_template_parser(Tokenizer())
    calls = parse(call_in("hermes", '{"x": ' + nested(1000) + "}"))
    assert calls and all(call.error for call in calls)


class EchoTool(SyncTool):
    name = "echo"
    argument_name = "x"

    def parse(self, action: str) -> list[ToolCall]:
        return []

    def execute(self, call: ToolCall) -> ToolResult:
        return ToolResult(json.dumps(call.content), True)


@pytest.mark.parametrize("call_format", FORMATS)
def test_in_an_episode_a_deep_call_is_an_error_observation_and_the_episode_goes_on(call_format):
    env = ToolUse(AnswerEnv(), [EchoTool()], call_format=call_format)
    env.reset(seed=0)
    observation, reward, terminated, truncated, info = env.step(call_in(call_format, '{"x": ' + nested(1000) + "}"))
    assert "call error" in observation and "nested" in observation and not (terminated or truncated)
    assert env.step("42")[1:3] == (1.0, True)


# -- numbers past Python's 4300-digit limit on int(str) ------------------------------------------------

HUGE = "9" * 5000  # json.loads refuses it with a ValueError that is not a JSONDecodeError


@pytest.mark.parametrize("call_format", FORMATS)
def test_a_number_over_4300_digits_is_a_malformed_call(call_format):
    [call] = parse_native_calls(call_format, call_in(call_format, '{"x": ' + HUGE + "}"))
    assert call.error and "not valid JSON" in call.error and "4300" in call.error and not call.arguments


def test_arguments_sent_as_a_json_string_with_a_huge_number_are_a_malformed_call():
    [call] = parse_native_calls("hermes", call_in("hermes", json.dumps('{"x": ' + HUGE + "}")))
    assert call.name == "echo" and call.error and "4300" in call.error and not call.arguments


@pytest.mark.parametrize("call_format", FORMATS)
def test_in_an_episode_a_huge_number_is_an_error_observation_and_the_episode_goes_on(call_format):
    env = ToolUse(AnswerEnv(), [EchoTool()], call_format=call_format, rewards=ToolRewards(per_error=-0.5))
    env.reset(seed=0)
    observation, reward, terminated, truncated, info = env.step(call_in(call_format, '{"x": ' + HUGE + "}"))
    assert "call error" in observation and reward == -0.5 and not (terminated or truncated)
    assert info["tool_calls"][0]["info"] == {"format_error": True}
    assert env.step("42")[1:3] == (1.0, True)


def test_a_custom_parser_that_raises_is_a_malformed_call_not_a_crash():
    def parser(action: str):
        raise ValueError("cannot read this")

    env = ToolUse(AnswerEnv(), [EchoTool()], call_format=parser)
    env.reset(seed=0)
    observation, reward, terminated, truncated, info = env.step("<tool_call>...</tool_call>")
    assert "call error" in observation and "cannot read this" in observation and not (terminated or truncated)
    assert info["tool_calls"][0]["info"] == {"format_error": True}
