"""``gem serve`` + ``RemoteEnv`` over loopback: same episodes as local, many sessions, a dying server, hostile requests."""

from __future__ import annotations

import asyncio
import json
import random
import socket
import time
from urllib.parse import urlsplit

import pytest

httpx = pytest.importorskip("httpx")
pytest.importorskip("starlette")

from gem_core import make  # noqa: E402
from gem_core.serve.remote import RemoteEnv, parse_remote_id  # noqa: E402


def _normal(value):
    """What a value looks like after a JSON round trip (numpy scalars and tuples included)."""
    from gem_core.serve.asgi import json_bytes

    return json.loads(json_bytes(value))


def _actions(seed: int, n: int = 12) -> list[str]:
    rng = random.Random(seed)
    moves = [f"\\boxed{{{rng.randint(1, 20)}}}" for _ in range(n)]
    moves[min(3, n - 1)] = "I think it is seven"  # a malformed move too
    return moves


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_remote_episodes_equal_local_ones(guess_server, seed):
    local, remote = make("game:GuessTheNumber-v0"), RemoteEnv(guess_server.url, "game:GuessTheNumber-v0", timeout=10)
    try:
        assert _normal(remote.reset(seed=seed)) == _normal(local.reset(seed=seed))
        for action in _actions(seed):
            expected = local.step(action)
            assert _normal(remote.step(action)) == _normal(expected)
            if expected[2] or expected[3]:
                break
    finally:
        remote.close()


async def test_async_api_equals_local(guess_server):
    local, remote = make("game:GuessTheNumber-v0"), RemoteEnv(guess_server.url, "game:GuessTheNumber-v0", timeout=10)
    assert _normal(await remote.areset(seed=5)) == _normal(local.reset(seed=5))
    for action in _actions(5, 4):
        assert _normal(await remote.astep(action)) == _normal(local.step(action))
    await remote.aclose()


def test_make_with_a_remote_id(guess_server):
    env = make(f"remote:{guess_server.url}/game:GuessTheNumber-v0", timeout=10)
    try:
        assert isinstance(env, RemoteEnv) or isinstance(env.unwrapped, RemoteEnv)
        observation, _ = env.reset(seed=0)
        assert "\\boxed" in observation
        assert env.step(env.sample_random_action())[4] is not None
    finally:
        env.close()


@pytest.mark.parametrize("bad", ["remote:game:Wordle-v0", "remote:http://x:1/notanid", "remote:ftp://x/game:Wordle-v0"])
def test_malformed_remote_ids_say_the_expected_form(bad):
    with pytest.raises(ValueError, match="remote:http://HOST:PORT/category:Name"):
        parse_remote_id(bad)


def test_the_served_env_id_is_checked(guess_server):
    env = RemoteEnv(guess_server.url, "game:Wordle-v0", timeout=10)
    with pytest.raises(ConnectionError, match="serves 'game:GuessTheNumber-v0'"):
        env.reset(seed=0)


async def test_200_sessions_at_once(guess_server):
    envs = [RemoteEnv(guess_server.url, "game:GuessTheNumber-v0", timeout=60) for _ in range(200)]

    async def play(env: RemoteEnv, seed: int) -> list:
        steps = [await env.areset(seed=seed)]
        for action in _actions(seed, 3):
            steps.append(await env.astep(action))
        return steps

    results = await asyncio.gather(*(play(env, seed) for seed, env in enumerate(envs)))
    for seed, steps in enumerate(results):
        local = make("game:GuessTheNumber-v0")
        expected = [local.reset(seed=seed)] + [local.step(a) for a in _actions(seed, 3)]
        assert _normal(steps) == _normal(expected), seed
    async with httpx.AsyncClient() as client:
        assert (await client.get(guess_server.url + "/health")).json()["sessions"] >= 200
    await asyncio.gather(*(env.aclose() for env in envs))
    async with httpx.AsyncClient() as client:
        assert (await client.get(guess_server.url + "/health")).json()["sessions"] == 0


def test_server_killed_mid_episode_is_a_truncation_and_reset_works_after_restart(start_server):
    server = start_server()
    env = RemoteEnv(server.url, "game:GuessTheNumber-v0", timeout=5, retries=2, backoff=0.05)
    env.reset(seed=0)
    assert env.step("\\boxed{3}")[2:4] == (False, False)
    server.kill()
    start = time.monotonic()
    observation, reward, terminated, truncated, info = env.step("\\boxed{4}")
    assert truncated and not terminated and reward == 0.0 and "unreachable" in info["error"]
    assert time.monotonic() - start < 6
    with pytest.raises(ConnectionError):  # no server yet: a reset has nothing to fall back on
        env.reset(seed=0)
    start_server.restart(server)
    observation, _ = env.reset(seed=0)
    assert observation == make("game:GuessTheNumber-v0").reset(seed=0)[0]
    assert env.step("\\boxed{3}")[2:4] == (False, False)
    env.close()


def _raw(url: str, request: bytes) -> bytes:
    parts = urlsplit(url)
    with socket.create_connection((parts.hostname, parts.port), timeout=10) as sock:
        sock.sendall(request)
        answer = b""
        while chunk := sock.recv(65536):
            answer += chunk
    return answer


