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


@pytest.fixture
def record_judged_episodes():
    """The function below, for tests that record judged episodes to replay or re-judge them."""
    return _record_judged_episodes


def _record_judged_episodes(judge, tokenizer, answer: str, path: Path) -> Path:
    """Three ``judge:Sample`` episodes (seeds 0-2) answered with ``answer``, judged by ``judge``, written to
    ``path`` as trajectories (the judge stays open; the caller closes it)."""
    import asyncio

    import gem_core
    from gem_core.rollout import run_episodes
    from gem_core.rollout.trajectory_io import write_trajectories
    from gem_core.testing import ScriptedPolicy

    policy = ScriptedPolicy(tokenizer, [answer])
    trajectories = asyncio.run(
        run_episodes(lambda: gem_core.make("judge:Sample", judge=judge), policy, tokenizer, seeds=[0, 1, 2], env_id="judge:Sample")
    )
    write_trajectories(path, trajectories)
    return path
