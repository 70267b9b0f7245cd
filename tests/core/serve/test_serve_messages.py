"""`gem serve` and `gem-retrieval-server` on a port another program holds: one line that says the fix."""

from __future__ import annotations

import socket
import subprocess
import sys

import pytest

pytest.importorskip("starlette")
pytest.importorskip("uvicorn")

FIX = "choose another --port, or --port 0 for a free one"


@pytest.mark.parametrize("command", ["serve", "retrieval"])
def test_a_port_in_use_is_one_line_that_says_to_choose_another(command):
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        port = held.getsockname()[1]
        if command == "serve":
            argv = [sys.executable, "-m", "gem_core.cli", "serve", "game:GuessTheNumber-v0", "--port", str(port)]
            prefix = "gem serve"
        else:
            pytest.importorskip("bm25s")
            argv = [sys.executable, "-m", "gem_core.tools.retrieval_server", "--port", str(port)]
            prefix = "gem-retrieval-server"
        done = subprocess.run(argv, capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)
    assert done.returncode == 2, done
    assert "Traceback" not in done.stderr and done.stderr.count("\n") == 1, done.stderr
    assert done.stderr == f"{prefix}: cannot listen on 127.0.0.1:{port}: Address already in use; {FIX}.\n"
