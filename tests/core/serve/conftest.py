"""``gem serve`` as a child process on a loopback port, for the server and RemoteEnv tests."""

from __future__ import annotations

import pytest
from server_process import ServeProcess


@pytest.fixture
def start_server():
    """Starts ``gem serve`` processes for the test (all stopped at its end)."""
    pytest.importorskip("uvicorn")
    pytest.importorskip("httpx")
    servers: list[ServeProcess] = []

    def start(env_id: str = "game:GuessTheNumber-v0", *args: str, port: int = 0) -> ServeProcess:
        servers.append(ServeProcess(env_id, *args, port=port))
        return servers[-1]

    def restart(server: ServeProcess) -> ServeProcess:
        servers.append(server.restart())
        return servers[-1]

    start.restart = restart
    yield start
    for server in servers:
        server.stop()


@pytest.fixture(scope="module")
def guess_server():
    """One shared server for the tests that only read (module scope: started once)."""
    pytest.importorskip("uvicorn")
    server = ServeProcess("game:GuessTheNumber-v0", "--max-sessions", "400")
    yield server
    server.stop()
