"""Connection limits for GEM's uvicorn servers (``gem serve``, the retrieval server).

uvicorn bounds neither how long a client may take to send its request headers nor how many
connections it holds: a client that sends half its headers and stops keeps its socket forever, and a
thousand of them exhaust the process's open files (``accept`` then fails with "Too many open files"
and nobody is served, ``/health`` included; the token check never runs because the headers never end).
:class:`ConnectionGuard` adds what is missing:

- **connection caps**, total and per client address, checked in the listening socket's ``accept``: a
  connection over either cap is answered 503 (naming the setting to raise) and closed at once. A server whose
  clients all share one address (a loopback server's agents) has no cap per address: it would be a lower
  total that one client fills for all, so such a server bounds each client's requests itself. The total
  is held under the process's open-file limit (whose soft value is raised to the hard one), so
  ``accept`` does not run out of files. A WebSocket keeps its slot until it closes;
- a **header deadline**: a request's headers must be complete ``header_timeout`` seconds after its first
  byte (or after connecting); past it the server answers 408 and closes;
- a **body deadline**: a body must have arrived ``body_timeout`` seconds (plus a second's grace, so the
  app's own 408 comes first) after its headers, even on a route that answered without reading it.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import json
import resource
import socket
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

__all__ = ["ConnectionLimits", "ConnectionGuard", "add_connection_arguments", "connection_limits_from", "port_error", "open_file_budget"]

#: Seconds of grace after ``body_timeout`` before the protocol cuts a body off (the app answers 408 first).
_BODY_GRACE = 1.0
#: Seconds a refused connection is kept half-closed so that its 503 is read, not lost to a reset.
_REFUSED_LINGER = 0.5
#: Refused connections kept lingering at once; more are closed at once (they must not use up files).
_MAX_LINGERING = 64


@dataclass(frozen=True)
class ConnectionLimits:
    """What one client connection may cost a server."""

    #: Seconds to send a request's headers, from its first byte (or from connecting).
    header_timeout: float = 10.0
    #: Seconds to send a request's body once its headers are in.
    body_timeout: float = 10.0
    #: Connections held at once, WebSockets included (lowered to fit the open-file limit).
    max_connections: int = 1024
    #: Connections held at once from one client address; None: no cap per address (see the module docstring).
    max_connections_per_client: int | None = 512


def open_file_budget(requested: int) -> int:
    """``requested``, lowered to leave an eighth of the open-file limit (at least 64) for everything else."""
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY:
        return requested
    return max(1, min(requested, soft - max(64, soft // 8)))


def port_error(port: int, flag: str = "--port") -> str | None:
    """Why ``port`` cannot be listened on (None when it can): the range check Python's socket leaves
    to an ``OverflowError`` traceback."""
    if 0 <= port <= 65535:
        return None
    return f"{flag} {port} is out of range: expected 0 to 65535 (0 picks a free port)"


def _positive(kind: type) -> Any:
    def parse(text: str) -> Any:
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
        if not value > 0 or value != value or value == float("inf"):
            raise argparse.ArgumentTypeError(f"{text} must be a positive finite number")
        return value

    parse.__name__ = f"positive {kind.__name__}"
    return parse


positive_int, positive_float = _positive(int), _positive(float)


def add_connection_arguments(parser: argparse.ArgumentParser, defaults: ConnectionLimits = ConnectionLimits()) -> None:
    """The ``--header-timeout``, ``--body-timeout``, ``--max-connections`` and ``--max-connections-per-client`` flags."""
    parser.add_argument("--header-timeout", type=positive_float, default=defaults.header_timeout,
                        help=f"seconds a client has to send a request's headers (default {defaults.header_timeout:g})")
    parser.add_argument("--body-timeout", type=positive_float, default=defaults.body_timeout,
                        help=f"seconds a client has to send a request's body (default {defaults.body_timeout:g})")
    parser.add_argument("--max-connections", type=positive_int, default=defaults.max_connections,
                        help=f"connections held at once, lowered to fit the open-file limit (default {defaults.max_connections})")
    parser.add_argument("--max-connections-per-client", type=positive_int, default=defaults.max_connections_per_client,
                        help=f"connections held at once from one client address (default {defaults.max_connections_per_client})")


def connection_limits_from(args: argparse.Namespace) -> ConnectionLimits:
    """The :class:`ConnectionLimits` the flags of :func:`add_connection_arguments` ask for."""
    return ConnectionLimits(
        header_timeout=args.header_timeout,
        body_timeout=args.body_timeout,
        max_connections=args.max_connections,
        max_connections_per_client=args.max_connections_per_client,
    )


def _detail_body(status: int, detail: str) -> bytes:
    """The JSON body of an answer the guard sends itself, as ``gem serve``'s app words its own errors."""
    return json.dumps({"detail": detail}).encode()


