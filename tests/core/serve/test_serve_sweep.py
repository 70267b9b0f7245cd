"""What a hostile sweep of `gem serve` and RemoteEnv found: each test failed before its fix."""

from __future__ import annotations

import asyncio
import math
import subprocess
import sys
import textwrap
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

pytest.importorskip("httpx")
pytest.importorskip("uvicorn")

import httpx  # noqa: E402
from serve_waits import SLOW_ENV, sessions, wait_for  # noqa: E402

from gem_core.serve.app import ServeConfig  # noqa: E402
from gem_core.serve.remote import RemoteEnv, RemoteEnvError  # noqa: E402

STUCK = "env threads are stuck in steps that never returned; restart the server"


# --- 1. --max-sessions under concurrent creation ---------------------------------------------------

def test_max_sessions_holds_when_50_sessions_open_at_once(start_server):
    server = start_server("game:GuessTheNumber-v0", "--max-sessions", "5")

    async def create_all() -> list[int]:
        async with httpx.AsyncClient(base_url=server.url, timeout=30, limits=httpx.Limits(max_connections=60)) as client:
            replies = await asyncio.gather(*(client.post("/sessions", json={}) for _ in range(50)))
        return sorted(r.status_code for r in replies)

    statuses = asyncio.run(create_all())
    assert statuses.count(201) == 5 and statuses.count(429) == 45, statuses
    assert sessions(server.url) == 5


# --- 2. steps that never return fill the env threads -----------------------------------------------

def test_hung_steps_are_counted_and_a_full_pool_is_a_503_that_says_to_restart(start_server, monkeypatch):
    monkeypatch.setenv("GEM_TEST_ENV_THREADS", "2")
    server = start_server("test:Slow-v0", "--import", SLOW_ENV, "--step-timeout", "1")
    with httpx.Client(base_url=server.url, timeout=30) as client:
        for hung in (1, 2):
            sid = client.post("/sessions", json={}).json()["session_id"]
            assert client.post(f"/sessions/{sid}/reset", json={}).status_code == 200
            reply = client.post(f"/sessions/{sid}/step", json={"action": "sleep6"})
            assert reply.status_code == 504, reply.text
            health = client.get("/health")
            if hung == 1:  # one of two threads stuck: still serving, but it shows
                assert health.status_code == 200 and health.json()["stuck_steps"] == 1, health.text
        assert health.status_code == 503, health.text
        assert health.json()["stuck_steps"] == 2
        assert health.json()["detail"] == f"2 {STUCK}"
        refused = client.post("/sessions", json={})
        assert refused.status_code == 503 and refused.json()["detail"] == f"2 {STUCK}", refused.text
        # The threads return at last: the server serves again.
        assert wait_for(lambda: client.get("/health").json()["stuck_steps"] == 0, 20)
        assert client.get("/health").status_code == 200
        assert client.post("/sessions", json={}).status_code == 201


def test_a_hung_native_async_step_is_cancelled_and_holds_no_thread(start_server):
    server = start_server("test:HangsAsync-v0", "--import", SLOW_ENV, "--step-timeout", "1")
    with httpx.Client(base_url=server.url, timeout=30) as client:
        sid = client.post("/sessions", json={}).json()["session_id"]
        assert client.post(f"/sessions/{sid}/reset", json={}).json()["info"]["cancelled"] == 0
        assert client.post(f"/sessions/{sid}/step", json={"action": "a"}).status_code == 504
        assert client.get("/health").json()["stuck_steps"] == 0
        sid = client.post("/sessions", json={}).json()["session_id"]
        assert client.post(f"/sessions/{sid}/reset", json={}).json()["info"]["cancelled"] == 1


# --- 3. the client gives up before the server, and leaves sessions behind --------------------------

def test_the_clients_default_timeout_outlasts_the_servers_step_timeout():
    assert RemoteEnv("http://127.0.0.1:1", "x").timeout > ServeConfig().step_timeout


@pytest.mark.parametrize("action", ["sleep4", "raise"])
def test_a_session_the_client_abandons_is_ended_on_the_server(start_server, action):
    server = start_server("test:Slow-v0", "--import", SLOW_ENV, "--step-timeout", "30")
    env = RemoteEnv(server.url, "test:Slow-v0", timeout=1.5)
    try:
        env.reset()
        assert sessions(server.url) == 1
        *_, truncated, info = env.step(action)
        assert truncated and "error" in info
        assert wait_for(lambda: sessions(server.url) == 0, 3), "the abandoned session is still held"
    finally:
        env.close()


