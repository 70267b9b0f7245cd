"""GEM's tool methods (``instruction_string``, ``execute_action``) for the core's tools.

GEM's tools are driven through these two methods; the core's :class:`~gem_core.wrappers.tools.ToolUse`
drives ``parse``/``execute`` instead. Both call shapes reach the same parser and runner.
"""

from __future__ import annotations

__all__ = ["GemToolMethods"]


class GemToolMethods:
    """Mixed into a core tool (which provides ``instruction``, ``parse`` and ``execute``)."""

    #: GEM's tool kind label, reported in a tool step's ``info["tool_type"]``.
    tool_type = "tool"

    def instruction_string(self) -> str:
        """The text that tells the model how to call the tool."""
        return self.instruction  # type: ignore[attr-defined]

    def execute_action(self, action: str) -> tuple[bool, bool, str, str]:
        """Run the first call in ``action``: ``(found a call, it failed, observation, action up to the call's end)``."""
        calls = self.parse(action)  # type: ignore[attr-defined]
        if not calls:
            return False, True, "", action
        call = calls[0]
        if call.error:  # a malformed call is answered as ToolUse answers it, never run
            return True, True, f"[{call.tool} call error] {call.error}", action[: call.span[1]]
        result = self.execute(call)  # type: ignore[attr-defined]
        return True, not result.ok, result.observation, action[: call.span[1]]
