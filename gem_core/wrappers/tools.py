"""Tool use: an action that calls a tool gets the tool's output as the next observation.

With :class:`ToolUse` any env becomes an agentic task. Each action is searched for calls to the wrapped
tools (code to run, a query, an MCP tool call). If there are any, they run in order of appearance, their
outputs joined are the observation and the episode goes on without the env seeing the action. An action
without a tool call goes to the env unchanged: that is the agent's answer or move.

Calls are GEM's tags by default (each tool parses its own, e.g. ``<python>...</python>``). With
``call_format=`` (see :mod:`gem_core.tools.calls`, or ``call_format_for(tokenizer)``) they are the model
family's native calls instead (``<tool_call>{"name": "python", "arguments": {"code": ...}}</tool_call>``),
matched to tools by name (an MCP server's tools by their own names), and tool results are marked
``info["observation_role"] = "tool"`` so that :class:`~gem_core.rollout.session.EpisodeSession` renders them
in the template's own tool role.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Sequence
from dataclasses import dataclass, fields
from typing import Any

from gem_core.env import Env, StepResult
from gem_core.errors import InvalidArgument, InvalidArgumentType, ResetNeeded
from gem_core.tools.calls import CALL_FORMATS, CallParser, format_instruction, parse_native_calls
from gem_core.tools.tool import Tool, ToolCall, ToolResult, check_count_from_zero, without_lone_surrogates
from gem_core.wrappers.core import Wrapper

__all__ = ["ToolUse", "ToolRewards"]


@dataclass(frozen=True)
class ToolRewards:
    """Rewards for tool calls, added to the step's reward. All zero unless set: shaping is a choice.

    Attributes:
        per_call: for every call made (negative values price tool use).
        per_success: for every call whose result is ok (the program ran cleanly, the search answered).
        per_error: for every call that failed or was malformed.

    Raises:
        InvalidArgument: if a field is not a finite real number (a text, a bool, NaN or infinity): it would
            otherwise raise at the first tool call, mid-training, or pay NaN.
    """

    per_call: float = 0.0
    per_success: float = 0.0
    per_error: float = 0.0

    def __post_init__(self) -> None:
        for field in fields(self):
            value = getattr(self, field.name)
            if isinstance(value, bool) or not isinstance(value, numbers.Real) or not math.isfinite(value):
                raise InvalidArgument(f"ToolRewards({field.name}={value!r:.80}): expected a finite number, e.g. ToolRewards({field.name}=-0.1).")

    def for_result(self, result: ToolResult) -> float:
        """The reward for one tool call: ``per_call`` plus ``per_success`` or ``per_error``."""
        return self.per_call + (self.per_success if result.ok else self.per_error)


def _argument_name(tool: Tool) -> str:
    """The argument a native call passes to ``tool`` (shown in the instructions)."""
    return getattr(tool, "argument_name", None) or {"python": "code", "search": "query"}.get(tool.name, "input")


MAX_SHOWN_NAME = 100
"""The most characters of a malformed call's tool name shown back to the model (the rest cut)."""


def _shown_name(name: Any) -> str:
    """A native call's ``name`` as a malformed call's answer shows it: a lone surrogate (a JSON escape in the
    call) would make the observation impossible to tokenize, and a huge name would be copied whole."""
    name = without_lone_surrogates(name if isinstance(name, str) else str(name or ""))
    return name if len(name) <= MAX_SHOWN_NAME else name[:MAX_SHOWN_NAME] + "..."


def _content(tool: Tool, arguments: dict[str, Any]) -> Any:
    """What ``tool`` runs for a native call's ``arguments``: its own conversion, else the one argument, else them all."""
    convert = getattr(tool, "content_from_arguments", None)
    if convert is not None:
        return convert(arguments)
    if len(arguments) == 1:
        return next(iter(arguments.values()))  # python's code, search's query
    return dict(arguments)


@dataclass(frozen=True)
class _NotRun(ToolCall):
    """A call beyond its tool's ``max_calls_per_action``: answered (``error`` says why) but not run, nor counted."""


