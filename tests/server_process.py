"""Servers the suite starts as child processes on a free loopback port: the BM25 retrieval server
(tools and QA tests) and ``gem serve`` (server and RemoteEnv tests)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path


class ServerProcess:
    """A server child process that prints its address on its first line; ``url`` is that address."""

    def __init__(self, command: list[str], ready: str, name: str):
        self.process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        line = self.process.stdout.readline()
        match = re.search(ready, line)
        if not match:
            self.stop()
            raise RuntimeError(f"{name} did not start: {line!r} {self.process.stderr.read()!r}")
        self.url = match.group(1)
        self.port = int(re.match(r"http://[^:/]+:(\d+)", self.url).group(1))

    def alive(self) -> bool:
        return self.process.poll() is None

    def kill(self) -> None:
        self.process.kill()
        self.process.wait(10)

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


class RetrievalServerProcess(ServerProcess):
    """``gem-retrieval-server`` (over the shipped corpus unless ``corpus`` is given)."""

    def __init__(self, corpus: Path | None = None):
        command = [sys.executable, "-m", "gem_core.tools.retrieval_server", "--port", "0"]
        if corpus is not None:
            command += ["--corpus", str(corpus)]
        super().__init__(command, r"listening on (http://\S+)", "retrieval server")


class ServeProcess(ServerProcess):
    """``gem serve ENV_ID --port PORT ...``."""

    def __init__(self, env_id: str, *args: str, port: int = 0):
        self.env_id, self.args = env_id, args
        command = [sys.executable, "-m", "gem_core.cli", "serve", env_id, "--port", str(port), *args]
        super().__init__(command, r"at (http://\S+)", "gem serve")

    def restart(self) -> ServeProcess:
        """A new server on the same port (the old one must be dead)."""
        return ServeProcess(self.env_id, *self.args, port=self.port)
