"""Hostile HTTP answers for the client tests: compression bombs and a loopback server that sends them.

A bomb is a few kilobytes on the wire that inflates to ``size`` bytes; the clients must stop decoding at
their cap instead of inflating it (and refuse stacked encodings such as ``gzip, gzip`` outright).
"""

from __future__ import annotations

import contextlib
import socketserver
import threading
import tracemalloc
import zlib
from collections.abc import Callable, Iterator

_ZEROS = bytes(1 << 20)


def deflate_stream(size: int, wbits: int) -> bytes:
    """``size`` zero bytes compressed with zlib's ``wbits`` (31: gzip, 15: zlib deflate, -15: raw deflate)."""
    packer = zlib.compressobj(9, zlib.DEFLATED, wbits)
    parts = []
    for start in range(0, size, len(_ZEROS)):
        parts.append(packer.compress(_ZEROS[: min(len(_ZEROS), size - start)]))
    parts.append(packer.flush())
    return b"".join(parts)


def gzip_bomb(size: int, layers: int = 1) -> bytes:
    """``size`` zero bytes gzipped ``layers`` times (send with ``Content-Encoding: gzip`` repeated ``layers`` times)."""
    body = deflate_stream(size, 31)
    for _ in range(layers - 1):
        packer = zlib.compressobj(9, zlib.DEFLATED, 31)
        body = packer.compress(body) + packer.flush()
    return body


def brotli_bomb(size: int) -> bytes:
    import brotli

    packer = brotli.Compressor(quality=5)
    parts = [packer.process(_ZEROS[: min(len(_ZEROS), size - start)]) for start in range(0, size, len(_ZEROS))]
    return b"".join(parts) + packer.finish()


def http_answer(body: bytes, *, status: int = 200, headers: dict[str, str] | None = None) -> bytes:
    """A complete HTTP/1.1 answer that closes the connection."""
    lines = [f"HTTP/1.1 {status} X", f"Content-Length: {len(body)}", "Connection: close"]
    lines += [f"{name}: {value}" for name, value in (headers or {"Content-Type": "application/json"}).items()]
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + body


class LoopbackServer:
    """A threaded loopback server: ``answer(method, path, body)`` gives the raw bytes to send back.

    Reads each request whole (headers and ``Content-Length`` body), answers once and closes.
    """

    def __init__(self, answer: Callable[[str, str, bytes], bytes]):
        class Handler(socketserver.BaseRequestHandler):
            def handle(self) -> None:
                self.request.settimeout(30)
                data = b""
                try:
                    while b"\r\n\r\n" not in data:
                        chunk = self.request.recv(65536)
                        if not chunk:
                            return
                        data += chunk
                    head, _, body = data.partition(b"\r\n\r\n")
                    lines = head.decode("latin-1").split("\r\n")
                    method, path = lines[0].split(" ")[:2]
                    length = next((int(v) for k, _, v in (line.partition(":") for line in lines[1:]) if k.strip().lower() == "content-length"), 0)
                    while len(body) < length:
                        chunk = self.request.recv(65536)
                        if not chunk:
                            return
                        body += chunk
                    self.request.sendall(answer(method, path, body))
                except OSError:
                    pass

        self._server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()


@contextlib.contextmanager
def peak_memory() -> Iterator[list[int]]:
    """Traces Python allocations in the block; the list holds the peak in bytes once the block ends."""
    result: list[int] = []
    tracemalloc.start()
    try:
        yield result
    finally:
        result.append(tracemalloc.get_traced_memory()[1])
        tracemalloc.stop()