def _check_tools(tools: Any) -> None:
    """Refuse what is not a list of tools when the wrapper is made: a tool alone, or a tool's name, failed later
    with a bare TypeError or AttributeError that named neither the argument nor the fix.

    Raises:
        InvalidArgument: if there is no tool.
        InvalidArgumentType: if ``tools`` is not a list, or an item lacks a tool's ``name``, ``parse``, ``execute``
            and ``aexecute`` (the protocol's; without it every call under ``astep`` failed).
    """
    if isinstance(tools, (str, bytes)) or not isinstance(tools, Sequence):
        raise InvalidArgumentType(f"ToolUse: tools must be a list of tools, got {type(tools).__name__}; for one tool, give ToolUse(env, [tool]).")
    for index, tool in enumerate(tools):
        if not (isinstance(getattr(tool, "name", None), str) and callable(getattr(tool, "parse", None)) and callable(getattr(tool, "execute", None))):
            raise InvalidArgumentType(
                f"ToolUse: tools[{index}]={tool!r:.60} is not a tool (a name, parse and execute): give tool objects, "
                "e.g. ToolUse(env, [PythonTool()])."
            )
        if not callable(getattr(tool, "aexecute", None)):
            raise InvalidArgumentType(
                f"ToolUse: tools[{index}]={tool!r:.60} has no aexecute, which astep (async rollouts) calls: subclass "
                "gem_core.tools.SyncTool, whose aexecute runs execute in a thread, or define async aexecute."
            )
    if not tools:
        raise InvalidArgument("ToolUse needs at least one tool, e.g. ToolUse(env, [PythonTool()]).")


