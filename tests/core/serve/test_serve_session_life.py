"""A session's env after it ended, env calls that never return, oversized actions and answers JSON cannot
encode: what a hostile tester found in `gem serve`; each test failed before its fix."""

from __future__ import annotations

import json
import signal
import subprocess
import threading
import time

import pytest

pytest.importorskip("httpx")
pytest.importorskip("uvicorn")

import httpx
from serve_waits import SLOW_ENV, wait_for

from gem_core import make
from gem_core.serve.remote import RemoteEnv


def counts(client: httpx.Client) -> dict:
    """What the server process did to its envs, from a fresh session's reset info (that session is ended)."""
    sid = client.post("/sessions", json={}).json()["session_id"]
    info = client.post(f"/sessions/{sid}/reset", json={}).json()["info"]
    client.delete(f"/sessions/{sid}")
    return info


def in_thread(call) -> tuple[threading.Thread, dict]:
    out: dict = {}
    thread = threading.Thread(target=lambda: out.setdefault("reply", call()), daemon=True)
    thread.start()
    return thread, out


def strict_json(text: str):
    def refuse(token):
        raise ValueError(f"non-standard JSON token {token}")

    return json.loads(text, parse_constant=refuse)


# --- 1. nothing runs on an ended session, and its env is closed only when no call of it runs ---------

def test_a_step_queued_behind_one_that_timed_out_is_a_404_and_never_runs_on_the_closed_env(start_server):
    server = start_server("test:Slow-v0", "--import", SLOW_ENV, "--step-timeout", "1")
    with httpx.Client(base_url=server.url, timeout=20) as client:
        sid = client.post("/sessions", json={}).json()["session_id"]
        assert client.post(f"/sessions/{sid}/reset", json={}).status_code == 200
        first, a = in_thread(lambda: httpx.post(f"{server.url}/sessions/{sid}/step", json={"action": "sleep2.5"}, timeout=20))
        time.sleep(0.3)
        second, b = in_thread(lambda: httpx.post(f"{server.url}/sessions/{sid}/step", json={"action": "second"}, timeout=20))
        first.join(20)
        second.join(20)
        assert a["reply"].status_code == 504, a["reply"].text
        assert b["reply"].status_code == 404, b["reply"].text
        # The env is closed once its timed-out step returns, and not before.
        assert wait_for(lambda: counts(client)["closes"] >= 2, 10)
        info = counts(client)
        assert info["used_after_close"] == 0 and info["closed_while_stepping"] == 0, info


def test_ending_a_session_during_a_step_closes_its_env_after_the_step(start_server):
    server = start_server("test:Slow-v0", "--import", SLOW_ENV)
    with httpx.Client(base_url=server.url, timeout=20) as client:
        sid = client.post("/sessions", json={}).json()["session_id"]
        assert client.post(f"/sessions/{sid}/reset", json={}).status_code == 200
        stepping, out = in_thread(lambda: httpx.post(f"{server.url}/sessions/{sid}/step", json={"action": "sleep1"}, timeout=20))
        time.sleep(0.4)
        assert client.delete(f"/sessions/{sid}").status_code == 200
        assert client.post(f"/sessions/{sid}/step", json={"action": "x"}).status_code == 404
        stepping.join(20)
        assert out["reply"].status_code in (200, 404), out["reply"].text
        info = wait_for(lambda: (lambda i: i if i["closes"] >= 1 else None)(counts(client)), 10)
        assert info and info["closed_while_stepping"] == 0 and info["used_after_close"] == 0, info


# --- 2. Ctrl-C while an env call is stuck ------------------------------------------------------------

def test_ctrl_c_stops_the_server_promptly_while_an_env_call_is_stuck(start_server):
    server = start_server("test:Slow-v0", "--import", SLOW_ENV, "--step-timeout", "1")
    with httpx.Client(base_url=server.url, timeout=20) as client:
        sid = client.post("/sessions", json={}).json()["session_id"]
        client.post(f"/sessions/{sid}/reset", json={})
        assert client.post(f"/sessions/{sid}/step", json={"action": "sleep30"}).status_code == 504
    server.process.send_signal(signal.SIGINT)
    try:
        server.process.wait(8)
    except subprocess.TimeoutExpired:
        pytest.fail("gem serve still runs 8 s after Ctrl-C while an env call is stuck")
    assert "still running" in server.process.stderr.read()


# --- 3. env construction, sample and close are bounded and counted like steps ----------------------

def test_a_hung_env_creation_is_a_504_that_frees_its_slot_and_shows_in_health(start_server, monkeypatch, tmp_path):
    flag = tmp_path / "slow_init"
    monkeypatch.setenv("GEM_TEST_SLOW_INIT", str(flag))
    server = start_server("test:Slow-v0", "--import", SLOW_ENV, "--step-timeout", "1", "--max-sessions", "2")
    with httpx.Client(base_url=server.url, timeout=4) as client:
        held = client.post("/sessions", json={})
        assert held.status_code == 201
        flag.touch()
        started = time.monotonic()
        reply = client.post("/sessions", json={})
        assert reply.status_code == 504 and time.monotonic() - started < 3, reply.text
        assert wait_for(lambda: client.get("/health").json()["stuck_steps"] == 1, 3)
        flag.unlink()
        assert client.post("/sessions", json={}).status_code == 201  # the timed-out creation's slot is free


