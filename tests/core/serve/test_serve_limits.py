"""``gem serve`` under hostile clients: stalled headers and bodies, connection floods, binary frames,
out-of-order calls, bad bodies and bad flags, and actions larger than the server takes."""

from __future__ import annotations

import json
import socket
import subprocess
import sys

import pytest

httpx = pytest.importorskip("httpx")
pytest.importorskip("starlette")
pytest.importorskip("uvicorn")

from connection_flood import (  # noqa: E402
    LimitedServer,
    address,
    allow_open_files,
    answers_200,
    assert_a_half_header_flood_leaves_health_answering,
)

from gem_core import make  # noqa: E402
from gem_core.serve.remote import RemoteEnv  # noqa: E402


def _serve_under(nofile: int, *args: str) -> LimitedServer:
    return LimitedServer(nofile, "gem_core.cli", ["serve", *args, "--port", "0"], r"at (http://\S+)", "gem serve")


def test_2000_half_sent_headers_under_a_1024_file_limit_leave_health_answering():
    if not allow_open_files(2200):
        pytest.skip("this test opens 2,000 sockets; the open-file limit here is lower")
    server = _serve_under(1024, "game:GuessTheNumber-v0", "--header-timeout", "2")
    assert_a_half_header_flood_leaves_health_answering(server, server.url, server.url + "/health")


def test_connections_over_the_per_client_cap_get_503_and_the_cap_frees_when_they_close(start_server):
    server = start_server("game:GuessTheNumber-v0", "--max-connections-per-client", "4", "--header-timeout", "60")
    held = [socket.create_connection(address(server.url), timeout=10) for _ in range(4)]
    try:
        with socket.create_connection(address(server.url), timeout=10) as extra:
            extra.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
            answer = b""
            while chunk := extra.recv(65536):
                answer += chunk
        assert answer.split(b" ", 2)[1] == b"503", answer[:300]
        assert b"--max-connections-per-client" in answer
    finally:
        for sock in held:
            sock.close()
    assert answers_200(server.url + "/health", attempts=20)


def test_a_body_trickled_to_a_route_that_does_not_read_it_is_cut_off(start_server):
    """The app answers DELETE without reading the body; the connection must still end at the body deadline."""
    server = start_server("game:GuessTheNumber-v0", "--body-timeout", "1")
    with socket.create_connection(address(server.url), timeout=10) as sock:
        sock.sendall(b"DELETE /sessions/nope HTTP/1.1\r\nHost: x\r\nContent-Length: 100000\r\n\r\n")
        closed = False
        for _ in range(100):  # 1 byte every 0.2 s: 20 s at most
            try:
                sock.sendall(b"x")
            except OSError:
                closed = True
                break
            sock.settimeout(0.2)
            try:
                if sock.recv(65536) == b"":
                    closed = True
                    break
            except TimeoutError:
                pass
            except OSError:
                closed = True
                break
        assert closed, "a trickled body held the connection open"
    assert server.alive()


def test_a_binary_websocket_frame_is_answered_with_an_error_and_the_session_goes_on(guess_server):
    from websockets.sync.client import connect

    local = make("game:GuessTheNumber-v0")
    with connect(guess_server.url.replace("http://", "ws://") + "/ws", open_timeout=10) as ws:
        ws.send(b'{"op": "reset", "seed": 1}')
        answer = json.loads(ws.recv(10))
        assert answer["status"] == 400 and "text" in answer["error"], answer
        ws.send(json.dumps({"op": "reset", "seed": 1}))
        assert json.loads(ws.recv(10))["observation"] == local.reset(seed=1)[0]


def test_step_before_reset_is_a_409_that_says_to_reset(guess_server):
    from websockets.sync.client import connect

    with httpx.Client(base_url=guess_server.url, timeout=10) as client:
        session = client.post("/sessions", json={}).json()["session_id"]
        for route in ("step", "sample"):
            response = client.post(f"/sessions/{session}/{route}", json={"action": "\\boxed{3}"})
            assert response.status_code == 409 and "reset" in response.json()["detail"], response.text
        assert client.post(f"/sessions/{session}/reset", json={"seed": 0}).status_code == 200
        assert client.post(f"/sessions/{session}/step", json={"action": "\\boxed{3}"}).status_code == 200
        client.delete(f"/sessions/{session}")
    with connect(guess_server.url.replace("http://", "ws://") + "/ws", open_timeout=10) as ws:
        ws.send(json.dumps({"op": "step", "action": "\\boxed{3}"}))
        answer = json.loads(ws.recv(10))
        assert answer["status"] == 409 and "reset" in answer["error"]


