"""Fixtures for the tool tests: the sandbox mode to test, retrieval servers of a test's own, the MCP test server."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from ci_guard import skip_unless_ci

from gem_core.tools import sandbox
from gem_core.tools.sandbox import isolation
from server_process import RetrievalServerProcess

# The tests import `toy_env`, and spawned vector-env workers must import it by name too: keep this folder
# on sys.path whatever pytest's import mode.
if str(Path(__file__).parent) not in sys.path:
    sys.path.insert(0, str(Path(__file__).parent))


@pytest.fixture(scope="session")
def bwrap_mode() -> str:
    """``"bwrap"``, or skip the test where bubblewrap cannot run (the hostile suite needs it); in CI
    (``CI=true``) a missing bubblewrap fails the test instead, so the hostile suite cannot pass unrun."""
    if "bwrap" not in sandbox.available_modes():
        reason = f"bubblewrap is not usable here (apt-get install -y bubblewrap): {isolation.probe_cached('bwrap', sys.executable)}"
        skip_unless_ci(reason)
    return "bwrap"


@pytest.fixture
def start_retrieval_server():
    """Starts a retrieval server of the test's own (stopped at the end of the test)."""
    pytest.importorskip("bm25s")
    pytest.importorskip("httpx")
    servers = []

    def start(corpus: Path | None = None) -> RetrievalServerProcess:
        servers.append(RetrievalServerProcess(corpus))
        return servers[-1]

    yield start
    for server in servers:
        server.stop()
