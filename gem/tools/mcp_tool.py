"""``gem.tools.mcp_tool.MCPTool``: the core's MCP tool (:class:`gem_core.tools.mcp.MCPTool`) with GEM's
constructor, class methods and call format.

A call may be written GEM's way, ``<tool_call><tool_name>add</tool_name><arguments>{"a": 1}</arguments>
</tool_call>``, or the core's, ``<tool_call>{"name": "add", "arguments": {"a": 1}}</tool_call>``. The
connection, retries and limits are the core's: ``execution_timeout`` is its per-call ``timeout`` and
``max_retries`` its ``reconnects`` (a call the server answered is never sent twice).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

from gem.tools.base_tool import GemToolMethods
from gem_core.errors import GemError
from gem_core.tools.mcp import MCPTool as CoreMCPTool
from gem_core.tools.tool import ToolCall

__all__ = ["MCPTool", "UnsupportedMCPOptionError"]

_GEM_CALL = re.compile(r"<tool_call>\s*<tool_name>([^<]+)</tool_name>\s*<arguments>(.*?)</arguments>\s*</tool_call>", re.DOTALL)


class UnsupportedMCPOptionError(GemError, TypeError):
    """Raised for GEM ``MCPTool`` options the core's client does not take (the message names them)."""


def _gem_call(text: str) -> tuple[dict[str, Any] | None, str | None] | None:
    """GEM's XML call in ``text`` as ``(content, error)``; None if ``text`` is not one."""
    found = _GEM_CALL.fullmatch(text.strip())
    if found is None:
        return None
    try:
        arguments = json.loads(found.group(2)) if found.group(2).strip() else {}
    except (ValueError, RecursionError) as error:
        return None, f"the tool call's <arguments> are not valid JSON ({error})"
    if not isinstance(arguments, dict):
        return None, "<arguments> must be a JSON object"
    return {"name": found.group(1).strip(), "arguments": arguments}, None


class MCPTool(GemToolMethods, CoreMCPTool):
    """Calls the tools of the MCP server(s) in ``config``: a URL, a path to a server script, or an MCP
    config dict (``{"mcpServers": {...}}``).

    Args:
        config: A server URL, a path to a server script, or an MCP config dict.
        auth: A bearer token for a URL ``config`` (sent as the ``Authorization`` header).
        headers: HTTP headers for a URL ``config``.
        log_handler: GEM's client hook; not supported (must be None).
        progress_handler: GEM's client hook; not supported (must be None).
        sampling_handler: GEM's client hook; not supported (must be None).
        max_retries: Reconnects after a lost connection (the core's ``reconnects``); a call the server
            answered is never sent twice.
        delay_between_retries: Accepted for GEM's signature; unused.
        execution_timeout: Seconds one tool call may take (the core's ``timeout``).
        validate_on_init: Accepted for GEM's signature; unused.
        num_workers: Accepted for GEM's signature; unused.

    Raises:
        UnsupportedMCPOptionError: A handler is given, or ``auth``/``headers`` with a ``config`` that is not a URL.
    """

    tool_type = "mcp"

    def __init__(
        self,
        config: str | dict[str, Any],
        auth: str | None = None,
        headers: dict[str, str] | None = None,
        log_handler: Callable[..., Any] | None = None,
        progress_handler: Callable[..., Any] | None = None,
        sampling_handler: Callable[..., Any] | None = None,
        max_retries: int = 3,
        delay_between_retries: float = 1.0,
        execution_timeout: float = 30.0,
        validate_on_init: bool = True,
        num_workers: int = 1,
    ) -> None:
        handlers = {"log_handler": log_handler, "progress_handler": progress_handler, "sampling_handler": sampling_handler}
        given = sorted(name for name, handler in handlers.items() if handler is not None)
        if given:
            raise UnsupportedMCPOptionError(
                f"MCPTool({', '.join(given)}=...): not supported here; leave them out (the core's client logs "
                "server messages itself), or use fastmcp.Client directly for custom handlers."
            )
        server: Any = config
        if auth or headers:
            if not isinstance(config, str):
                raise UnsupportedMCPOptionError("MCPTool(auth=/headers=) apply to a URL config; put them in the config dict's server entry instead.")
            sent = dict(headers or {})
            if auth:
                sent["Authorization"] = f"Bearer {auth}"
            server = {"mcpServers": {"default": {"url": config, "transport": "http", "headers": sent}}}
        super().__init__(server, timeout=execution_timeout, reconnects=max_retries)
        self.raw_config = config

    def parse(self, action: str) -> list[ToolCall]:
        """The ``<tool_call>`` calls in ``action``, in order, in GEM's XML form or the core's JSON form.

        Returns:
            One :class:`~gem_core.tools.tool.ToolCall` per call (empty if none); a malformed one has ``error`` set
            and is answered with that message instead of being run.
        """
        calls = []
        for call in super().parse(action):
            gem_form = _gem_call(action[call.span[0]:call.span[1]]) if call.error else None
            if gem_form is not None:
                content, error = gem_form
                call = ToolCall(tool=call.tool, content=content, span=call.span, error=error)
            calls.append(call)
        return calls

    def get_available_tools(self) -> list[dict[str, Any]]:
        """The server's tools: ``{"name", "description", "parameters"}`` each."""
        return self.tools

    @classmethod
    def from_url(cls, url: str, auth: str | None = None, headers: dict[str, str] | None = None, **kwargs: Any) -> MCPTool:
        """A tool for one HTTP server, with a bearer token and headers if given."""
        return cls(config=url, auth=auth, headers=headers, **kwargs)

    @classmethod
    def from_config_file(cls, config_path: str, **kwargs: Any) -> MCPTool:
        """A tool for the servers of an MCP config JSON file."""
        with open(config_path, encoding="utf-8") as file:
            return cls(config=json.load(file), **kwargs)

    @classmethod
    def from_local_command(cls, server_params: dict[str, Any], name: str = "default", **kwargs: Any) -> MCPTool:
        """A tool for a stdio server started by ``server_params`` (``command``, ``args``, optionally ``env``)."""
        return cls(config={"mcpServers": {name: server_params}}, **kwargs)

    @classmethod
    def from_multi_server(cls, servers: dict[str, str], **kwargs: Any) -> MCPTool:
        """A tool for several HTTP servers, named by ``servers``' keys."""
        return cls(config={"mcpServers": {name: {"transport": "http", "url": url} for name, url in servers.items()}}, **kwargs)