@pytest.mark.parametrize("body", [b"[]", b'["game:GuessTheNumber-v0"]', b"", b'{"env_id": 5}', b"null"])
def test_creating_a_session_needs_a_json_object(guess_server, body):
    with httpx.Client(base_url=guess_server.url, timeout=10) as client:
        before = client.get("/health").json()["sessions"]
        response = client.post("/sessions", content=body, headers={"content-type": "application/json"})
        assert response.status_code == 422, response.text
        assert "env_id" in response.json()["detail"]
        assert client.get("/health").json()["sessions"] == before


def test_creating_a_session_with_an_empty_object_or_the_served_id_works(guess_server):
    with httpx.Client(base_url=guess_server.url, timeout=10) as client:
        for body in ({}, {"env_id": "game:GuessTheNumber-v0"}):
            response = client.post("/sessions", json=body)
            assert response.status_code == 201, response.text
            client.delete(f"/sessions/{response.json()['session_id']}")


@pytest.mark.parametrize("command", ["serve", "retrieval"])
@pytest.mark.parametrize("port", ["99999", "-1", "70000"])
def test_a_port_out_of_range_is_a_one_line_error(command, port):
    if command == "serve":
        argv = [sys.executable, "-m", "gem_core.cli", "serve", "game:GuessTheNumber-v0", "--port", port]
    else:
        pytest.importorskip("bm25s")
        argv = [sys.executable, "-m", "gem_core.tools.retrieval_server", "--port", port]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2, done
    assert "Traceback" not in done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "--port" in lines[0] and "65535" in lines[0], done.stderr


@pytest.mark.parametrize("action", ["a" * 1_000_000, "\\boxed{7}" + " " * 1_000_000, "\u00e9" * 300_000])
def test_a_1mb_action_through_remote_env_equals_the_local_env(guess_server, action):
    local, remote = make("game:GuessTheNumber-v0"), RemoteEnv(guess_server.url, "game:GuessTheNumber-v0", timeout=30)
    try:
        assert remote.reset(seed=2) == local.reset(seed=2)
        expected = local.step(action)
        assert json.loads(json.dumps(remote.step(action))) == json.loads(json.dumps(expected))
        assert remote.step("\\boxed{5}")[2:4] == local.step("\\boxed{5}")[2:4]  # the episode goes on alike
    finally:
        remote.close()


def test_an_action_over_max_action_bytes_gets_the_envs_format_penalty_not_a_truncation(start_server):
    from websockets.sync.client import connect

    server = start_server("game:GuessTheNumber-v0", "--max-action-bytes", "100000")
    local = make("game:GuessTheNumber-v0")
    remote = RemoteEnv(server.url, "game:GuessTheNumber-v0", timeout=30)
    try:
        remote.reset(seed=0)
        observation, reward, terminated, truncated, info = remote.step("x" * 200_000)
        assert (reward, terminated, truncated) == (local.format_penalty, local.terminate_on_format_error, False)
        assert info.get("format_error") is True and info.get("action_too_large") is True
        assert remote.step("\\boxed{5}")[4].get("format_error") is not True  # the session goes on
    finally:
        remote.close()
    with connect(server.url.replace("http://", "ws://") + "/ws", open_timeout=10, max_size=None) as ws:
        ws.send(json.dumps({"op": "reset", "seed": 0}))
        ws.recv(10)
        ws.send(json.dumps({"op": "step", "action": "x" * 200_000}))
        answer = json.loads(ws.recv(10))
        assert answer["reward"] == local.format_penalty and answer["info"]["format_error"] is True


def test_a_body_over_the_cap_on_other_routes_is_still_413(guess_server):
    with httpx.Client(base_url=guess_server.url, timeout=10) as client:
        session = client.post("/sessions", json={}).json()["session_id"]
        response = client.post(f"/sessions/{session}/reset", json={"seed": 0, "options": {"x": "a" * 1_000_000}})
        assert response.status_code == 413 and response.json()["detail"]
        client.delete(f"/sessions/{session}")


@pytest.mark.parametrize(
    "settings, named",
    [
        ({"step_timeout": -1}, "step_timeout"),
        ({"idle_timeout": float("nan")}, "idle_timeout"),
        ({"body_timeout": 0}, "body_timeout"),
        ({"reap_interval": float("inf")}, "reap_interval"),
        ({"max_body_bytes": -5}, "max_body_bytes"),
        ({"max_action_bytes": 0}, "max_action_bytes"),
        ({"max_sessions": "10"}, "max_sessions"),
        ({"max_sessions": 0}, "max_sessions"),
        ({"max_sessions": True}, "max_sessions"),
    ],
)
def test_a_serve_config_out_of_range_is_refused_at_construction_naming_the_field(settings, named):
    from gem_core.errors import GemError
    from gem_core.serve.app import ServeConfig

    with pytest.raises(GemError, match=named):
        ServeConfig(**settings)
