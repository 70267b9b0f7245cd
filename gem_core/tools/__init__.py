"""Tools that turn an env into an agentic task (see :class:`gem_core.wrappers.tools.ToolUse`).

- :class:`~gem_core.tools.python.PythonTool`: runs model-written Python in :mod:`gem_core.tools.sandbox`.
- :class:`~gem_core.tools.search.SearchTool`: queries a retrieval server (``gem-retrieval-server``).
- :class:`~gem_core.tools.mcp.MCPTool`: calls the tools of any MCP server.

Each follows the :class:`~gem_core.tools.tool.Tool` protocol. Imports are lazy so ``import
gem_core.tools`` needs neither ``httpx`` nor ``fastmcp``.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from gem_core.tools.tool import SyncTool, Tool, ToolCall, ToolResult

if TYPE_CHECKING:  # loaded by __getattr__ on first use; declared for type checkers and the API reference
    from gem_core.tools.mcp import MCPTool
    from gem_core.tools.python import PythonTool
    from gem_core.tools.search import SearchTool

__all__ = ["Tool", "ToolCall", "ToolResult", "SyncTool", "PythonTool", "SearchTool", "MCPTool"]

_LAZY = {
    "PythonTool": "gem_core.tools.python",
    "SearchTool": "gem_core.tools.search",
    "MCPTool": "gem_core.tools.mcp",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'gem_core.tools' has no attribute {name!r}")
