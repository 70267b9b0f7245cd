"""RemoteEnv against a hostile server: compression bombs are refused at the cap, never inflated in memory."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("httpx")

from http_bombs import LoopbackServer, brotli_bomb, gzip_bomb, http_answer, peak_memory  # noqa: E402

from gem_core.serve.remote import RemoteEnv, RemoteEnvError  # noqa: E402

CAP = 1 << 20


def _server(step_answer: bytes, reset_answer: bytes | None = None) -> LoopbackServer:
    """A fake ``gem serve``: sessions and resets answer normally (unless ``reset_answer``), a step gets ``step_answer``."""

    def answer(method: str, path: str, body: bytes) -> bytes:
        if path == "/sessions":
            return http_answer(json.dumps({"session_id": "s1"}).encode(), status=201)
        if path.endswith("/reset"):
            return reset_answer or http_answer(json.dumps({"observation": "go", "info": {}}).encode())
        if path.endswith("/step"):
            return step_answer
        return http_answer(b"{}")

    return LoopbackServer(answer)


@pytest.fixture
def bomb_server():
    servers = []

    def start(step_answer: bytes, reset_answer: bytes | None = None) -> LoopbackServer:
        servers.append(_server(step_answer, reset_answer))
        return servers[-1]

    yield start
    for server in servers:
        server.close()


def test_a_stacked_gzip_answer_is_refused_without_inflating_it(bomb_server):
    bomb = gzip_bomb(256 << 20, layers=2)
    server = bomb_server(http_answer(bomb, headers={"Content-Type": "application/json", "Content-Encoding": "gzip, gzip"}))
    env = RemoteEnv(server.url, "game:GuessTheNumber-v0", timeout=20, max_response_bytes=CAP)
    try:
        assert env.reset(seed=0)[0] == "go"
        with peak_memory() as peak:
            observation, reward, terminated, truncated, info = env.step("\\boxed{3}")
        assert truncated and not terminated and reward == 0.0
        assert "Content-Encoding" in info["error"] and "gzip, gzip" in info["error"], info["error"]
        assert peak[0] < 32 << 20, peak
    finally:
        env.close()


@pytest.mark.parametrize("encoding", ["gzip", "br"])
def test_a_compression_bomb_stops_at_the_cap(bomb_server, encoding):
    if encoding == "br":
        pytest.importorskip("brotli")
    bomb = gzip_bomb(256 << 20) if encoding == "gzip" else brotli_bomb(256 << 20)
    server = bomb_server(http_answer(bomb, headers={"Content-Type": "application/json", "Content-Encoding": encoding}))
    env = RemoteEnv(server.url, "game:GuessTheNumber-v0", timeout=20, max_response_bytes=CAP)
    try:
        env.reset(seed=0)
        with peak_memory() as peak:
            *_, truncated, info = env.step("\\boxed{3}")
        assert truncated and str(CAP) in info["error"] and "decoded" in info["error"], info["error"]
        assert peak[0] < 32 << 20, peak
    finally:
        env.close()


@pytest.mark.parametrize("encoding", ["zstd", "compress", "gzip, br"])
def test_unsupported_or_stacked_encodings_are_named_in_the_error(bomb_server, encoding):
    server = bomb_server(http_answer(b"{}", headers={"Content-Type": "application/json", "Content-Encoding": encoding}))
    env = RemoteEnv(server.url, "game:GuessTheNumber-v0", timeout=10, max_response_bytes=CAP)
    try:
        env.reset(seed=0)
        *_, truncated, info = env.step("x")
        assert truncated and encoding in info["error"], info["error"]
    finally:
        env.close()


def test_a_bomb_answering_reset_raises_a_remote_env_error_not_memory_error(bomb_server):
    bomb = http_answer(gzip_bomb(256 << 20), headers={"Content-Type": "application/json", "Content-Encoding": "gzip"})
    server = bomb_server(http_answer(b"{}"), reset_answer=bomb)
    env = RemoteEnv(server.url, "game:GuessTheNumber-v0", timeout=20, retries=0, max_response_bytes=CAP)
    try:
        with peak_memory() as peak, pytest.raises(RemoteEnvError, match=str(CAP)):
            env.reset(seed=0)
        assert peak[0] < 32 << 20, peak
    finally:
        env.close()


def test_a_gzipped_answer_under_the_cap_is_read(bomb_server):
    import gzip

    body = json.dumps({"observation": "fine", "reward": 1.0, "terminated": True, "truncated": False, "info": {}}).encode()
    server = bomb_server(http_answer(gzip.compress(body), headers={"Content-Type": "application/json", "Content-Encoding": "gzip"}))
    env = RemoteEnv(server.url, "game:GuessTheNumber-v0", timeout=10, max_response_bytes=CAP)
    try:
        env.reset(seed=0)
        assert env.step("x") == ("fine", 1.0, True, False, {})
    finally:
        env.close()
