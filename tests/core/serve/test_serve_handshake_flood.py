"""Raw WebSocket handshakes the server cannot serve (issue 47.8): ~900 from two loopback clients took
``/health`` to 503 for 10-15 s, because each was accepted, told it had no session and closed, and its
connection then waited out the WebSocket close handshake (10 s with a client that never answers) while
counting against the per-client connection cap. A handshake without a session slot is now answered
with HTTP 429 and closed by the server at once, so the caps free as fast as the floods arrive."""

from __future__ import annotations

import json
import socket
import threading

import pytest

httpx = pytest.importorskip("httpx")
pytest.importorskip("starlette")
pytest.importorskip("uvicorn")

from connection_flood import address, closed_by_server  # noqa: E402

HANDSHAKE = (b"GET /ws HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
             b"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n")
SESSIONS, PER_CLIENT, CLIENTS = 4, 30, 2


def raw_handshakes(url: str, n: int, into: list[socket.socket]) -> None:
    """``n`` WebSocket handshakes that never read an answer nor send a frame (the caller closes them)."""
    for _ in range(n):
        sock = socket.create_connection(address(url), timeout=10)
        sock.sendall(HANDSHAKE)
        into.append(sock)


def answer_head(sock: socket.socket) -> tuple[int, bytes]:
    """The status and what follows the status line, up to the end of the answer's headers."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        if not chunk:
            break
        data += chunk
    status_line, _, rest = data.partition(b"\r\n")
    return int(status_line.split(b" ")[1]), rest


def test_handshakes_without_a_session_slot_get_429_and_end_at_once_so_health_answers(start_server):
    server = start_server("game:GuessTheNumber-v0", "--max-sessions", str(SESSIONS))
    held: list[socket.socket] = []
    try:
        clients = [threading.Thread(target=raw_handshakes, args=(server.url, PER_CLIENT, held)) for _ in range(CLIENTS)]
        for client in clients:
            client.start()
        for client in clients:
            client.join()
        statuses = []
        for sock in held:
            status, head = answer_head(sock)
            statuses.append(status)
            if status != 101:
                # Refused: an HTTP answer, and the server ends the connection itself, while this client holds it.
                assert status == 429 and closed_by_server(sock, 5), (status, head[:300])
        assert statuses.count(101) == SESSIONS and statuses.count(429) == CLIENTS * PER_CLIENT - SESSIONS, statuses
        # Every refused connection has ended: /health answers now, with the flood's sockets still open here.
        health = httpx.get(server.url + "/health", timeout=10)
        assert health.status_code == 200 and health.json()["sessions"] == SESSIONS, health.text
    finally:
        for sock in held:
            sock.close()


def test_a_refused_handshake_says_why_in_its_body(start_server):
    server = start_server("game:GuessTheNumber-v0", "--max-sessions", "1")
    from websockets.exceptions import InvalidStatus
    from websockets.sync.client import connect

    with connect(server.url.replace("http://", "ws://") + "/ws", open_timeout=10):
        with pytest.raises(InvalidStatus) as refused:
            connect(server.url.replace("http://", "ws://") + "/ws", open_timeout=10)
    response = refused.value.response
    assert response.status_code == 429 and "--max-sessions" in json.loads(response.body)["detail"]
