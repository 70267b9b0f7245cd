"""The scripted judge server (``judge_server.py``) as a child process on loopback."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import httpx
import pytest

from server_process import ServerProcess

pytest.importorskip("openai")

SERVER = Path(__file__).with_name("judge_server.py")


class JudgeServer(ServerProcess):
    def __init__(self, script: list[dict], tmp_path: Path):
        path = tmp_path / f"script-{id(script)}.json"
        path.write_text(json.dumps(script))
        super().__init__([sys.executable, str(SERVER), str(path)], r"listening on (http://\S+)", "judge server")

    def stats(self) -> dict:
        return httpx.get(self.url.removesuffix("/v1") + "/stats", timeout=5).json()


@pytest.fixture
def judge_server(tmp_path):
    """``judge_server(script)`` starts a scripted judge; every one started is stopped after the test."""
    started: list[JudgeServer] = []

    def start(script: list[dict]) -> JudgeServer:
        server = JudgeServer(script, tmp_path)
        started.append(server)
        return server

    yield start
    for server in started:
        server.stop()
