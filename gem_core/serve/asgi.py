"""ASGI plumbing shared by ``gem serve``, the retrieval server, the agent endpoint and the generation server:
bounded JSON bodies, one JSON route's request/answer cycle, and the listening socket.

A request body is read under a byte cap and a time limit (uvicorn bounds neither), and parsed so
that absurd nesting is a 400, not a traceback. The socket is bound before uvicorn starts, so a server
on port 0 can print the port it got.
"""

from __future__ import annotations

import asyncio
import errno
import json
import math
import socket
from collections.abc import Awaitable, Callable
from typing import Any

from gem_core.errors import GemError

__all__ = ["RequestError", "read_json", "json_route", "listening_socket", "listen_error", "json_bytes"]


class RequestError(GemError, ValueError):
    """A request the server refuses; ``status`` is the HTTP status to answer with, the message says why.

    Args:
        status: the HTTP status to answer with.
        detail: why, for the client (the body's ``detail``).
    """

    def __init__(self, status: int, detail: str):
        super().__init__(detail)
        self.status = status


async def _read_body(receive: Any, max_bytes: int) -> bytes:
    body = bytearray()
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            raise RequestError(400, "the client disconnected before sending its body")
        body += message.get("body", b"")
        if len(body) > max_bytes:
            raise RequestError(413, f"request body over {max_bytes} bytes")
        if not message.get("more_body", False):
            return bytes(body)


async def read_json(request: Any, *, max_bytes: int, timeout: float, empty: Any = None) -> Any:
    """The request's JSON body (``empty`` when there is none); raises :class:`RequestError` with a 4xx.

    Raises:
        RequestError: 413 if the body is over ``max_bytes``, 408 if it arrives too slowly, 400 if it is not JSON.
    """
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > max_bytes:
        raise RequestError(413, f"request body over {max_bytes} bytes")
    try:
        raw = await asyncio.wait_for(_read_body(request.receive, max_bytes), timeout)
    except asyncio.TimeoutError:
        raise RequestError(408, f"the request body took over {timeout:g} s to arrive") from None
    return parse_json(raw, empty=empty)


def json_route(
    work: Callable[[Any, Any], Awaitable[Any]], *, max_bytes: int, timeout: float, error_response: Callable[[Exception], Any],
    stream: Callable[[Any, Any], Any] | None = None,
) -> Callable[[Any], Awaitable[Any]]:
    """A Starlette endpoint around ``work(request, body)``: a POST's JSON body read under ``max_bytes`` and
    ``timeout`` (:func:`read_json`; None for a GET), ``work``'s payload answered as JSON (200), or as
    ``stream(payload, body)``'s server-sent events when the body asks ``"stream": true`` and ``stream`` is given.

    Any exception in reading or in ``work`` becomes ``error_response(error)`` (each server maps its own errors
    to statuses and codes): a failure answers its request and the server lives on.
    """
    from starlette.responses import Response

    async def handle(request: Any) -> Any:
        try:
            body = None
            if request.method == "POST":
                body = await read_json(request, max_bytes=max_bytes, timeout=timeout)
            payload = await work(request, body)
            if stream is not None and isinstance(body, dict) and body.get("stream"):
                return Response(stream(payload, body), 200, media_type="text/event-stream")
        except Exception as error:  # noqa: BLE001 - mapped to an answer by the server's error_response
            return error_response(error)
        return Response(json_bytes(payload), 200, media_type="application/json")

    return handle


def parse_json(raw: bytes | str, *, empty: Any = None) -> Any:
    """``raw`` parsed as JSON; raises :class:`RequestError` (400) for invalid or absurdly nested JSON."""
    if not raw:
        return empty
    try:
        return json.loads(raw)
    except (ValueError, RecursionError) as error:
        raise RequestError(400, f"the body is not valid JSON ({type(error).__name__})") from None


def _jsonable(value: Any) -> Any:
    item = getattr(value, "item", None)  # numpy scalars
    if callable(item):
        try:
            return item()
        except (TypeError, ValueError):
            pass
    tolist = getattr(value, "tolist", None)
    if callable(tolist):
        return tolist()
    if isinstance(value, (set, frozenset, tuple)):
        return list(value)
    return repr(value)


def _finite(value: Any) -> Any:
    """``value`` with every float that is not finite replaced by None (numpy values converted first)."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if value is None or isinstance(value, (str, int)):
        return value
    if isinstance(value, dict):
        return {key: _finite(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(item) for item in value]
    converted = _jsonable(value)
    return converted if isinstance(converted, str) else _finite(converted)


def json_bytes(payload: Any) -> bytes:
    """``payload`` as ASCII JSON: numpy values become numbers, anything else unknown its ``repr``, and a float
    that is not finite (NaN, infinity) ``null``: JSON has no such numbers, and the ``NaN`` Python writes is
    refused by strict parsers (JavaScript's, Go's).

    Raises:
        ValueError: if ``payload`` is circular.
        RecursionError: if it is nested too deeply to encode.
    """
    try:
        return json.dumps(payload, ensure_ascii=True, default=_jsonable, allow_nan=False).encode("ascii")
    except ValueError as refused:  # a float that is not finite, or a circular payload
        try:
            finite = _finite(payload)
        except RecursionError:
            raise refused from None  # circular: json's own words say it best
    return json.dumps(finite, ensure_ascii=True, default=_jsonable, allow_nan=False).encode("ascii")


def listening_socket(host: str, port: int, backlog: int = 2048) -> socket.socket:
    """A bound, listening TCP socket (port 0 picks a free one), so the chosen port is known before serving."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    # proto=IPPROTO_TCP, not 0: asyncio disables Nagle's algorithm only on sockets that say they are TCP,
    # and with it on, uvicorn's separate header and body writes wait ~40 ms for a delayed ACK.
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        sock.listen(backlog)
    except BaseException:  # a port in use: the socket is the caller's only on success (else a ResourceWarning, an fd held)
        sock.close()
        raise
    return sock


def listen_error(host: str, port: int, error: OSError) -> str:
    """The one line for a listening socket that could not be opened; a port in use says the fix."""
    message = f"cannot listen on {host}:{port}: {error.strerror or error}"
    if error.errno == errno.EADDRINUSE:
        message += "; choose another --port, or --port 0 for a free one."
    return message
