"""``gem.tools.tool_env_wrapper.ToolEnvWrapper``: the core's tool wrapper
(:class:`gem_core.wrappers.tools.ToolUse`) with GEM's constructor and GEM's ``info`` keys.

GEM's rewards map onto :class:`~gem_core.wrappers.tools.ToolRewards`: ``tool_reward`` per call,
``tool_success_reward`` per call that ran cleanly, ``tool_execute_error_reward`` (negative, only with the
other two at zero) per call that failed. ``max_tool_uses=None`` allows any number of calls. Besides the
core's ``tool_calls``/``tool_call_count``, each step's ``info`` holds GEM's ``use_tool`` (this step ran a
tool), ``tool_use_counter`` and ``tool_success_counter``; a reset's ``info`` also holds the ended episode's
``prev_ep_tool_use_counter`` and ``prev_ep_tool_success_counter``.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import Any

from gem_core.env import StepResult
from gem_core.errors import InvalidArgument
from gem_core.tools.tool import Tool
from gem_core.wrappers.tools import ToolRewards, ToolUse

__all__ = ["ToolEnvWrapper"]


class ToolEnvWrapper(ToolUse):
    """Wraps ``env`` with ``tools``; see the module docstring for GEM's arguments."""

    def __init__(
        self,
        env: Any,
        tools: Sequence[Tool],
        tool_reward: float = 0.0,
        tool_success_reward: float = 0.0,
        tool_execute_error_reward: float = 0.0,
        max_tool_uses: int | None = 10,
    ):
        if tool_execute_error_reward > 0:
            raise InvalidArgument(f"ToolEnvWrapper(tool_execute_error_reward={tool_execute_error_reward}): an error reward must be negative.")
        if tool_execute_error_reward and (tool_reward or tool_success_reward):
            raise InvalidArgument(
                "ToolEnvWrapper: tool_execute_error_reward replaces tool_reward and tool_success_reward; set those to 0."
            )
        rewards = ToolRewards(per_call=tool_reward, per_success=tool_success_reward, per_error=tool_execute_error_reward)
        super().__init__(env, tools, max_tool_calls=sys.maxsize if max_tool_uses is None else max_tool_uses, rewards=rewards)
        self.tool_success_counter = 0

    def reset(self, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
        return super().reset(seed=seed, options=options)

    def on_reset(self, observation: str, info: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        # the episode that just ended, as GEM reports it (its training examples log tool use from these)
        previous = {"prev_ep_tool_use_counter": self.tool_call_count, "prev_ep_tool_success_counter": self.tool_success_counter}
        self.tool_success_counter = 0
        observation, info = super().on_reset(observation, info)
        return observation, {**info, "use_tool": False, "tool_use_counter": 0, "tool_success_counter": 0, **previous}

    def _with_gem_info(self, result: StepResult) -> StepResult:
        observation, reward, terminated, truncated, info = result
        calls = info.get("tool_calls") or []
        self.tool_success_counter += sum(1 for call in calls if call["ok"])
        info = {
            **info,
            "use_tool": bool(calls),
            "tool_use_counter": self.tool_call_count,
            "tool_success_counter": self.tool_success_counter,
        }
        return observation, reward, terminated, truncated, info

    def step(self, action: str) -> StepResult:
        return self._with_gem_info(super().step(action))

    async def astep(self, action: str) -> StepResult:
        return self._with_gem_info(await super().astep(action))
