"""A small MCP server for the tool tests: ``python mcp_server.py`` (stdio) or ``--http PORT``."""

import sys

from fastmcp import FastMCP

server = FastMCP("gem-test-tools")


@server.tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@server.tool
def reverse(text: str) -> str:
    """Reverse a string."""
    return text[::-1]


@server.tool
def fail(reason: str) -> str:
    """Always fails with the given reason (for error handling tests)."""
    raise ValueError(reason)


@server.tool
async def slow(seconds: float, log: str) -> str:
    """Append a line to the file ``log``, then sleep ``seconds`` (counts the calls that reached the server)."""
    import asyncio

    with open(log, "a") as file:
        file.write("call\n")
    await asyncio.sleep(seconds)
    return "done"


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--http":
        server.run(transport="http", host="127.0.0.1", port=int(sys.argv[2]), show_banner=False)
    else:
        server.run(show_banner=False)
