"""gem-retrieval-server under hostile clients: half-sent headers and connection floods."""

from __future__ import annotations


import pytest

pytest.importorskip("httpx")
pytest.importorskip("bm25s")
pytest.importorskip("uvicorn")

from connection_flood import LimitedServer, allow_open_files, assert_a_half_header_flood_leaves_health_answering  # noqa: E402


def test_2000_half_sent_headers_under_a_1024_file_limit_leave_the_server_answering():
    if not allow_open_files(2200):
        pytest.skip("this test opens 2,000 sockets; the open-file limit here is lower")
    server = LimitedServer(
        1024, "gem_core.tools.retrieval_server", ["--port", "0", "--header-timeout", "2"], r"listening on (http://\S+)", "retrieval server"
    )
    assert_a_half_header_flood_leaves_health_answering(server, server.url, server.url.replace("/retrieve", "/health"))
