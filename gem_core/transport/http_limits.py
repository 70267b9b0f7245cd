"""Reading an HTTP answer's body under a cap on its *decoded* size, whatever ``Content-Encoding`` says.

httpx decodes each received chunk completely before the caller sees it, so a 2 KB answer marked
``Content-Encoding: gzip, gzip`` inflates to a gigabyte inside one ``aiter_bytes`` step, long before a
byte cap can be checked. Here the raw bytes are decompressed incrementally with an output limit
(zlib's ``max_length``, brotli's ``output_buffer_limit``), so at most one small piece beyond the cap is
ever held, and only one encoding is accepted: identity, gzip, deflate or br (when ``brotli`` is
installed). Stacked encodings (``gzip, gzip``) are refused outright: no honest server needs them. A gzip
body of several members back to back (valid gzip) decodes to all of them, under the same one cap; any byte
stream ends the decoding, with the body, an error or :class:`ResponseTooLarge`, never a loop.

Used by every HTTP client of the project: :mod:`gem_core.transport.http_call` (``RemoteEnv``, the search tool),
the MCP tool over HTTP (:func:`capped_transport`) and ``gem eval``'s chat client.
"""

from __future__ import annotations

import sys
import zlib
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

from gem_core.errors import GemError

__all__ = [
    "ResponseTooLarge", "UnsupportedEncoding", "BoundedDecoder", "accept_encoding", "read_capped", "capped_transport",
]

#: Largest piece of decoded output produced at once (memory held per step, whatever the ratio).
PIECE_BYTES = 64 * 1024


class ResponseTooLarge(GemError, ValueError):
    """The answer's body (decoded, or as sent) is over the caller's cap."""


class UnsupportedEncoding(GemError, ValueError):
    """The answer's ``Content-Encoding`` is stacked or not one this client decodes."""


def _brotli() -> Any:
    try:
        import brotli
    except ImportError:
        return None
    return brotli if hasattr(brotli.Decompressor, "can_accept_more_data") else None


def accept_encoding() -> str:
    """The ``Accept-Encoding`` to send: only what :class:`BoundedDecoder` can decode under a cap."""
    return "gzip, deflate, br" if _brotli() is not None else "gzip, deflate"


def _coding(content_encoding: str | None) -> str:
    codings = [c.strip().lower() for c in (content_encoding or "").split(",")]
    codings = [c for c in codings if c and c != "identity"]
    supported = ("gzip", "deflate", "br") if _brotli() is not None else ("gzip", "deflate")
    if len(codings) > 1:
        raise UnsupportedEncoding(
            f"Content-Encoding {content_encoding!r} stacks {len(codings)} encodings; refused (one of {', '.join(supported)} at most)"
        )
    if not codings:
        return "identity"
    coding = "gzip" if codings[0] == "x-gzip" else codings[0]
    if coding not in supported:
        raise UnsupportedEncoding(f"Content-Encoding {content_encoding!r} is not supported (accepted: identity, {', '.join(supported)})")
    return coding


