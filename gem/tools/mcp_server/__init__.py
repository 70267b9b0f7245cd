"""``gem.tools.mcp_server``: GEM's example MCP servers (``time_mcp``), for ``MCPTool`` demos and tests."""