class ToolUse(Wrapper):
    """Wraps an env with tools.

    Args:
        env: the env whose answers count.
        tools: the tools the agent may call; their names must be distinct.
        max_tool_calls: calls allowed per episode. Once they are spent, an action is passed to the env
            as it is (tool calls in it are not run) and ``info["tool_call_limit_reached"]`` is set.
        rewards: per-call rewards (:class:`ToolRewards`); default none.
        add_instructions: append each tool's instruction to the first observation.
        call_format: None (GEM tags, each tool's own syntax) or a native format of
            :data:`gem_core.tools.calls.CALL_FORMATS` (``"hermes"``, ``"llama3_json"``, ``"deepseek_v3"``,
            ``"mistral"``) or a parser (:func:`gem_core.tools.calls.response_template_parser`); pick it from
            the tokenizer with :func:`gem_core.tools.calls.call_format_for`.

    A tool may shape its native calls: ``argument_name`` (the argument the instruction shows),
    ``content_from_arguments(arguments)`` (what it runs; if that raises on the model's arguments, the call is
    malformed), or, for a server of tools (:class:`~gem_core.tools.mcp.MCPTool`), ``tool_names`` and
    ``native_instruction(call_format)``: its tools are then called by their own names.

    A tool that runs at most some calls per action says so with ``max_calls_per_action``
    (:class:`~gem_core.tools.python.PythonTool`: one), and :attr:`max_step_seconds` counts on it: a call to it
    beyond that, in tags or native calls, is answered as not run (``info`` ``{"not_run": True}``, no format
    error) and neither counted nor rewarded, as a second ``<python>`` block is left alone.

    ``info`` of a tool step holds ``tool_calls`` (one record per call: tool, ok, info), and ``format_error``
    when a call was malformed (the key the metrics count); every step holds ``tool_call_count``, the calls
    made so far in the episode.

    Raises:
        InvalidArgument: if there is no tool, two tools share a name, ``max_tool_calls`` is not a whole number
            of at least 0 or ``call_format`` names no known format.
        InvalidArgumentType: if ``env`` is not an env (an env id: pass ``gem_core.make(id)``), ``tools`` is not a list
            of tools (one tool alone, a tool's name, a tool without ``aexecute``), ``rewards`` is not a
            :class:`ToolRewards` or ``call_format`` is neither a name, a parser nor None.
    """

    blocking = True  # tool calls wait on subprocesses and servers

    def __init__(
        self,
        env: Env,
        tools: Sequence[Tool],
        *,
        max_tool_calls: int = 5,
        rewards: ToolRewards | None = None,
        add_instructions: bool = True,
        call_format: str | CallParser | None = None,
    ):
        super().__init__(env)
        _check_tools(tools)
        names = [tool.name for tool in tools]
        if len(set(names)) != len(names):
            raise InvalidArgument(f"ToolUse: tool names must be distinct, got {names}.")
        if call_format is not None and not callable(call_format) and not (isinstance(call_format, str) and call_format in CALL_FORMATS):
            error = InvalidArgument if isinstance(call_format, str) else InvalidArgumentType  # a list of names is unhashable
            raise error(
                f"ToolUse(call_format={call_format!r:.80}): expected one of {sorted(CALL_FORMATS)}, a parser "
                "(gem_core.tools.calls.response_template_parser), or None for GEM tags."
            )
        self.call_format = call_format
        self.tools = {tool.name: tool for tool in tools}
        self.max_tool_calls = check_count_from_zero("ToolUse: max_tool_calls", max_tool_calls)
        if rewards is not None and not isinstance(rewards, ToolRewards):  # a dict failed only at the first tool call
            raise InvalidArgumentType(
                f"ToolUse(rewards={rewards!r:.80}): expected a ToolRewards, e.g. rewards=ToolRewards(per_call=-0.1), or None for none."
            )
        self.rewards = ToolRewards() if rewards is None else rewards
        self.add_instructions = add_instructions
        self.tool_call_count = 0

    @property
    def instructions(self) -> str:
        """The tool instructions added to the first observation: the native call format per tool, or each tool's own
        text.
        """
        if self.call_format is not None:
            lines = []
            for name, tool in self.tools.items():
                own = getattr(tool, "native_instruction", None)  # an MCP server's tools, each called by its name
                lines.append(own(self.call_format) if own is not None else f"- {name}: " + format_instruction(self.call_format, name, _argument_name(tool)))
            return "You can call these tools; to call one, write:\n" + "\n".join(lines)
        return "\n\n".join(text for text in (tool.instruction for tool in self.tools.values()) if text)

    @property
    def max_step_seconds(self) -> float:
        """The longest one step may take: the wrapped env's step, or the calls one action may make,
        each as long as the slowest tool declares (``max_call_seconds``; unbounded if a tool declares
        none). A tool that runs at most one call per action says so with ``max_calls_per_action``."""
        slowest_call = max(getattr(tool, "max_call_seconds", float("inf")) for tool in self.tools.values())
        per_action = sum(getattr(tool, "max_calls_per_action", self.max_tool_calls) for tool in self.tools.values())
        inner = self.env.get_wrapper_attr("max_step_seconds")
        return max(inner, min(self.max_tool_calls, per_action) * slowest_call)

    def on_reset(self, observation: str, info: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        self.tool_call_count = 0
        if self.add_instructions and self.instructions:
            observation = f"{observation}\n\n{self.instructions}" if observation else self.instructions
        return observation, {**info, "tools": list(self.tools)}

    def find_calls(self, action: str) -> list[ToolCall]:
        """All tool calls in ``action`` in order of appearance; a call overlapping an earlier one is dropped, and
        one beyond its tool's ``max_calls_per_action`` is marked to be answered as not run. An action that is not
        text holds none: it goes to the env, which answers it as malformed, whatever the call format."""
        if not isinstance(action, str):
            return []
        if self.call_format is not None:
            try:
                native = parse_native_calls(self.call_format, action)
            except Exception as error:  # a parser that chokes on model text must not end a training run either
                return [ToolCall("tool", None, (0, len(action)), error=f"the tool call could not be parsed ({type(error).__name__}: {error})")]
            return self._within_per_action_limits([self._from_native(call) for call in native])
        calls = sorted((call for tool in self.tools.values() for call in self._parse(tool, action)), key=lambda c: c.span)
        kept: list[ToolCall] = []
        for call in calls:
            if not kept or call.span[0] >= kept[-1].span[1]:
                kept.append(call)
        return self._within_per_action_limits(kept)

    def _within_per_action_limits(self, calls: list[ToolCall]) -> list[ToolCall]:
        """``calls``, each beyond its tool's ``max_calls_per_action`` replaced by one answered as not run: the step
        bound (:attr:`max_step_seconds`) counts on the limit, and a tool's parser is not trusted to keep it."""
        made: dict[str, int] = {}
        limited: list[ToolCall] = []
        for call in calls:
            tool = self.tools.get(call.tool)
            if call.error or tool is None:  # a malformed call runs nothing
                limited.append(call)
                continue
            allowed = getattr(tool, "max_calls_per_action", None)
            made[call.tool] = made.get(call.tool, 0) + 1
            if allowed is not None and made[call.tool] > allowed:
                times = "one call" if allowed == 1 else f"{allowed} calls"
                limited.append(_NotRun(call.tool, None, call.span, error=f"{call.tool} runs {times} per reply; call it again in your next reply"))
            else:
                limited.append(call)
        return limited

    @staticmethod
    def _parse(tool: Tool, action: str) -> list[ToolCall]:
        try:
            return tool.parse(action)
        except Exception as error:  # a tool's parser that chokes on model text must not end a training run
            return [ToolCall(tool.name, None, (0, len(action)), error=f"the call could not be parsed ({type(error).__name__}: {error})")]

    def _from_native(self, call: Any) -> ToolCall:
        if call.error:
            return ToolCall(_shown_name(call.name) or "tool", None, call.span, error=call.error)
        tool = self.tools.get(call.name)
        served = tool is None  # a tool of a server, called by its own name
        if tool is None:
            tool = self._server_of(call.name)
            if tool is None:
                shown = _shown_name(call.name)
                return ToolCall(shown, None, call.span, error=f"unknown tool {shown!r}; available: {self._native_names()}")
        try:
            # A lone surrogate (a JSON escape in the call) cannot be encoded as UTF-8: no server or tokenizer takes it.
            arguments = without_lone_surrogates(call.arguments)
            content = {"name": without_lone_surrogates(call.name), "arguments": arguments} if served else _content(tool, arguments)
        except Exception as error:  # as for a raising parser: the model's arguments are the call's fault
            return ToolCall(_shown_name(call.name), None, call.span, error=f"the arguments could not be read ({type(error).__name__}: {error})")
        return ToolCall(tool.name, content, call.span)

    def _server_of(self, name: str) -> Tool | None:
        """The tool (an MCP server) that serves ``name`` as one of its own tools, for a native call naming it.

        A tool that serves others lists them in ``tool_names``, or None while it does not know them (its
        server not reached yet, or unreachable): it then takes the call, and its answer says what happened.
        """
        for tool in self.tools.values():
            names = getattr(tool, "tool_names", ())
            if names is None or name in names:
                return tool
        return None

    def _native_names(self) -> list[str]:
        """The names a native call may use: each tool's, or the tools a server serves in its place."""
        return sorted(name for key, tool in self.tools.items() for name in (getattr(tool, "tool_names", None) or [key]))

    def _plan(self, action: str) -> tuple[list[ToolCall], bool] | None:
        """The calls to run now and whether some were dropped for the limit; None to pass the action on.

        Raises:
            ResetNeeded: before the first reset.
        """
        # reset() sets the episode-end guard's flag (gem_core.env.guard_episode_end) on this wrapper, so it is absent
        # only before the first reset: a call there would run outside any episode (code run, a search server asked).
        if getattr(self, "_gem_episode_over", None) is None:
            raise ResetNeeded("Call reset() before step().")
        calls = self.find_calls(action)
        if not calls:
            return None
        budget = self.max_tool_calls - self.tool_call_count
        if budget <= 0:
            return None
        kept: list[ToolCall] = []
        for call in calls:
            if not isinstance(call, _NotRun):  # a call not run spends no budget
                if budget == 0:
                    return kept, True
                budget -= 1
            kept.append(call)
        return kept, False

    def _answer(self, calls: list[ToolCall], results: list[ToolResult], cut: bool) -> StepResult:
        made = [(call, result) for call, result in zip(calls, results, strict=True) if not isinstance(call, _NotRun)]
        self.tool_call_count += len(made)
        observation = "\n\n".join(result.observation for result in results)
        if cut or self.tool_call_count >= self.max_tool_calls:
            observation += (
                f"\n\n[Tool call limit reached: {self.max_tool_calls} calls per episode. "
                "Your next reply must answer without tools.]"
            )
        reward = sum(self.rewards.for_result(result) for _, result in made)
        info = {
            "tool_calls": [
                {"tool": call.tool, "ok": result.ok, "info": result.info} for call, result in zip(calls, results, strict=True)
            ],
            "tool_call_count": self.tool_call_count,
        }
        if any(isinstance(result.info, dict) and result.info.get("format_error") for result in results):
            info["format_error"] = True  # the key every metric counts (EpisodeStatistics, rollouts, eval)
        if self.call_format is not None:
            info["observation_role"] = "tool"
        return observation, reward, False, False, info

    def _passed_on(self, action: str, result: StepResult) -> StepResult:
        observation, reward, terminated, truncated, info = result
        info = {**info, "tool_call_count": self.tool_call_count}
        if self.tool_call_count >= self.max_tool_calls and self.find_calls(action):
            info["tool_call_limit_reached"] = True
        return observation, reward, terminated, truncated, info

    @staticmethod
    def _malformed(call: ToolCall) -> ToolResult:
        if isinstance(call, _NotRun):  # a well-formed call, one too many for its tool
            return ToolResult(f"[{call.tool} call not run] {call.error}", False, {"not_run": True})
        return ToolResult(f"[{call.tool} call error] {call.error}", False, {"format_error": True})

    @staticmethod
    def _crashed(call: ToolCall, error: Exception) -> ToolResult:
        # A tool bug must not end a training run: the model sees a failed call, the log sees the error.
        return ToolResult(f"[{call.tool} failed] {type(error).__name__}: {error}", False, {"error": repr(error)})

    def _run(self, call: ToolCall) -> ToolResult:
        if call.error:
            return self._malformed(call)
        try:
            return self.tools[call.tool].execute(call)
        except Exception as error:
            return self._crashed(call, error)

    async def _arun(self, call: ToolCall) -> ToolResult:
        if call.error:
            return self._malformed(call)
        try:
            return await self.tools[call.tool].aexecute(call)
        except Exception as error:
            return self._crashed(call, error)

    def close(self) -> None:
        """Close every tool (a tool without ``close`` holds nothing), then the wrapped env."""
        try:
            for tool in self.tools.values():
                close = getattr(tool, "close", None)
                if close is not None:
                    close()
        finally:
            super().close()

    def step(self, action: str) -> StepResult:
        """Run the tool calls in ``action`` and answer with their results, or, if it holds none, pass it to the env.

        Raises:
            ResetNeeded: before the first reset (a tool call would run outside any episode).
        """
        plan = self._plan(action)
        if plan is None:
            return self._passed_on(action, self.env.step(action))
        calls, cut = plan
        results = [self._run(call) for call in calls]
        return self._answer(calls, results, cut)

    async def astep(self, action: str) -> StepResult:
        """:meth:`step` with the tools' and the env's async calls.

        Raises:
            ResetNeeded: before the first reset.
        """
        plan = self._plan(action)
        if plan is None:
            return self._passed_on(action, await self.env.astep(action))
        calls, cut = plan
        results = [await self._arun(call) for call in calls]
        return self._answer(calls, results, cut)