class BoundedDecoder:
    """Decodes one answer's body chunk by chunk; raises once more than ``max_bytes`` come out.

    Args:
        content_encoding: the answer's ``Content-Encoding`` header (None: identity).
        max_bytes: the most decoded bytes accepted; None for no total (each piece is still bounded).
        raw_slack: how much larger than ``max_bytes`` the body may be as sent (compressed data that
            does not compress grows a little).

    Raises:
        UnsupportedEncoding: at construction, for a stacked or unknown encoding.
    """

    def __init__(self, content_encoding: str | None, max_bytes: int | None, *, raw_slack: int = 64 * 1024):
        self.coding = _coding(content_encoding)
        self.max_bytes = max_bytes
        self.max_raw = None if max_bytes is None else max_bytes + raw_slack
        self.decoded = 0
        self.raw = 0
        self._deflate_first = True
        if self.coding == "gzip":
            self._zlib: Any = zlib.decompressobj(zlib.MAX_WBITS | 16)
        elif self.coding == "deflate":
            self._zlib = zlib.decompressobj()
        elif self.coding == "br":
            self._brotli = _brotli().Decompressor()

    def _count(self, piece: bytes) -> bytes:
        self.decoded += len(piece)
        if self.max_bytes is not None and self.decoded > self.max_bytes:
            raise ResponseTooLarge(
                f"the answer is over the cap of {self.max_bytes} bytes decoded; it was dropped (raise the client's "
                "max_response_bytes if such answers are expected)"
            )
        return piece

    def _room(self) -> int:
        if self.max_bytes is None:
            return PIECE_BYTES
        # One byte past the cap is enough to know it is exceeded.
        return max(1, min(PIECE_BYTES, self.max_bytes - self.decoded + 1))

    def _decompress(self, data: bytes) -> bytes:
        try:
            piece = self._zlib.decompress(data, self._room())
        except zlib.error:
            if self.coding != "deflate" or not self._deflate_first:
                raise
            # "deflate" is sent both zlib-wrapped (the standard) and raw (some servers): try raw once.
            self._zlib = zlib.decompressobj(-zlib.MAX_WBITS)
            piece = self._zlib.decompress(data, self._room())
        self._deflate_first = False
        return piece

    def _after_end(self, data: bytes) -> bytes:
        """What of ``data`` (bytes past the end of a finished stream) is a next gzip member; b"" for none."""
        if self.coding != "gzip":
            raise zlib.error(f"{len(data)} bytes follow the end of the deflate stream")
        # A gzip body may hold several members back to back (RFC 1952), each decoding to its own part,
        # and gzip tools accept zero bytes padding the end.
        data = data.lstrip(b"\0")
        if data:
            self._zlib = zlib.decompressobj(zlib.MAX_WBITS | 16)
        return data

    def _inflate(self, data: bytes) -> Iterator[bytes]:
        # Each round either fills the output room (at least one byte, and the cap is checked on it) or uses
        # up its input, or the stream ends and what follows starts the next member (at least 18 bytes each),
        # so the loop ends on any input. zlib keeps a stale ``unconsumed_tail`` once a stream ends: the rest is
        # in ``unused_data`` then, and reading the tail again would loop for ever (two gzip members did).
        pending = data
        while pending:
            if self._zlib.eof:
                pending = self._after_end(pending)
                if not pending:
                    return
            piece = self._decompress(pending)
            rest = self._zlib.unused_data if self._zlib.eof else self._zlib.unconsumed_tail
            if not piece and not self._zlib.eof and len(rest) >= len(pending):
                raise zlib.error("the decoder made no progress on the body")  # never seen; a guard against a hang
            if piece:
                yield self._count(piece)
            pending = rest

    def _unbrotli(self, data: bytes) -> Iterator[bytes]:
        decompressor = self._brotli
        piece = decompressor.process(data, output_buffer_limit=self._room())
        if piece:
            yield self._count(piece)
        while not decompressor.is_finished():
            piece = decompressor.process(b"", output_buffer_limit=self._room())
            if not piece:  # it needs more input (or is stuck): either way the next chunk decides
                break
            yield self._count(piece)

    def decode(self, raw: bytes) -> Iterator[bytes]:
        """The decoded pieces of ``raw`` (each at most 64 KiB); raises :class:`ResponseTooLarge` past the cap.

        Raises:
            ResponseTooLarge: more than ``max_bytes`` decoded (or sent).
            ValueError: the body is not valid data for its encoding (``zlib.error``, ``brotli.error``).
        """
        self.raw += len(raw)
        if self.max_raw is not None and self.raw > self.max_raw:
            raise ResponseTooLarge(f"the answer is over {self.max_bytes} bytes as sent; it was dropped")
        if not raw:
            return
        if self.coding == "identity":
            yield self._count(raw)
        elif self.coding == "br":
            yield from self._unbrotli(raw)
        else:
            yield from self._inflate(raw)

    def flush(self) -> Iterator[bytes]:
        """What the decoder still holds at the end of the body."""
        if self.coding in ("gzip", "deflate") and not self._zlib.eof:
            piece = self._zlib.flush(self._room())
            if piece:
                yield self._count(piece)


