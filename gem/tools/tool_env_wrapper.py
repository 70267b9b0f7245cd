"""``gem.tools.tool_env_wrapper.ToolEnvWrapper``: the core's tool wrapper
(:class:`gem_core.wrappers.tools.ToolUse`) with GEM's constructor and GEM's ``info`` keys.

GEM's rewards map onto :class:`~gem_core.wrappers.tools.ToolRewards`: ``tool_reward`` per call,
``tool_success_reward`` per call that ran cleanly, ``tool_execute_error_reward`` (negative, only with the
other two at zero) per call that failed. ``max_tool_uses=None`` allows any number of calls. Besides the
core's ``tool_calls``/``tool_call_count``, each step's ``info`` holds GEM's ``use_tool`` (this step ran a
tool), ``tool_use_counter`` and ``tool_success_counter``; a reset's ``info`` also holds the ended episode's
``prev_ep_tool_use_counter`` and ``prev_ep_tool_success_counter``; a tool step's ``info`` also holds GEM's
``parsed_action`` (the action up to the end of the call) and ``tool_type``.

The text is GEM's: the first observation is the task, a newline and the tools' ``instruction_string()``
(under "Available tools:" when there are several), and the step that spends the last allowed call ends
with GEM's "Reached the maximum number of tool use" notice. Which call runs is GEM's too: one per step, the
first call of the first tool in list order that runs cleanly (see :meth:`ToolEnvWrapper.step`), so rewards and
the call budget go as under GEM. Each tool's parsing and running are its own.
"""

from __future__ import annotations

import math
import numbers
import re
import sys
from collections.abc import Iterator, Sequence
from typing import Any

from gem_core.env import StepResult
from gem_core.errors import InvalidArgument
from gem_core.tools.tool import Tool, ToolCall, ToolResult
from gem_core.wrappers.tools import ToolRewards, ToolUse

__all__ = ["ToolEnvWrapper"]

# the core's notice for the last allowed call, replaced by GEM's
_CORE_LIMIT_NOTICE = re.compile(r"\n\n\[Tool call limit reached: [^\]]*\]$")
_GEM_LIMIT_NOTICE = "\n\nReached the maximum number of tool use. Please output final answer directly."


