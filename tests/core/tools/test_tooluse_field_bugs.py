"""Defects found in the field in ToolUse and the native call parsers: non-text actions, unchecked rewards, tools
without ``aexecute``, blank native search queries, tool format errors missing from the metrics, and malformed
calls behind an explicit native marker taken as the final answer."""

from __future__ import annotations

import asyncio
import math
import re

import pytest
from toy_env import AnswerEnv

from gem_core.env import Env
from gem_core.errors import InvalidArgument, InvalidArgumentType
from gem_core.tools.calls import parse_native_calls
from gem_core.tools.search import SearchTool
from gem_core.tools.tool import SyncTool, ToolCall, ToolResult
from gem_core.wrappers.episode_statistics import EpisodeStatistics
from gem_core.wrappers.tools import ToolRewards, ToolUse

FORMATS = [None, "hermes", "llama3_json", "deepseek_v3", "mistral"]


class EchoTool(SyncTool):
    """``<echo>x</echo>`` (or a native call of ``echo``) answers ``x``; its parser assumes text, as most do."""

    name = "echo"
    argument_name = "text"

    def parse(self, action: str) -> list[ToolCall]:
        return [ToolCall(self.name, m.group(1), m.span()) for m in re.finditer(r"<echo>(.*?)</echo>", action)]

    def execute(self, call: ToolCall) -> ToolResult:
        return ToolResult(f"echo: {call.content}", True, {})


class AnyActionEnv(Env):
    """Records every action; one that is not text is answered as malformed, as GEM's envs do."""

    def __init__(self):
        self.received: list[object] = []

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.received = []
        return "Question?", {}

    def step(self, action):
        self.received.append(action)
        return "malformed action", -0.1, True, False, {"format_error": True}


# ------------------------------------------------------------------------------ 1. a non-text action


@pytest.mark.parametrize("action", [None, 123, b"<echo>x</echo>", ["<echo>x</echo>"]])
@pytest.mark.parametrize("call_format", FORMATS)
def test_a_non_text_action_goes_to_the_env_in_every_call_format(call_format, action):
    """llama3_json and mistral raised a bare TypeError (no len() of None) from step, and so did GEM tags with a
    tool whose parser assumes text; bytes and lists got a tool format error there instead of reaching the env."""
    env = AnyActionEnv()
    wrapped = ToolUse(env, [EchoTool()], call_format=call_format)
    wrapped.reset(seed=0)
    observation, reward, terminated, _, info = wrapped.step(action)
    assert (observation, reward, terminated) == ("malformed action", -0.1, True)
    assert env.received == [action] and "tool_calls" not in info


@pytest.mark.parametrize("call_format", FORMATS[1:])
@pytest.mark.parametrize("action", [None, 123, b"[TOOL_CALLS] []"])
def test_the_native_parsers_find_no_call_in_a_non_text_action(call_format, action):
    """llama3_json and mistral called action.find on it: a TypeError or AttributeError."""
    assert parse_native_calls(call_format, action) == []


# ------------------------------------------------------------------------------ 2. rewards


@pytest.mark.parametrize("rewards", [{"per_call": -0.1}, -0.1, "per_error"])
def test_rewards_that_are_not_tool_rewards_are_refused_when_made(rewards):
    """A dict was accepted and raised AttributeError ('dict' has no 'for_result') at the first tool call."""
    with pytest.raises(InvalidArgumentType, match=r"rewards.*ToolRewards\("):
        ToolUse(AnswerEnv(), [EchoTool()], rewards=rewards)


@pytest.mark.parametrize("field", ["per_call", "per_success", "per_error"])
@pytest.mark.parametrize("value", ["-0.1", None, True, math.nan, math.inf, -math.inf, [0.1]])
def test_a_tool_reward_that_is_not_a_finite_number_is_refused(field, value):
    """ToolRewards(per_call="-0.1") raised a TypeError at the first tool call; per_error=nan paid NaN."""
    with pytest.raises(InvalidArgument, match=field):
        ToolRewards(**{field: value})


def test_finite_tool_rewards_of_any_sign_are_kept():
    rewards = ToolRewards(per_call=-1, per_success=0.5, per_error=-0.25)
    wrapped = ToolUse(AnswerEnv(), [EchoTool()], rewards=rewards)
    wrapped.reset(seed=0)
    assert wrapped.step("<echo>hi</echo>")[1] == -0.5
    assert ToolUse(AnswerEnv(), [EchoTool()]).rewards == ToolRewards()


# ------------------------------------------------------------------------------ 3. a tool without aexecute


class NoAsyncEcho:
    name = "echo"
    instruction = "Use <echo>text</echo>."

    def parse(self, action: str) -> list[ToolCall]:
        return EchoTool().parse(action)

    def execute(self, call: ToolCall) -> ToolResult:
        return ToolResult(f"echo: {call.content}", True, {})


def test_a_tool_without_aexecute_is_refused_when_made():
    """It was accepted, worked under step(), and under astep() every call was answered '[echo failed]
    AttributeError ... aexecute', spending the budget and paying per_error."""
    with pytest.raises(InvalidArgumentType, match=r"tools\[0\].*aexecute.*SyncTool"):
        ToolUse(AnswerEnv(), [NoAsyncEcho()])