def test_bad_requests_are_4xx_and_the_server_lives(start_server):
    server = start_server()
    url = server.url
    with httpx.Client(base_url=url, timeout=10) as client:
        session = client.post("/sessions", json={}).json()["session_id"]
        checks = {
            "malformed JSON": (client.post(f"/sessions/{session}/step", content=b"{oops"), 400),
            "nested JSON": (client.post(f"/sessions/{session}/step", content=b"[" * 100_000), 400),
            "no action": (client.post(f"/sessions/{session}/step", json={"move": 1}), 422),
            "action not text": (client.post(f"/sessions/{session}/step", json={"action": [1]}), 422),
            "bad seed": (client.post(f"/sessions/{session}/reset", json={"seed": "x"}), 422),
            "unknown session": (client.post("/sessions/nope/step", json={"action": "x"}), 404),
            "1 MB reset body": (client.post(f"/sessions/{session}/reset", json={"options": {"x": "a" * 1_000_000}}), 413),
            "unknown route": (client.get("/nowhere"), 404),
            "wrong method": (client.get("/sessions"), 405),
        }
        for name, (response, status) in checks.items():
            assert response.status_code == status, (name, response.text)
            assert response.json()["detail"], name
        for header in (b"Content-Length: abc", b"Content-Length: -5"):
            answer = _raw(url, b"POST /sessions HTTP/1.1\r\nHost: x\r\n" + header + b"\r\nConnection: close\r\n\r\n{}")
            assert answer.split(b" ", 2)[1] == b"400", answer[:200]
        # the session still works after all that
        assert client.post(f"/sessions/{session}/reset", json={"seed": 0}).status_code == 200
        assert client.post(f"/sessions/{session}/step", json={"action": "\\boxed{1}"}).status_code == 200
    assert server.alive()


def test_token_is_required_when_set(start_server):
    server = start_server("game:GuessTheNumber-v0", "--token", "s3cret")
    with httpx.Client(base_url=server.url, timeout=10) as client:
        assert client.get("/health").status_code == 401
        assert client.post("/sessions", json={}, headers={"Authorization": "Bearer wrong"}).status_code == 401
        assert client.get("/health", headers={"Authorization": "Bearer s3cret"}).status_code == 200
    with pytest.raises(ConnectionError, match="401"):
        RemoteEnv(server.url, "game:GuessTheNumber-v0", timeout=5).reset(seed=0)
    env = RemoteEnv(server.url, "game:GuessTheNumber-v0", token="s3cret", timeout=5)
    assert env.reset(seed=0)[0]
    env.close()
    assert server.alive()


def test_session_limit_and_idle_reaping(start_server):
    server = start_server("game:GuessTheNumber-v0", "--max-sessions", "2", "--idle-timeout", "1")
    with httpx.Client(base_url=server.url, timeout=10) as client:
        first = client.post("/sessions", json={}).json()["session_id"]
        client.post("/sessions", json={})
        third = client.post("/sessions", json={})
        assert third.status_code == 429 and "--max-sessions" in third.json()["detail"]
        deadline = time.monotonic() + 10
        while client.get("/health").json()["sessions"] and time.monotonic() < deadline:
            time.sleep(0.2)
        assert client.get("/health").json()["sessions"] == 0
        assert client.post(f"/sessions/{first}/reset", json={}).status_code == 404
        assert client.post("/sessions", json={}).status_code == 201


def test_websocket_session(guess_server):
    from websockets.sync.client import connect

    local = make("game:GuessTheNumber-v0")
    with connect(guess_server.url.replace("http://", "ws://") + "/ws", open_timeout=10) as ws:
        ws.send(json.dumps({"op": "reset", "seed": 3}))
        assert _normal(json.loads(ws.recv(10))) == _normal(dict(zip(("observation", "info"), local.reset(seed=3))))
        ws.send("{not json")
        assert json.loads(ws.recv(10))["status"] == 400
        ws.send(json.dumps({"op": "fly"}))
        assert json.loads(ws.recv(10))["status"] == 422
        ws.send(json.dumps({"op": "step", "action": "\\boxed{7}"}))
        keys = ("observation", "reward", "terminated", "truncated", "info")
        assert _normal(json.loads(ws.recv(10))) == _normal(dict(zip(keys, local.step("\\boxed{7}"))))


def test_a_users_env_served_with_import(start_server):
    """The README's registering example, served and played remotely like a local copy."""
    import runpy
    from pathlib import Path

    example = Path(__file__).parents[3] / "examples" / "register_new_env.py"
    server = start_server("custom:CountDown-v0", "--import", str(example))
    namespace = runpy.run_path(str(example), run_name="example")  # registers nothing twice: a fresh class
    local = namespace["CountDown"]()
    env = make(f"remote:{server.url}/custom:CountDown-v0", timeout=10)
    assert env.reset(seed=4) == local.reset(seed=4)
    for action in ["\\boxed{1}", "oops", local.sample_random_action()]:
        assert _normal(env.step(action)) == _normal(local.step(action))
    env.close()


def test_an_empty_token_is_refused_at_startup_not_taken_for_no_token():
    """``--token "$GEM_TOKEN"`` with the variable unset must not serve without authentication."""
    import subprocess
    import sys

    from gem_core.errors import InvalidArgument
    from gem_core.serve.app import ServeConfig

    with pytest.raises(InvalidArgument, match="token"):
        ServeConfig(token="")
    argv = [sys.executable, "-m", "gem_core.cli", "serve", "game:GuessTheNumber-v0", "--port", "0", "--token", ""]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2, done
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "--token" in lines[0] and "Traceback" not in done.stderr, done.stderr
