"""``gem serve`` and RemoteEnv: misspelt reset fields, envs the server can never serve, and snapshots of a
remote env."""

from __future__ import annotations

import gc
import json
import select
import subprocess
import sys

import pytest

httpx = pytest.importorskip("httpx")
pytest.importorskip("starlette")

from gem_core import make  # noqa: E402
from gem_core.errors import UsageError  # noqa: E402

MISSPELT = [({"Seed": 5}, "'Seed'"), ({"sed": 5}, "'sed'"), ({"seed": 5, "option": {"index": 1}}, "'option'")]


@pytest.mark.parametrize("body, named", MISSPELT)
def test_a_reset_with_an_unknown_field_is_a_422_naming_it(guess_server, body, named):
    """Before the fix, {"Seed": 5}, {"sed": 5} and {"seed": 5, "option": ...} were answered 200 with the key
    silently dropped: an unseeded episode (or one without its options) instead of the one asked for."""
    with httpx.Client(base_url=guess_server.url, timeout=10) as client:
        session = client.post("/sessions", json={}).json()["session_id"]
        reply = client.post(f"/sessions/{session}/reset", json=body)
        assert reply.status_code == 422, reply.text
        detail = reply.json()["detail"]
        assert named in detail and "'seed'" in detail and "'options'" in detail
        assert client.post(f"/sessions/{session}/reset", json={"seed": 5, "options": None}).status_code == 200


@pytest.mark.parametrize("body, named", MISSPELT)
def test_a_websocket_reset_with_an_unknown_field_is_a_422_naming_it(guess_server, body, named):
    """Before the fix, {"op": "reset", "Seed": 5} over /ws was answered with an unseeded episode (the key dropped)."""
    from websockets.sync.client import connect

    with connect(guess_server.url.replace("http://", "ws://") + "/ws", open_timeout=10) as ws:
        ws.send(json.dumps({"op": "reset", **body}))
        answer = json.loads(ws.recv(10))
        assert answer.get("status") == 422, answer
        assert named in answer["error"] and "'seed'" in answer["error"]
        ws.send(json.dumps({"op": "reset", "seed": 5}))
        assert "observation" in json.loads(ws.recv(10))


@pytest.mark.parametrize("env_id, why", [("multi:TicTacToe-v0", "multi-agent"), ("webshop:train-html", "not shipped")])
def test_serve_refuses_at_start_an_env_it_can_never_serve(env_id, why):
    """Before the fix, `gem serve multi:TicTacToe-v0` started and handed out sessions whose every reset was a 500
    (AttributeError: no areset), and `gem serve webshop:train-html` started and every POST /sessions was a 500
    (EnvUnavailableError): the server printed its address instead of exiting 2 with the reason."""
    pytest.importorskip("uvicorn")
    process = subprocess.Popen([sys.executable, "-m", "gem_core.cli", "serve", env_id, "--port", "0"],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        ready, _, _ = select.select([process.stdout], [], [], 60)
        first = process.stdout.readline() if ready else "(no answer in 60 s)"
        assert first == "", f"gem serve {env_id} started: {first!r}"
        assert process.wait(30) == 2
        lines = process.stderr.read().strip().splitlines()
        assert len(lines) == 1 and f"cannot serve {env_id!r}" in lines[0] and why in lines[0], lines
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(10)
        process.stdout.close()
        process.stderr.close()


def test_a_remote_env_refuses_snapshots_plainly(guess_server, monkeypatch):
    """Before the fix, get_state()/spawn() deep-copied the private event-loop thread: InvalidArgumentType telling the
    user to "add '_loop_thread' to RemoteEnv.state_excludes", and the half-copied loops printed
    "Exception ignored in BaseEventLoop.__del__" tracebacks. EpisodeSession.fork failed the same way."""
    unraisable: list[object] = []
    monkeypatch.setattr(sys, "unraisablehook", unraisable.append)
    env = make(f"remote:{guess_server.url}/game:GuessTheNumber-v0", timeout=10)
    try:
        env.reset(seed=1)
        for call in (env.get_state, env.spawn, lambda: env.set_state({})):
            with pytest.raises(UsageError, match="cannot be snapshotted or spawned"):
                call()
        gc.collect()
        assert env.step("\\boxed{7}")[0]  # the env still plays
    finally:
        env.close()
    gc.collect()
    assert unraisable == []
