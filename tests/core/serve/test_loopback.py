"""gem_core.serve.loopback: the one way an in-process server (the agent endpoint, the generation server) listens."""

from __future__ import annotations

import asyncio

import httpx
import pytest

from gem_core.errors import UsageError
from gem_core.serve.loopback import LoopbackServer


async def _app(scope, receive, send):
    """An ASGI app answering every request with the id of the loop it runs on."""
    if scope["type"] != "http":
        return
    body = str(id(asyncio.get_running_loop())).encode()
    await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/plain")]})
    await send({"type": "http.response.body", "body": body})


def test_serves_on_loopback_runs_coroutines_on_the_servers_loop_and_stops_twice():
    server = LoopbackServer("gem-test-loopback", _app, body_timeout=5)
    with pytest.raises(UsageError, match="call start"):
        server.run(lambda: asyncio.sleep(0))
    made_on = []

    async def before() -> None:
        made_on.append(id(asyncio.get_running_loop()))

    port = server.start(before_serving=before)
    try:
        assert port > 0 and server.start() == port  # a second start is the same server
        answered = httpx.get(f"http://127.0.0.1:{port}/", timeout=10).text

        async def loop_id() -> int:
            return id(asyncio.get_running_loop())

        assert int(answered) == server.run(loop_id) == made_on[0]
    finally:
        server.stop()
    server.stop()
    with pytest.raises(httpx.ConnectError):
        httpx.get(f"http://127.0.0.1:{port}/", timeout=2)


def test_a_failing_before_serving_stops_the_server_and_raises():
    import threading

    server = LoopbackServer("gem-test-loopback-failing", _app, body_timeout=5)

    async def broken() -> None:
        raise ValueError("setup failed")

    with pytest.raises(ValueError, match="setup failed"):
        server.start(before_serving=broken)
    assert server.loop is None
    assert not [t for t in threading.enumerate() if t.name == "gem-test-loopback-failing"]


def test_a_port_in_use_or_out_of_range_is_the_projects_error_naming_port_and_0():
    """bind's bare OSError, TypeError or OverflowError used to escape every in-process server's start."""
    from gem_core.errors import InvalidArgument, StartFailed

    for bad in ("abc", -1, 70000, True, 2.5, None):
        with pytest.raises(InvalidArgument, match=r"port=.*0 picks a free port"):
            LoopbackServer("gem-test-loopback", _app, port=bad, body_timeout=5)
    first = LoopbackServer("gem-test-loopback", _app, body_timeout=5)
    port = first.start()
    try:
        second = LoopbackServer("gem-test-loopback", _app, port=port, body_timeout=5)
        with pytest.raises(StartFailed, match=rf"127.0.0.1:{port}.*port=0 for a free one"):
            second.start()
        assert second.loop is None  # nothing left running; a later start may try again
    finally:
        first.stop()


def test_a_socket_that_cannot_bind_is_closed_not_left_to_the_collector():
    """listening_socket raised with its socket open when the port was taken: an fd held until collected."""
    import gc
    import socket
    import warnings

    from gem_core.serve.asgi import listening_socket

    taken = listening_socket("127.0.0.1", 0)
    gc.collect()  # sockets earlier tests left to the collector warn now, not among this test's warnings (found by CI)
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", ResourceWarning)
            with pytest.raises(OSError):
                listening_socket("127.0.0.1", taken.getsockname()[1])
            gc.collect()
        assert not [w for w in caught if issubclass(w.category, ResourceWarning) and isinstance(w.source, socket.socket)]
    finally:
        taken.close()
