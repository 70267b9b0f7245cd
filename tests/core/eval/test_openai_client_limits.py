"""gem_core/eval/openai_client.py against a hostile endpoint: compression bombs stop at the decoded cap."""

from __future__ import annotations

import gzip
import json

import pytest

pytest.importorskip("openai")

from http_bombs import LoopbackServer, gzip_bomb, http_answer, peak_memory  # noqa: E402

from gem_core.eval.openai_client import ChatEndpoint, EndpointError  # noqa: E402


@pytest.fixture
def endpoint_server():
    servers = []

    def start(answer: bytes) -> LoopbackServer:
        servers.append(LoopbackServer(lambda method, path, body: answer))
        return servers[-1]

    yield start
    for server in servers:
        server.close()


@pytest.mark.parametrize("encoding", ["gzip, gzip", "gzip"])
async def test_a_compression_bomb_is_an_endpoint_error_without_inflating_it(endpoint_server, encoding):
    bomb = gzip_bomb(256 << 20, layers=len(encoding.split(",")))
    server = endpoint_server(http_answer(bomb, headers={"Content-Type": "application/json", "Content-Encoding": encoding}))
    async with ChatEndpoint(f"{server.url}/v1", "m", max_retries=0, timeout=20, max_response_bytes=1 << 20) as endpoint:
        with peak_memory() as peak, pytest.raises(EndpointError) as raised:
            await endpoint.chat([{"role": "user", "content": "hi"}], max_tokens=4)
    assert ("stacks 2 encodings" if "," in encoding else "cap of 1048576 bytes") in str(raised.value), raised.value
    assert peak[0] < 32 << 20, peak


async def test_a_gzipped_reply_under_the_cap_is_read(endpoint_server):
    body = {"choices": [{"index": 0, "message": {"role": "assistant", "content": "ok"}, "finish_reason": "stop"}]}
    answer = http_answer(gzip.compress(json.dumps(body).encode()), headers={"Content-Type": "application/json", "Content-Encoding": "gzip"})
    async with ChatEndpoint(f"{endpoint_server(answer).url}/v1", "m", max_retries=0, timeout=20) as endpoint:
        reply = await endpoint.chat([{"role": "user", "content": "hi"}], max_tokens=4)
    assert reply.text == "ok" and reply.finish_reason == "stop"
