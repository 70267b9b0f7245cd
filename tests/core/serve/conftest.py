"""``gem serve`` as a child process on a loopback port, for the server and RemoteEnv tests."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest


class ServeProcess:
    """``gem serve ENV_ID --port PORT ...`` in a child process; ``url`` is its base address."""

    def __init__(self, env_id: str, *args: str, port: int = 0):
        self.env_id, self.args = env_id, args
        command = [sys.executable, "-m", "gem_core.cli", "serve", env_id, "--port", str(port), *args]
        self.process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        line = self.process.stdout.readline()
        match = re.search(r"at (http://\S+)", line)
        if not match:
            self.stop()
            raise RuntimeError(f"gem serve did not start: {line!r} {self.process.stderr.read()!r}")
        self.url = match.group(1)
        self.port = int(self.url.rsplit(":", 1)[1])

    def alive(self) -> bool:
        return self.process.poll() is None

    def kill(self) -> None:
        self.process.kill()
        self.process.wait(10)

    def restart(self) -> "ServeProcess":
        """A new server on the same port (the old one must be dead)."""
        return ServeProcess(self.env_id, *self.args, port=self.port)

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        for stream in (self.process.stdout, self.process.stderr):
            stream.close()


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