def test_a_sync_tool_works_under_astep():
    wrapped = ToolUse(AnswerEnv(), [EchoTool()])
    wrapped.reset(seed=0)
    observation, *_ = asyncio.run(asyncio.wait_for(wrapped.astep("<echo>b</echo>"), 10))
    assert observation == "echo: b"


# ------------------------------------------------------------------------------ 4. a blank native search query


class FakeSearch(SearchTool):
    """A search tool that records what it would send and answers with no passages, as the server does."""

    def __init__(self):
        super().__init__("http://127.0.0.1:9/retrieve")
        self.sent: list[str] = []

    async def aexecute(self, call: ToolCall) -> ToolResult:
        self.sent.append(call.content)
        return ToolResult("<information>No passages found.</information>", True, {"query": call.content})


@pytest.mark.parametrize("query", ["", "  ", "\n\t"])
def test_a_blank_native_search_query_is_a_format_error_as_in_tags(query):
    """It was sent, answered 'No passages found.' with ok=True and paid per_success, while <search>  </search> was
    a format error paid per_error."""
    rewards = ToolRewards(per_success=0.1, per_error=-0.1)
    results = {}
    for call_format, action in [(None, f"<search>{query}</search>"), ("hermes", f'<tool_call>{{"name": "search", "arguments": {{"query": "{query.encode("unicode_escape").decode()}"}}}}</tool_call>')]:
        tool = FakeSearch()
        wrapped = ToolUse(AnswerEnv(), [tool], call_format=call_format, rewards=rewards)
        wrapped.reset(seed=0)
        observation, reward, terminated, _, info = wrapped.step(action)
        assert tool.sent == [] and not terminated and "call error" in observation and "empty" in observation
        results[call_format] = (reward, info["tool_calls"][0]["info"])
    assert results["hermes"] == results[None] == (-0.1, {"format_error": True})


def test_a_native_search_query_is_stripped_as_in_tags():
    assert FakeSearch().content_from_arguments({"query": "  capital of France \n"}) == "capital of France"


# ------------------------------------------------------------------------------ 5. format errors in the metrics


@pytest.mark.parametrize(
    ("call_format", "action"),
    [
        ("hermes", "<tool_call>{not json</tool_call>"),
        ("hermes", '<tool_call>{"name": "nope", "arguments": {}}</tool_call>'),
        ("hermes", '<tool_call>{"name": "search", "arguments": {"query": 3}}</tool_call>'),
        (None, "<search> </search>"),
    ],
)
def test_a_malformed_tool_call_sets_the_steps_format_error(call_format, action):
    """info["format_error"], the key EpisodeStatistics, rollout metrics and eval count, was never set by a
    malformed tool call: two empty searches and one bad answer reported format_errors 1, not 3."""
    env = EpisodeStatistics(ToolUse(AnyActionEnv(), [EchoTool(), FakeSearch()], call_format=call_format))
    env.reset(seed=0)
    info = env.step(action)[4]
    assert info["format_error"] is True and info["tool_calls"][0]["info"]["format_error"]
    info = env.step(action)[4]
    info = env.step("no answer")[4]
    assert info["episode"]["format_errors"] == 3


def test_a_well_formed_tool_call_sets_no_format_error():
    wrapped = ToolUse(AnswerEnv(), [EchoTool()])
    wrapped.reset(seed=0)
    assert not wrapped.step("<echo>hi</echo>")[4].get("format_error")


# ------------------------------------------------------------------------------ 6. malformed calls behind a marker

B, S, E = "<｜tool▁call▁begin｜>", "<｜tool▁sep｜>", "<｜tool▁call▁end｜>"


@pytest.mark.parametrize(
    ("call_format", "action", "expected"),
    [
        ("mistral", '[TOOL_CALLS] {"name": "echo", "arguments": {"text": "x"}}', "JSON list"),
        ("mistral", "[TOOL_CALLS]", "JSON list"),
        ("mistral", "  [TOOL_CALLS]   ", "JSON list"),
        ("deepseek_v3", B + "function" + S + 'echo\n{"text": "x"}' + E, "```json"),
        ("deepseek_v3", B + S + "echo\n```json\n" + E, "```json"),
        ("deepseek_v3", B + "function" + S + '\n```json\n{"text": "x"}\n```' + E, "name"),
    ],
)
def test_a_malformed_call_behind_a_native_marker_is_a_format_error_not_the_answer(call_format, action, expected):
    """It was taken as the final answer (graded, the episode ended), while hermes answered the same kind of
    mistake (bad JSON) with a format-error observation and the episode went on."""
    [call] = parse_native_calls(call_format, action)
    assert call.error and expected in call.error
    env = AnswerEnv()
    wrapped = ToolUse(env, [EchoTool()], call_format=call_format)
    wrapped.reset(seed=0)
    observation, _, terminated, _, info = wrapped.step(action)
    assert not terminated and env.received == [] and "call error" in observation and info["format_error"]