async def read_capped(raw_chunks: AsyncIterator[bytes], content_encoding: str | None, max_bytes: int) -> bytes:
    """The whole decoded body from ``raw_chunks`` (e.g. ``response.aiter_raw()``), at most ``max_bytes``.

    Raises:
        ResponseTooLarge, UnsupportedEncoding: see :class:`BoundedDecoder`; a body that is not valid
            for its encoding raises :class:`UnsupportedEncoding` too (it cannot be decoded).
    """
    decoder = BoundedDecoder(content_encoding, max_bytes)
    body = bytearray()
    try:
        async for raw in raw_chunks:
            for piece in decoder.decode(raw):
                body += piece
        for piece in decoder.flush():
            body += piece
    except _decode_errors() as error:
        raise UnsupportedEncoding(f"the body is not valid {decoder.coding} data ({error})") from None
    return bytes(body)


def _decode_errors() -> tuple[type[BaseException], ...]:
    """What a decoder raises on data that is not its encoding: zlib's error, and brotli's where it is installed."""
    brotli = _brotli()
    return (zlib.error, brotli.error) if brotli is not None else (zlib.error,)


def capped_transport(inner: Any, max_bytes: int | None, on_refused: Callable[[Exception], None] | None = None) -> Any:
    """An httpx (or httpx2) async transport around ``inner`` whose answers are decoded here, under the cap.

    The answer handed to the client carries no ``Content-Encoding`` (its body is already decoded), so
    the client's own unbounded decoder never runs. Bodies of ``text/event-stream`` answers (long-lived
    event streams) have no total, only the 64 KiB piece bound; every other body raises
    :class:`ResponseTooLarge` past ``max_bytes`` while it is read. ``on_refused`` hears of every answer
    refused (for clients such as MCP's that log transport errors instead of raising them).
    """
    library = sys.modules[type(inner).__module__.split(".")[0]]
    return _transport_class(library)(inner, max_bytes, on_refused)


_TRANSPORT_CLASSES: dict[str, type] = {}


def _transport_class(library: Any) -> type:
    cached = _TRANSPORT_CLASSES.get(library.__name__)
    if cached is not None:
        return cached

    class DecodedStream(library.AsyncByteStream):
        def __init__(self, raw: Any, decoder: BoundedDecoder, refused: Callable[[Exception], None]):
            self._raw, self._decoder, self._refused = raw, decoder, refused

        async def __aiter__(self) -> AsyncIterator[bytes]:
            try:
                async for chunk in self._raw:
                    for piece in self._decoder.decode(chunk):
                        yield piece
                for piece in self._decoder.flush():
                    yield piece
            except ResponseTooLarge as error:
                self._refused(error)
                raise
            except _decode_errors() as error:
                refusal = UnsupportedEncoding(f"the body is not valid {self._decoder.coding} data ({error})")
                self._refused(refusal)
                raise refusal from None

        async def aclose(self) -> None:
            await self._raw.aclose()

    class CappedTransport(library.AsyncBaseTransport):
        def __init__(self, inner: Any, max_bytes: int | None, on_refused: Callable[[Exception], None] | None):
            self.inner, self.max_bytes, self.on_refused = inner, max_bytes, on_refused

        def _refused(self, error: Exception) -> None:
            if self.on_refused is not None:
                self.on_refused(error)

        async def handle_async_request(self, request: Any) -> Any:
            request.headers["Accept-Encoding"] = accept_encoding()
            response = await self.inner.handle_async_request(request)
            try:
                streaming = response.headers.get("content-type", "").split(";")[0].strip().lower() == "text/event-stream"
                decoder = BoundedDecoder(response.headers.get("content-encoding"), None if streaming else self.max_bytes)
            except UnsupportedEncoding as error:
                self._refused(error)
                await response.aclose()
                raise
            headers = [(k, v) for k, v in response.headers.multi_items() if k.lower() not in ("content-encoding", "content-length")]
            stream = DecodedStream(response.stream, decoder, self._refused)
            return library.Response(response.status_code, headers=headers, stream=stream, extensions=response.extensions)

        async def aclose(self) -> None:
            await self.inner.aclose()

    _TRANSPORT_CLASSES[library.__name__] = CappedTransport
    return CappedTransport