class ToolEnvWrapper(ToolUse):
    """Wraps ``env`` with ``tools``; see the module docstring for GEM's arguments.

    Args:
        env: The env whose actions may call the tools.
        tools: The tools; the first observation lists their ``instruction_string()``.
        tool_reward: Reward per tool call.
        tool_success_reward: Reward per call that ran cleanly.
        tool_execute_error_reward: Reward (zero or negative) per call that failed; only with the other two at zero.
        max_tool_uses: Calls allowed per episode (None: any number).

    Raises:
        InvalidArgument: A reward is not a finite number, ``tool_execute_error_reward`` is positive, or it is
            non-zero beside a non-zero ``tool_reward`` or ``tool_success_reward``.
    """

    def __init__(
        self,
        env: Any,
        tools: Sequence[Tool],
        tool_reward: float = 0.0,
        tool_success_reward: float = 0.0,
        tool_execute_error_reward: float = 0.0,
        max_tool_uses: int | None = 10,
    ):
        for name, value in (("tool_reward", tool_reward), ("tool_success_reward", tool_success_reward),
                            ("tool_execute_error_reward", tool_execute_error_reward)):
            # checked before the comparisons below, which would raise a bare TypeError on a text
            if isinstance(value, bool) or not isinstance(value, numbers.Real) or not math.isfinite(value):
                raise InvalidArgument(f"ToolEnvWrapper({name}={value!r:.60}): expected a finite number, e.g. {name}=-0.1.")
        if tool_execute_error_reward > 0:
            raise InvalidArgument(f"ToolEnvWrapper(tool_execute_error_reward={tool_execute_error_reward}): an error reward must be negative.")
        if tool_execute_error_reward and (tool_reward or tool_success_reward):
            raise InvalidArgument(
                "ToolEnvWrapper: tool_execute_error_reward replaces tool_reward and tool_success_reward; set those to 0."
            )
        rewards = ToolRewards(per_call=tool_reward, per_success=tool_success_reward, per_error=tool_execute_error_reward)
        super().__init__(
            env, tools, max_tool_calls=sys.maxsize if max_tool_uses is None else max_tool_uses, rewards=rewards, add_instructions=False
        )
        self.tool_success_counter = 0

    def reset(self, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
        """Start an episode (``seed`` positionally, as GEM calls it).

        Returns:
            The task with the tools' instructions below it, and an ``info`` with GEM's counters: ``use_tool``,
            ``tool_use_counter``, ``tool_success_counter`` (all zero) and the ended episode's
            ``prev_ep_tool_use_counter`` and ``prev_ep_tool_success_counter``.
        """
        return super().reset(seed=seed, options=options)

    def on_reset(self, observation: str, info: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        # the episode that just ended, as GEM reports it (its training examples log tool use from these)
        previous = {"prev_ep_tool_use_counter": self.tool_call_count, "prev_ep_tool_success_counter": self.tool_success_counter}
        self.tool_success_counter = 0
        observation, info = super().on_reset(observation, info)
        tools = list(self.tools.values())
        instructions = "\n".join(getattr(tool, "instruction_string", lambda t=tool: t.instruction)() for tool in tools)
        if len(tools) > 1:
            instructions = f"Available tools:\n{instructions}"
        observation = f"{observation}\n{instructions}"  # GEM's layout
        return observation, {**info, "use_tool": False, "tool_use_counter": 0, "tool_success_counter": 0, **previous}

    def _with_gem_info(self, result: StepResult, action: str = "", call: ToolCall | None = None) -> StepResult:
        """``result`` with GEM's counters in its ``info``; for a tool step (``call`` of ``action`` ran) also
        GEM's notice, ``parsed_action`` and ``tool_type``."""
        observation, reward, terminated, truncated, info = result
        ran = info.get("tool_calls") or []
        self.tool_success_counter += sum(1 for made in ran if made["ok"])
        info = {
            **info,
            "use_tool": bool(ran),
            "tool_use_counter": self.tool_call_count,
            "tool_success_counter": self.tool_success_counter,
        }
        if call is not None:
            observation = _CORE_LIMIT_NOTICE.sub(lambda _: _GEM_LIMIT_NOTICE, observation)
            info["parsed_action"] = action[: call.span[1]]
            tool = self.tools.get(call.tool)
            info["tool_type"] = getattr(tool, "tool_type", call.tool)
        return observation, reward, terminated, truncated, info

    def _gem_tools(self, action: str) -> Iterator[ToolCall | None]:
        """GEM's order of trying the tools: each in list order, its first call in ``action`` (None if it has
        none); the caller runs each call and stops after one that ran cleanly. Nothing when GEM would try no
        tool: ``action`` holds no call, or the episode's calls are spent.

        Raises:
            ResetNeeded: before the first reset (as the core's wrapper).
        """
        if self._plan(action) is None:  # no call at all, or none left
            return
        for tool in self.tools.values():
            calls = self._parse(tool, action)
            yield calls[0] if calls else None

    def _tool_step(self, action: str, call: ToolCall, result: ToolResult) -> StepResult:
        return self._with_gem_info(self._answer([call], [result], False), action, call)

    def step(self, action: str) -> StepResult:
        """Run one tool call as GEM does, or pass the action to the env.

        GEM tries its tools in list order, each on its first call in ``action``, and stops at the first
        call that runs cleanly; the last tool tried decides the step: its call's answer, or, when it found no
        call, the env's step (even after an earlier tool's call failed). One call is counted and paid per
        step, whatever the number of calls in the action.

        Returns:
            ``(observation, reward, terminated, truncated, info)``: the call's answer (with GEM's notice on the
            step that spends the last allowed call) or the env's step, and ``info`` with the core's
            ``tool_calls``/``tool_call_count`` and GEM's ``use_tool``, ``tool_use_counter``,
            ``tool_success_counter`` (on a tool step also ``parsed_action`` and ``tool_type``).

        Raises:
            ResetNeeded: before the first reset.
        """
        last: tuple[ToolCall, ToolResult] | None = None
        for call in self._gem_tools(action):
            last = None if call is None else (call, self._run(call))
            if last is not None and last[1].ok:
                break
        if last is None:
            return self._with_gem_info(self._passed_on(action, self.env.step(action)))
        return self._tool_step(action, *last)

    async def astep(self, action: str) -> StepResult:
        """:meth:`step` with the tools' and the env's async calls: the same choice of call, results and GEM
        ``info`` keys.

        Raises:
            ResetNeeded: before the first reset.
        """
        last: tuple[ToolCall, ToolResult] | None = None
        for call in self._gem_tools(action):
            last = None if call is None else (call, await self._arun(call))
            if last is not None and last[1].ok:
                break
        if last is None:
            return self._with_gem_info(self._passed_on(action, await self.env.astep(action)))
        return self._tool_step(action, *last)