def test_a_hung_sample_or_close_answers_within_the_step_timeout_and_shows_in_health(start_server):
    server = start_server("test:Slow-v0", "--import", SLOW_ENV, "--step-timeout", "1")
    with httpx.Client(base_url=server.url, timeout=6) as client:
        sid = client.post("/sessions", json={}).json()["session_id"]
        client.post(f"/sessions/{sid}/reset", json={"options": {"sample_sleep": 4}})
        assert client.post(f"/sessions/{sid}/sample", json={}).status_code == 504
        assert wait_for(lambda: client.get("/health").json()["stuck_steps"] == 1, 3)
        sid = client.post("/sessions", json={}).json()["session_id"]
        client.post(f"/sessions/{sid}/reset", json={"options": {"close_sleep": 4}})
        started = time.monotonic()
        assert client.delete(f"/sessions/{sid}").status_code == 200
        assert time.monotonic() - started < 3
        assert wait_for(lambda: client.get("/health").json()["stuck_steps"] == 2, 3)


# --- 4. an oversized action costs a turn, like any malformed action -------------------------------

def test_an_oversized_action_costs_a_turn_like_a_local_malformed_one(start_server):
    server = start_server("game:GuessTheNumber-v0", "--max-action-bytes", "1000")
    local = make("game:GuessTheNumber-v0")
    remote = RemoteEnv(server.url, "game:GuessTheNumber-v0", timeout=20)
    try:
        local.reset(seed=0)
        remote.reset(seed=0)
        for _ in range(12):
            expected, got = local.step("x" * 5000), remote.step("x" * 5000)
            assert got[1:4] == expected[1:4]
            assert got[4].get("action_too_large") is True or got[2] or got[3]
        assert got[2] or got[3], "the episode never ended"
    finally:
        remote.close()


# --- 5. an answer JSON cannot encode ---------------------------------------------------------------

def test_info_json_cannot_encode_is_a_json_500_and_non_finite_floats_are_null(start_server):
    from websockets.sync.client import connect

    server = start_server("test:Slow-v0", "--import", SLOW_ENV)
    with httpx.Client(base_url=server.url, timeout=10) as client:
        sid = client.post("/sessions", json={}).json()["session_id"]
        client.post(f"/sessions/{sid}/reset", json={})
        for action in ("circular", "deep"):
            reply = client.post(f"/sessions/{sid}/step", json={"action": action})
            assert reply.status_code == 500 and "info" in reply.json()["detail"], reply.text
        reply = client.post(f"/sessions/{sid}/step", json={"action": "nan"})
        answer = strict_json(reply.text)
        assert answer["reward"] is None and answer["info"] == {"x": None, "y": [None, 1.5]}, reply.text
        assert client.post(f"/sessions/{sid}/step", json={"action": "ok"}).status_code == 200
    with connect(server.url.replace("http://", "ws://") + "/ws", open_timeout=10) as ws:
        ws.send(json.dumps({"op": "reset"}))
        ws.recv(10)
        ws.send(json.dumps({"op": "step", "action": "circular"}))
        error = json.loads(ws.recv(10))
        assert error["status"] == 500 and "info" in error["error"], error
        ws.send(json.dumps({"op": "step", "action": "nan"}))
        assert strict_json(ws.recv(10))["reward"] is None
        ws.send(json.dumps({"op": "step", "action": "ok"}))
        assert json.loads(ws.recv(10))["observation"] == "ok"  # the socket stays open


def test_sigterm_while_a_step_is_in_flight_stops_the_server_without_waiting_out_the_step_timeout(start_server):
    """uvicorn's graceful shutdown waits for requests in flight: a hung step held the server for the whole
    --step-timeout after Ctrl-C or SIGTERM."""
    server = start_server("test:Slow-v0", "--import", SLOW_ENV, "--step-timeout", "60")
    with httpx.Client(base_url=server.url, timeout=20) as client:
        sid = client.post("/sessions", json={}).json()["session_id"]
        client.post(f"/sessions/{sid}/reset", json={})
    hung, _ = in_thread(lambda: httpx.post(f"{server.url}/sessions/{sid}/step", json={"action": "sleep3600"}, timeout=90))
    time.sleep(1.5)  # the step is in the env's thread by now
    started = time.monotonic()
    server.process.send_signal(signal.SIGTERM)
    try:
        server.process.wait(20)
    except subprocess.TimeoutExpired:
        pytest.fail("gem serve still runs 20 s after SIGTERM while a step is in flight")
    assert time.monotonic() - started < 20
    # uvicorn re-raises the SIGTERM it caught once it has stopped: the process ends by it
    assert server.process.returncode in (0, -signal.SIGTERM), server.process.stderr.read()
    hung.join(10)
