"""gem-retrieval-server under hostile clients: half-sent headers and connection floods."""

from __future__ import annotations

import socket

import pytest

pytest.importorskip("httpx")
pytest.importorskip("bm25s")
pytest.importorskip("uvicorn")

from connection_flood import LimitedServer, allow_open_files, answers_200, closed_by_server, half_sent_headers  # noqa: E402


def test_2000_half_sent_headers_under_a_1024_file_limit_leave_the_server_answering():
    if not allow_open_files(2200):
        pytest.skip("this test opens 2,000 sockets; the open-file limit here is lower")
    server = LimitedServer(
        1024, "gem_core.tools.retrieval_server", ["--port", "0", "--header-timeout", "2"], r"listening on (http://\S+)", "retrieval server"
    )
    sockets: list[socket.socket] = []
    try:
        sockets = half_sent_headers(server.url, 2000, path="/retrieve")
        assert answers_200(server.url.replace("/retrieve", "/health"), attempts=20), "the server stopped answering /health"
        assert all(closed_by_server(sock, 15) for sock in sockets[::100])
    finally:
        for sock in sockets:
            sock.close()
        stderr = server.stop_and_read_stderr()
    assert "Too many open files" not in stderr, stderr[-2000:]
