"""The 503 past a server's total connection cap names the setting that raises it, as that server's user sets
it: ``gem serve``'s ``--max-connections`` flag, the agent endpoint's ``AgentEndpointConfig.max_connections``
(whose 503 named ``gem serve``'s flag, which a trainer running the endpoint has nowhere to pass)."""

from __future__ import annotations

import json
import socket

import pytest

httpx = pytest.importorskip("httpx")
pytest.importorskip("uvicorn")

from connection_flood import address  # noqa: E402

from gem_core.agent.endpoint import AgentEndpoint, AgentEndpointConfig  # noqa: E402
from gem_core.testing import ScriptedPolicy  # noqa: E402


def _answer_past_the_cap(host: str, port: int, held: int) -> bytes:
    """The whole answer to one request sent while ``held`` idle connections fill the cap."""
    idle = [socket.create_connection((host, port), timeout=10) for _ in range(held)]
    try:
        with socket.create_connection((host, port), timeout=10) as extra:
            extra.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
            answer = b""
            while chunk := extra.recv(65536):
                answer += chunk
    finally:
        for sock in idle:
            sock.close()
    return answer


def test_the_agent_endpoints_503_names_its_config_field_not_gem_serves_flag(tiny_tokenizer):
    config = AgentEndpointConfig(max_connections=3)
    with AgentEndpoint(ScriptedPolicy(tiny_tokenizer, ["ok"]), tiny_tokenizer, config) as endpoint:
        answer = _answer_past_the_cap("127.0.0.1", endpoint.port, 3)
    head, _, body = answer.partition(b"\r\n\r\n")
    assert head.split(b" ", 2)[1] == b"503", answer[:300]
    message = json.loads(body)["error"]["message"]
    assert "AgentEndpointConfig.max_connections" in message and "--max-connections" not in message, message
    assert "3 connections" in message


def test_gem_serves_503_still_names_its_flag(start_server):
    server = start_server("game:GuessTheNumber-v0", "--max-connections", "3", "--header-timeout", "60")
    answer = _answer_past_the_cap(*address(server.url), 3)
    head, _, body = answer.partition(b"\r\n\r\n")
    assert head.split(b" ", 2)[1] == b"503", answer[:300]
    detail = json.loads(body)["detail"]
    assert "--max-connections" in detail and "--max-connections-per-client" not in detail and "3 connections" in detail, detail