_REASONS = {408: "Request Timeout", 503: "Service Unavailable"}


def _raw_answer(status: int, body: bytes) -> bytes:
    head = f"HTTP/1.1 {status} {_REASONS[status]}\r\nContent-Type: application/json\r\nContent-Length: {len(body)}\r\nConnection: close\r\n\r\n"
    return head.encode() + body


class ConnectionGuard:
    """The connection limits of one server: a gated listening socket and uvicorn's protocol class.

    The caps are checked in the listening socket's ``accept``, before a connection costs more than a
    moment's file descriptor: asyncio accepts a whole batch of waiting connections in one go (up to the
    listen backlog), so a check in the protocol would come after the process had run out of files.

    Use: ``sock = guard.listen(listening_socket(host, port))`` and
    ``uvicorn.Config(app, http=guard.protocol_class(), loop="asyncio")`` (uvloop accepts in C, past
    the gate), then ``uvicorn.Server(config).run(sockets=[sock])``.

    ``error_body(status, detail)`` words the 503 and 408 the guard answers itself, so that they read like the
    app's own errors (an OpenAI client raises only on an OpenAI-shaped body); None: ``{"detail": ...}``, as ``gem serve``'s.
    ``max_connections_setting`` is what the 503 past the total cap names as the way to raise it, as the server's
    user sets it (a flag of a command, a config field of a server started in code); None names no setting.
    """

    def __init__(self, limits: ConnectionLimits = ConnectionLimits(), *, error_body: Callable[[int, str], bytes] | None = None,
                 max_connections_setting: str | None = "--max-connections"):
        self.limits = limits
        self.error_body = error_body or _detail_body
        self.max_connections_setting = max_connections_setting
        _raise_open_file_limit()
        #: The total cap in force: ``limits.max_connections`` under the open-file limit.
        self.max_connections = open_file_budget(limits.max_connections)
        self.total = 0
        self.by_client: collections.Counter[str] = collections.Counter()
        self.lingering = 0

    # --- accounting --------------------------------------------------------------------------------

    def _refusal(self, client: str) -> str | None:
        per_client = self.limits.max_connections_per_client
        if per_client is not None and self.by_client[client] >= per_client:
            return (f"this client already holds {per_client} connections to the server "
                    "(--max-connections-per-client); close some, or raise the limit")
        if self.total >= self.max_connections:
            why = "open-file limit" if self.max_connections_setting is None else f"{self.max_connections_setting}, open-file limit"
            return f"the server holds its maximum of {self.max_connections} connections ({why}); retry later"
        return None

    def _take(self, client: str) -> None:
        self.total += 1
        self.by_client[client] += 1

    def release(self, client: str) -> None:
        """A connection from ``client`` has closed."""
        self.total -= 1
        self.by_client[client] -= 1
        if self.by_client[client] <= 0:
            del self.by_client[client]

    def _refuse(self, conn: socket.socket, detail: str) -> None:
        """Answer 503 and close; linger briefly (a few at a time) so that the answer is read, not reset."""
        try:
            conn.setblocking(False)
            conn.send(_raw_answer(503, self.error_body(503, detail)))
        except OSError:
            pass
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            loop = None
        if loop is None or self.lingering >= _MAX_LINGERING:
            conn.close()
            return
        try:
            conn.shutdown(socket.SHUT_WR)
        except OSError:
            conn.close()
            return
        # Closing with the client's request unread would send a reset, and the client could lose the 503
        # that says why: read and drop what it sends for a moment, then close.
        self.lingering += 1
        fd = conn.fileno()

        def drain() -> None:
            try:
                if conn.recv(65536):
                    return
            except BlockingIOError:
                return
            except OSError:
                pass
            end()

        def end() -> None:
            if conn.fileno() == -1:
                return
            loop.remove_reader(fd)
            conn.close()
            self.lingering -= 1

        loop.add_reader(fd, drain)
        loop.call_later(_REFUSED_LINGER, end)

    # --- the listening socket ----------------------------------------------------------------------

    def listen(self, sock: socket.socket) -> socket.socket:
        """``sock`` (bound and listening) as a socket whose ``accept`` enforces the caps.

        A connection over a cap is answered 503 and closed inside ``accept``, which then takes the
        next one; only an acceptable connection is handed to the server.
        """
        guard = self

        class GatedSocket(socket.socket):
            def accept(self) -> tuple[socket.socket, Any]:
                while True:
                    conn, address = super().accept()  # BlockingIOError once none is waiting
                    client = str(address[0]) if isinstance(address, (tuple, list)) and address else "?"
                    refusal = guard._refusal(client)
                    if refusal is None:
                        guard._take(client)
                        return conn, address
                    guard._refuse(conn, refusal)

        gated = GatedSocket(sock.family, sock.type, sock.proto, fileno=sock.detach())
        return gated

    # --- serving -----------------------------------------------------------------------------------

    def serve(self, app: Any, sock: socket.socket, **uvicorn_options: Any) -> None:
        """Run ``app`` under uvicorn on ``sock`` (from :meth:`listen`) until interrupted, then close ``sock``.

        The one way GEM's servers start uvicorn: the guard's protocol, asyncio's loop (the socket gate
        needs asyncio's ``accept``; uvloop accepts in C), no access log. ``uvicorn_options`` add to
        ``uvicorn.Config`` (``timeout_keep_alive``, ``ws_max_size``, ...).
        """
        import uvicorn

        options: dict[str, Any] = {"log_level": "warning", "access_log": False, "backlog": 2048, **uvicorn_options}
        config = uvicorn.Config(app, http=self.protocol_class(), loop="asyncio", **options)
        try:
            uvicorn.Server(config).run(sockets=[sock])
        except KeyboardInterrupt:
            pass
        finally:
            sock.close()

    # --- the protocol --------------------------------------------------------------------------------

    def protocol_class(self) -> type[asyncio.Protocol]:
        """uvicorn's h11 protocol with the header and body deadlines, releasing its slot when it closes."""
        import h11
        from uvicorn.protocols.http.h11_impl import H11Protocol

        guard, limits = self, self.limits

        class GuardedH11Protocol(H11Protocol):
            def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
                peer = transport.get_extra_info("peername")
                self._gem_client = str(peer[0]) if isinstance(peer, (tuple, list)) and peer else "?"
                self._gem_timer: asyncio.TimerHandle | None = None
                self._gem_phase: str | None = None
                self._gem_held = True
                super().connection_made(transport)
                self._arm("headers", limits.header_timeout)

            def _release(self) -> None:
                self._cancel()
                if self._gem_held:
                    self._gem_held = False
                    guard.release(self._gem_client)

            def _arm(self, phase: str, seconds: float) -> None:
                self._cancel()
                self._gem_phase = phase
                self._gem_timer = self.loop.call_later(seconds, self._expired)

            def _cancel(self) -> None:
                if self._gem_timer is not None:
                    self._gem_timer.cancel()
                self._gem_timer = None
                self._gem_phase = None

            def _mine(self) -> bool:
                return self.transport is not None and not self.transport.is_closing() and self.transport.get_protocol() is self

            def _follow(self) -> None:
                """Arm, keep or drop the deadline for where the current request stands."""
                if not self._mine():
                    self._cancel()
                    return
                state = self.conn.their_state
                if state is h11.IDLE:
                    if self._gem_phase != "headers" and self.conn.trailing_data[0]:  # part of a new request is in
                        self._arm("headers", limits.header_timeout)
                elif state is h11.SEND_BODY:
                    if self._gem_phase != "body":
                        self._arm("body", limits.body_timeout + _BODY_GRACE)
                else:  # the request is in (or the connection is ending): the app's own limits take over
                    self._cancel()

            def _expired(self) -> None:
                self._gem_timer = None
                phase, self._gem_phase = self._gem_phase, None
                if not self._mine():
                    return
                if phase == "headers" and self.conn.their_state is h11.IDLE:
                    detail = f"the request headers did not arrive within {limits.header_timeout:g} s (--header-timeout)"
                    self.transport.write(_raw_answer(408, guard.error_body(408, detail)))
                    self.transport.close()
                elif phase == "body" and self.conn.their_state is h11.SEND_BODY:
                    self.transport.close()  # the app answered 408 already, or never reads this body

            def data_received(self, data: bytes) -> None:
                super().data_received(data)
                self._follow()

            def on_response_complete(self) -> None:
                super().on_response_complete()
                self._follow()

            def handle_websocket_upgrade(self, event: Any) -> None:
                super().handle_websocket_upgrade(event)
                self._cancel()
                websocket = self.transport.get_protocol()
                if websocket is self:
                    return
                # The WebSocket protocol owns the connection now; the slot is freed when it closes.
                own_lost = websocket.connection_lost

                def connection_lost(exc: Exception | None) -> None:
                    try:
                        own_lost(exc)
                    finally:
                        self._release()

                websocket.connection_lost = connection_lost  # type: ignore[method-assign]

            def connection_lost(self, exc: Exception | None) -> None:
                self._release()
                super().connection_lost(exc)

        return GuardedH11Protocol


def _raise_open_file_limit() -> None:
    """Raise the soft open-file limit to the hard one: a server's connections are its open files."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != hard and (hard == resource.RLIM_INFINITY or soft < hard):
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard if hard != resource.RLIM_INFINITY else max(soft, 1 << 16), hard))
        except (ValueError, OSError):
            pass
