"""Every HTTP client of the project on a gzip body of two members back to back (valid gzip, RFC 1952).

The shared decoder once looped for ever on it (zlib keeps a stale ``unconsumed_tail`` after a member
ends), so RemoteEnv, the search tool, the judge, ``gem eval``'s chat client and the MCP transport all
hung, their own timeouts included (the loop never yielded to the event loop). Each client here is
served that body by a real loopback server and must return the whole decoded answer. A call runs in a
thread joined with a generous bound only so that a regression fails this test instead of hanging it.
"""

from __future__ import annotations

import asyncio
import gzip
import json
import threading
from collections.abc import Callable
from typing import Any

import pytest

pytest.importorskip("httpx")

from http_bombs import LoopbackServer, http_answer  # noqa: E402

HANG_GUARD_S = 120  # far above any call here; reached only by a client that never returns


def two_members(payload: bytes) -> bytes:
    """``payload`` gzipped as two members, split in the middle (each member decodes to its half)."""
    middle = len(payload) // 2
    return gzip.compress(payload[:middle]) + gzip.compress(payload[middle:])


def gzip_answer(payload: Any) -> bytes:
    return http_answer(two_members(json.dumps(payload).encode()),
                       headers={"Content-Type": "application/json", "Content-Encoding": "gzip"})


def returns(call: Callable[[], Any]) -> Any:
    """``call()``'s value, run in a thread; fails (instead of hanging) when it does not return."""
    outcome: dict[str, Any] = {}

    def run() -> None:
        try:
            outcome["value"] = call()
        except BaseException as error:  # noqa: BLE001 - handed to the test
            outcome["error"] = error

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(HANG_GUARD_S)
    assert not thread.is_alive(), "the client never returned on a two-member gzip body"
    if "error" in outcome:
        raise outcome["error"]
    return outcome["value"]


@pytest.fixture
def serve():
    servers: list[LoopbackServer] = []

    def start(answer: Callable[[str, str, bytes], bytes]) -> LoopbackServer:
        servers.append(LoopbackServer(answer))
        return servers[-1]

    yield start
    for server in servers:
        server.close()


def test_the_two_member_body_is_large_enough_to_need_several_decoder_rounds():
    # Members that each decode past one 64 KiB piece: the case that looped.
    body = two_members(json.dumps({"text": "a" * 300_000}).encode())
    assert len(body) < 4096 and len(gzip.decompress(body)) > 2 * 64 * 1024


def test_arequest_reads_every_member(serve):
    from gem_core.transport.http_call import arequest

    payload = {"text": "a" * 300_000, "end": "b" * 100_000}
    server = serve(lambda method, path, body: gzip_answer(payload))
    reply = returns(lambda: asyncio.run(arequest("GET", server.url + "/x", timeout=20, retries=0)))
    assert reply.status == 200 and reply.json() == payload


def test_remote_env_reads_a_two_member_answer(serve):
    from gem_core.serve.remote import RemoteEnv

    step = {"observation": "o" * 200_000, "reward": 1.0, "terminated": True, "truncated": False, "info": {}}

    def answer(method: str, path: str, body: bytes) -> bytes:
        if path == "/sessions":
            return http_answer(json.dumps({"session_id": "s1"}).encode(), status=201)
        if path.endswith("/reset"):
            return gzip_answer({"observation": "r" * 200_000, "info": {}})
        if path.endswith("/step"):
            return gzip_answer(step)
        return http_answer(b"{}")

    server = serve(answer)
    env = RemoteEnv(server.url, "game:GuessTheNumber-v0", timeout=20)
    try:
        assert returns(lambda: env.reset(seed=0))[0] == "r" * 200_000
        assert returns(lambda: env.step("x")) == ("o" * 200_000, 1.0, True, False, {})
    finally:
        env.close()


def test_search_tool_reads_a_two_member_answer(serve):
    from gem_core.tools.tool import ToolCall
    from gem_core.tools.search import SearchTool

    passages = [{"document": {"contents": f"Title {i}\n" + "word " * 20_000}, "score": 1.0} for i in range(3)]
    server = serve(lambda method, path, body: gzip_answer({"result": [passages]}))
    tool = SearchTool(url=server.url + "/retrieve", timeout=20, max_chars=10**6)
    result = returns(lambda: tool.execute(ToolCall(tool=tool.name, content="who", span=(0, 3))))
    assert result.ok and result.info["n"] == 3, result


def test_the_judge_and_the_eval_client_read_a_two_member_answer(serve):
    pytest.importorskip("openai")
    from gem_core.judge import Criterion, Judge, Rubric

    verdict = {"scores": {"correct": 9}, "reason": "r" * 3000}
    completion = {
        "id": "j", "object": "chat.completion", "created": 0, "model": "judge",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": json.dumps(verdict)}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
        "padding": "p" * 200_000,
    }
    server = serve(lambda method, path, body: gzip_answer(completion))
    # The judge talks through ChatEndpoint, gem eval's own chat client: one test covers both.
    judge = Judge(server.url + "/v1", "judge", timeout=20, max_retries=0)
    try:
        result = returns(lambda: judge.judge("task", "answer", rubric=Rubric((Criterion("correct", "Right."),))))
    finally:
        judge.close()
    assert result.error is None and result.scores == {"correct": 9}, result.error


def test_the_capped_transport_reads_a_two_member_answer(serve):
    import httpx

    from gem_core.transport.http_limits import capped_transport

    payload = {"text": "m" * 300_000}
    server = serve(lambda method, path, body: gzip_answer(payload))

    async def fetch() -> Any:
        async with httpx.AsyncClient(transport=capped_transport(httpx.AsyncHTTPTransport(), 1 << 20), timeout=20) as client:
            return (await client.get(server.url + "/mcp")).json()

    assert returns(lambda: asyncio.run(fetch())) == payload


def test_many_members_stop_at_the_decoded_cap(serve):
    from gem_core.transport.http_call import CallFailed, arequest

    member = gzip.compress(b" " * 500_000)  # ~500 bytes on the wire, 500 KB decoded
    body = member * 40  # 20 MB decoded from ~20 KB
    server = serve(lambda method, path, _: http_answer(body, headers={"Content-Type": "application/json", "Content-Encoding": "gzip"}))
    with pytest.raises(CallFailed, match="1048576"):
        returns(lambda: asyncio.run(arequest("GET", server.url + "/x", timeout=20, retries=0, max_bytes=1 << 20)))
