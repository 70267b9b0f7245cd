"""An ASGI app served on 127.0.0.1 from an event-loop thread of its own, behind the project's connection limits.

The agent endpoint (an agent's OpenAI calls answered by the policy being trained) and the generation server (a stand-in
for ``vllm serve``) both live inside a trainer's process and must not block it: each gets one of these. The connection
guard is ``gem serve``'s (:class:`~gem_core.serve.connections.ConnectionGuard`), so a slow or flooding client is cut off
the same way everywhere, with one difference: no cap per client address. Every client of a loopback server connects
from 127.0.0.1, so such a cap would be a lower total cap that one client (one agent flooding its episode) fills for all;
the app bounds each client's requests itself (the agent endpoint, per episode) and the total cap is the last resort.
"""

from __future__ import annotations

import errno
import numbers
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from gem_core.errors import InvalidArgument, StartFailed, UsageError
from gem_core.serve.connections import ConnectionGuard, ConnectionLimits
from gem_core.transport.sync_bridge import LoopThread

__all__ = ["LoopbackServer", "check_port"]

T = TypeVar("T")

#: Seconds ``start`` waits for uvicorn to listen, and ``stop`` for it to finish open requests.
START_SECONDS = 30.0
STOP_SECONDS = 15.0


def check_port(port: Any, owner: str) -> int:
    """``port`` as an int, checked where its owner is made: socket's bind would refuse it only at start, with a bare
    TypeError or OverflowError.

    Raises:
        InvalidArgument: ``port`` is not a whole number from 0 to 65535; the message names ``owner``.
    """
    if isinstance(port, bool) or not isinstance(port, numbers.Integral) or not 0 <= int(port) <= 65535:
        raise InvalidArgument(f"{owner}: port={port!r} must be a whole number from 0 to 65535 (0 picks a free port).")
    return int(port)


class LoopbackServer:
    """Serve ``app`` on 127.0.0.1 (``port`` 0 picks a free one) from a thread named ``name``.

    Args:
        name: the thread's name, and how errors name the server.
        app: the ASGI app (built once by the caller).
        port: the port to listen on; 0 for any free port (read :attr:`port` after :meth:`start`).
        body_timeout: seconds a client may take to send a request body before the guard cuts it off.
        max_connections: connections held at once by all clients together (lowered to fit the open-file limit).
        error_body: ``(status, detail)`` to the JSON body of the 503 and 408 the guard answers itself, worded
            like the app's own errors (None: ``{"detail": ...}``).
        max_connections_setting: what the 503 past ``max_connections`` names as the way to raise it, as the owner's
            users set it (e.g. ``"AgentEndpointConfig.max_connections"``); None: no setting (the owner has none to offer).
            Not ``gem serve``'s flag: nobody starting a server in code can pass that.

    Raises:
        InvalidArgument: ``port`` is not a whole number from 0 to 65535.
    """

    def __init__(
        self, name: str, app: Any, *, port: int = 0, body_timeout: float, max_connections: int = ConnectionLimits.max_connections,
        error_body: Callable[[int, str], bytes] | None = None, max_connections_setting: str | None = None,
    ) -> None:
        self.name, self.app, self.port, self.body_timeout = name, app, check_port(port, name), body_timeout
        self.limits = ConnectionLimits(body_timeout=body_timeout, max_connections=max_connections, max_connections_per_client=None)
        self.error_body = error_body
        self.max_connections_setting = max_connections_setting
        self.loop: LoopThread | None = None
        self._server: Any = None
        self._serving: Any = None

    def start(self, before_serving: Callable[[], Awaitable[Any]] | None = None) -> int:
        """Listen and serve; returns the port. ``before_serving`` runs on the server's loop first (objects such as
        ``asyncio.Event`` must be made on the loop that awaits them); if it raises, the server is stopped and the
        error propagates.

        Raises:
            StartFailed: the port could not be listened on (in use: the message suggests ``port=0``), or uvicorn
                did not listen within 30 s (the server is stopped again).
        """
        import uvicorn

        from gem_core.serve.asgi import listening_socket

        if self.loop is not None:
            return self.port
        guard = ConnectionGuard(self.limits, error_body=self.error_body, max_connections_setting=self.max_connections_setting)
        try:
            sock = guard.listen(listening_socket("127.0.0.1", self.port))
        except OSError as error:
            fix = "; pass another port, or port=0 for a free one" if error.errno == errno.EADDRINUSE else ""
            raise StartFailed(f"{self.name} cannot listen on 127.0.0.1:{self.port}: {error.strerror or error}{fix}.") from None
        self.port = sock.getsockname()[1]
        self._server = uvicorn.Server(uvicorn.Config(
            self.app, http=guard.protocol_class(), loop="asyncio", log_level="warning", access_log=False,
            lifespan="off", timeout_keep_alive=30,
        ))
        self.loop = LoopThread(self.name)
        if before_serving is not None:
            try:
                self.loop.run(before_serving)
            except BaseException:
                self.stop()  # the loop thread and the socket go with the failed start
                sock.close()
                raise
        self._serving = self.loop.submit(self._server.serve(sockets=[sock]))
        deadline = time.monotonic() + START_SECONDS
        while not self._server.started and not self._serving.done() and time.monotonic() < deadline:
            time.sleep(0.01)
        if not self._server.started:
            self.stop()
            raise StartFailed(f"{self.name} did not start listening on 127.0.0.1:{self.port} within {START_SECONDS:g} s")
        return self.port

    def run(self, make_coroutine: Callable[[], Awaitable[T]]) -> T:
        """Run a coroutine on the server's loop (thread-safe) and return its result.

        Raises:
            UsageError: the server is not running.
        """
        if self.loop is None:
            raise UsageError(f"{self.name} is not running: call start() first")
        return self.loop.run(make_coroutine)

    def stop(self) -> None:
        """Stop serving, letting open requests finish for up to 15 s; safe to call twice."""
        if self.loop is None:
            return
        if self._server is not None:
            self._server.should_exit = True
        if self._serving is not None:
            try:
                self._serving.result(STOP_SECONDS)
            except Exception:  # noqa: BLE001  (a server that failed while serving is stopped all the same)
                pass
        self.loop.stop()
        self.loop = None
