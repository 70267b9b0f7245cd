"""Hostile clients for the server tests: servers under a lowered open-file limit, half-sent headers,
and the checks that the server keeps answering and ends what stalls."""

from __future__ import annotations

import resource
import socket
import subprocess
import sys
import time
from urllib.parse import urlsplit

from server_process import ServerProcess

_UNDER_LIMIT = """\
import resource, runpy, sys
resource.setrlimit(resource.RLIMIT_NOFILE, ({nofile}, {nofile}))
module = sys.argv.pop(1)
runpy.run_module(module, run_name="__main__", alter_sys=True)
"""


class LimitedServer(ServerProcess):
    """``python -m MODULE ARGS`` in a child whose open-file limit is ``nofile`` (soft and hard)."""

    def __init__(self, nofile: int, module: str, args: list[str], ready: str, name: str):
        command = [sys.executable, "-c", _UNDER_LIMIT.format(nofile=nofile), module, *args]
        super().__init__(command, ready, name)

    def stop_and_read_stderr(self) -> str:
        self.process.terminate()
        try:
            _, stderr = self.process.communicate(timeout=15)
        except subprocess.TimeoutExpired:
            self.process.kill()
            _, stderr = self.process.communicate()
        return stderr


def address(url: str) -> tuple[str, int]:
    parts = urlsplit(url)
    return parts.hostname, parts.port


def allow_open_files(n: int) -> bool:
    """Raise this process's soft open-file limit to ``n`` if the hard one allows; whether it does."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft >= n:
        return True
    if hard != resource.RLIM_INFINITY and hard < n:
        return False
    resource.setrlimit(resource.RLIMIT_NOFILE, (n, hard))
    return True


def half_sent_headers(url: str, n: int, path: str = "/health") -> list[socket.socket]:
    """``n`` connections that each send part of a request's headers and stop (the caller closes them)."""
    sockets = []
    for _ in range(n):
        sock = socket.socket()
        sock.settimeout(5)
        try:
            sock.connect(address(url))
            sock.sendall(f"GET {path} HTTP/1.1\r\nHost: x\r\nUser-Agent: half".encode())  # no blank line
        except OSError:
            pass
        sockets.append(sock)
    return sockets


def answers_200(url: str, attempts: int) -> bool:
    """Whether ``GET url`` answers 200 within ``attempts`` tries 0.5 s apart (each with a 5 s timeout);
    a 503 (the connection caps) is retried: the caps free as stalled connections end."""
    import httpx

    for _ in range(attempts):
        try:
            if httpx.get(url, timeout=5).status_code == 200:
                return True
        except httpx.HTTPError:
            pass
        time.sleep(0.5)
    return False


def closed_by_server(sock: socket.socket, wait: float) -> bool:
    """Whether the server ends the connection (EOF or reset, after any answer) within ``wait`` seconds."""
    sock.settimeout(wait)
    try:
        while sock.recv(65536):
            pass
        return True
    except (ConnectionResetError, BrokenPipeError):
        return True
    except TimeoutError:
        return False


def assert_a_half_header_flood_leaves_health_answering(server: LimitedServer, flood_url: str, health_url: str, n: int = 2000) -> None:
    """Open ``n`` connections that stall mid-headers against ``server``; ``health_url`` must still answer 200,
    the server must end the stalled connections itself, and never run out of file descriptors."""
    sockets: list[socket.socket] = []
    try:
        sockets = half_sent_headers(flood_url, n, path=urlsplit(flood_url).path or "/health")
        assert answers_200(health_url, attempts=20), "the server stopped answering /health"
        # The stalled connections are ended by the server, not held forever.
        assert all(closed_by_server(sock, 15) for sock in sockets[::100])
    finally:
        for sock in sockets:
            sock.close()
        stderr = server.stop_and_read_stderr()
    assert "Too many open files" not in stderr, stderr[-2000:]
