"""gem_core.tools.mcp: defects found in the field (a call that killed the server re-sent; embedded resources dropped)."""

from __future__ import annotations

import textwrap

import pytest

pytest.importorskip("fastmcp")

from gem_core.tools.mcp import MCPTool, parse_tool_calls  # noqa: E402

_SERVER = textwrap.dedent(
    '''
    import os
    from fastmcp import FastMCP
    from mcp.types import EmbeddedResource, ResourceLink, TextResourceContents, BlobResourceContents

    server = FastMCP("odd")

    @server.tool
    def readfile() -> list:
        """A file as an embedded text resource."""
        return [EmbeddedResource(type="resource", resource=TextResourceContents(uri="file:///secret.txt", mimeType="text/plain", text="THE-FILE-BODY-42"))]

    @server.tool
    def blob() -> list:
        """A binary resource and a link to a resource."""
        return [
            EmbeddedResource(type="resource", resource=BlobResourceContents(uri="file:///image.png", mimeType="image/png", blob="AAAA")),
            ResourceLink(type="resource_link", uri="file:///other.txt", name="other"),
        ]

    @server.tool
    def add(a: int, b: int) -> int:
        """Add."""
        return a + b

    @server.tool
    def crash(log: str) -> str:
        """Note the call, then kill the server process."""
        with open(log, "a") as f:
            f.write("call\\n")
        os._exit(1)

    if __name__ == "__main__":
        server.run(show_banner=False)
    '''
)


@pytest.fixture
def odd_tool(tmp_path):
    script = tmp_path / "odd_server.py"
    script.write_text(_SERVER)
    tool = MCPTool(str(script), timeout=20, connect_timeout=30, reconnects=2)
    yield tool
    tool.close()


def _call(text: str):
    return parse_tool_calls(f"<tool_call>{text}</tool_call>")[0]


def test_a_call_that_kills_the_server_is_not_sent_again(odd_tool, tmp_path):
    """The connection closing mid-call (CONNECTION_CLOSED) was taken for a session broken before the call:
    the call was re-sent ``reconnects`` times, so its side effects ran 3 times."""
    log = tmp_path / "calls.log"
    answer = odd_tool.execute(_call('{"name": "crash", "arguments": {"log": "%s"}}' % log))
    assert not answer.ok and "Connection closed" in answer.observation, answer.observation
    assert log.read_text().count("call") == 1
    # a later call reconnects
    assert odd_tool.execute(_call('{"name": "add", "arguments": {"a": 2, "b": 3}}')).observation == "<tool_response>5</tool_response>"


def test_an_embedded_text_resource_reaches_the_model(odd_tool):
    """An embedded resource has no ``text`` of its own: the model read ``[resource content]``, the file body dropped."""
    answer = odd_tool.execute(_call('{"name": "readfile", "arguments": {}}'))
    assert answer.ok and answer.observation == "<tool_response>THE-FILE-BODY-42</tool_response>", answer.observation


def test_a_binary_resource_and_a_resource_link_name_their_uri(odd_tool):
    """A binary resource and a resource link read ``[resource content]``/``[resource_link content]``: no URI to ask for."""
    answer = odd_tool.execute(_call('{"name": "blob", "arguments": {}}'))
    assert answer.ok
    assert "[resource file:///image.png image/png]" in answer.observation, answer.observation
    assert "file:///other.txt" in answer.observation, answer.observation