# --- 4. a client stopped with Ctrl-C ---------------------------------------------------------------

def test_a_client_stopped_with_ctrl_c_ends_its_sessions_at_exit(start_server):
    server = start_server("game:GuessTheNumber-v0")
    script = textwrap.dedent(f"""
        from gem_core.serve.remote import RemoteEnv
        envs = [RemoteEnv({server.url!r}, "game:GuessTheNumber-v0") for _ in range(3)]
        for env in envs:
            env.reset()
        print("open", flush=True)
        raise KeyboardInterrupt
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert "open" in done.stdout, done.stderr
    assert sessions(server.url) == 0


# --- a scripted server for answers gem serve never gives -------------------------------------------

@pytest.fixture
def scripted_server():
    """A server that answers each path with a scripted (status, headers, body)."""
    script: dict[str, tuple[int, dict[str, str], bytes]] = {}

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self):
            self.rfile.read(int(self.headers.get("content-length") or 0))
            status, headers, body = script.get(self.path.rsplit("/", 1)[-1], (404, {}, b'{"detail": "no"}'))
            self.send_response(status)
            for key, value in {"content-type": "application/json", **headers}.items():
                self.send_header(key, value)
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        do_DELETE = do_POST

        def log_message(self, *args):
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    script["sessions"] = (201, {}, b'{"session_id": "s1", "env_id": "x"}')
    script["reset"] = (200, {}, b'{"observation": "o", "info": {}}')
    yield f"http://127.0.0.1:{httpd.server_address[1]}", script
    httpd.shutdown()
    httpd.server_close()


# --- 5. a reward that is not a finite number -------------------------------------------------------

@pytest.mark.parametrize("reward", ["NaN", "Infinity", "-Infinity"])
def test_a_reward_that_is_not_finite_is_a_malformed_answer(scripted_server, reward):
    url, script = scripted_server
    script["step"] = (200, {}, f'{{"observation": "o", "reward": {reward}, "terminated": false, "truncated": false, "info": {{}}}}'.encode())
    env = RemoteEnv(url, "x", timeout=5)
    env.reset()
    observation, got, terminated, truncated, info = env.step("a")
    assert math.isfinite(got) and got == 0.0 and truncated and not terminated
    assert "malformed step answer" in info["error"]
    env.close()


# --- 6. a reset the env refuses ---------------------------------------------------------------------

def test_a_reset_the_env_refuses_is_a_422_naming_the_error_and_is_not_retried(start_server):
    server = start_server("test:Slow-v0", "--import", SLOW_ENV)
    env = RemoteEnv(server.url, "test:Slow-v0", timeout=20)
    try:
        with pytest.raises(RemoteEnvError) as caught:
            env.reset(options={"refuse": 1})
        assert caught.value.status == 422
        assert "ValueError: option 'refuse' is not supported" in str(caught.value)
        _, info = env.reset()  # the same session: one refused reset, then this one
        assert info["resets"] == 2
    finally:
        env.close()


# --- 8. messages ------------------------------------------------------------------------------------

def test_a_dead_server_is_named_with_the_fix(start_server):
    server = start_server("game:GuessTheNumber-v0")
    env = RemoteEnv(server.url, "game:GuessTheNumber-v0", timeout=5, retries=0)
    env.reset()
    server.kill()
    *_, truncated, info = env.step("\\boxed{5}")
    assert truncated
    assert f"is `gem serve` running at {server.url}?" in info["error"], info["error"]
    with pytest.raises(RemoteEnvError, match=f"is `gem serve` running at {server.url}\\?"):
        env.reset()
    env.close()


def test_a_redirect_names_its_status_and_location(scripted_server):
    url, script = scripted_server
    script["sessions"] = (302, {"location": "https://elsewhere.example/sessions"}, b"")
    env = RemoteEnv(url, "x", timeout=5)
    with pytest.raises(RemoteEnvError) as caught:
        env.reset()
    message = str(caught.value)
    assert "HTTP 302" in message and "https://elsewhere.example/sessions" in message, message
    assert "not a JSON object" not in message
    env.close()


def test_unknown_fields_in_a_create_session_request_are_a_422_naming_them(guess_server):
    reply = httpx.post(guess_server.url + "/sessions", json={"env_id": "game:GuessTheNumber-v0", "kwargs": {"a": 1}}, timeout=10)
    assert reply.status_code == 422, reply.text
    assert reply.json()["detail"] == "unknown field 'kwargs' in the session request; the accepted field is 'env_id'"
