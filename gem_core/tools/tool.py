"""The tool protocol: what :class:`gem_core.wrappers.tools.ToolUse` needs from a tool.

A tool finds its calls in the model's action text (:meth:`Tool.parse`), runs one
(:meth:`Tool.execute`, or :meth:`Tool.aexecute` from an event loop) and answers with a
:class:`ToolResult` whose observation is what the model reads next. Running a call never raises for the
model's sake: a bad call, a failing program or an unreachable server is an observation with
``ok=False``.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from gem_core.errors import InvalidArgument
from gem_core.vector.calls import check_count

__all__ = ["Tool", "ToolCall", "ToolResult", "SyncTool", "check_count_from_zero", "text_argument", "without_lone_surrogates"]


@dataclass(frozen=True)
class ToolCall:
    """One call found in an action.

    Attributes:
        tool: name of the tool that parsed it.
        content: what the tool runs: code, a query, or for MCP ``{"name", "arguments"}``.
        span: ``(start, end)`` character offsets of the call in the action; calls run in order of ``start``.
        error: set when the call is malformed (e.g. invalid JSON); the call is then answered with this
            message instead of being run.
    """

    tool: str
    content: Any
    span: tuple[int, int]
    error: str | None = None


@dataclass(frozen=True)
class ToolResult:
    """The answer to one call: ``observation`` for the model, ``ok`` for rewards, ``info`` for logs."""

    observation: str
    ok: bool
    info: dict[str, Any] = field(default_factory=dict)


@runtime_checkable
class Tool(Protocol):
    """A tool usable by :class:`~gem_core.wrappers.tools.ToolUse`."""

    #: Short unique name (``"python"``, ``"search"``, ``"mcp"``).
    name: str

    @property
    def instruction(self) -> str:
        """Text added to the task prompt saying how to call the tool."""
        ...

    def parse(self, action: str) -> list[ToolCall]:
        """The calls to this tool in ``action``, in order of appearance (empty if none)."""
        ...

    def execute(self, call: ToolCall) -> ToolResult:
        """Run ``call``; never raises for a bad call or a failing run."""
        ...

    async def aexecute(self, call: ToolCall) -> ToolResult:
        """:meth:`execute` without blocking the event loop."""
        ...

    def close(self) -> None:
        """Release what the tool holds (server processes, pools, loop threads); safe to call twice.
        :meth:`gem_core.wrappers.tools.ToolUse.close` calls it when its env is closed."""
        ...


class SyncTool:
    """Base for tools whose work is naturally blocking: ``aexecute`` runs ``execute`` in a thread."""

    name: str = "tool"

    @property
    def instruction(self) -> str:
        """Text added to the task prompt saying how to call the tool (none by default)."""
        return ""

    def parse(self, action: str) -> list[ToolCall]:
        """The calls to this tool in ``action``, in order of appearance; a subclass must define it."""
        raise NotImplementedError

    def execute(self, call: ToolCall) -> ToolResult:
        """Run ``call``; never raises for a bad call or a failing run. A subclass must define it."""
        raise NotImplementedError

    async def aexecute(self, call: ToolCall) -> ToolResult:
        """:meth:`execute` in a worker thread, so the event loop is not blocked."""
        return await asyncio.to_thread(self.execute, call)

    def close(self) -> None:
        """Nothing to release by default."""


def without_lone_surrogates(value: Any) -> Any:
    """``value`` with each lone surrogate in its strings (dict keys, lists and dicts followed) replaced by ``?``.

    A model's tool call can hold one (a JSON escape like ``"\\ud800"``), and so can a server's answer.
    Neither UTF-8 nor a tokenizer can encode it: sent to an MCP server's stdio it kills the session, and in
    an observation it ends the episode.
    """
    if isinstance(value, str):
        return value.encode("utf-8", "replace").decode("utf-8")
    if isinstance(value, dict):
        return {without_lone_surrogates(key): without_lone_surrogates(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [without_lone_surrogates(item) for item in value]
    return value


def check_count_from_zero(name: str, value: Any) -> int:
    """Option ``name``, a count that may be 0 (retries, reconnects, tool calls), checked when the tool (or
    :class:`~gem_core.wrappers.tools.ToolUse`) is made: a text, a float or None would otherwise fail every
    call, and a negative count allow none at all.
    (:func:`gem_core.vector.calls.check_count` with ``least=0``.)

    Raises:
        InvalidArgument: if it is not a whole number of at least 0.
    """
    return check_count(name, value, least=0)


def text_argument(arguments: dict[str, Any], name: str, what: str) -> str:
    """The text argument ``name`` of a native tool call (``ToolUse(call_format=...)``), which holds ``what``; the
    call's other arguments (a model's ``"language": "python"``) are ignored, as
    :class:`~gem_core.tools.mcp.MCPTool` ignores what its own form does not name.

    Raises:
        InvalidArgument: if the argument is missing or not a string; the model reads why in its observation (a
            format error), and nothing runs.
    """
    value = arguments.get(name)
    if value is None:
        raise InvalidArgument(f"write {what} in the `{name}` argument, as a string; got arguments {list(arguments)}")
    if not isinstance(value, str):
        raise InvalidArgument(f"`{name}` must be {what} as text, got {type(value).__name__}")
    return value
