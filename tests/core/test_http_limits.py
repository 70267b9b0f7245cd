"""gem_core/transport/http_limits.py: bodies decoded under a cap, one encoding at most, every piece bounded."""

from __future__ import annotations

import gzip
import itertools
import zlib

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from http_bombs import brotli_bomb, deflate_stream, gzip_bomb

from gem_core.transport.http_limits import PIECE_BYTES, BoundedDecoder, ResponseTooLarge, UnsupportedEncoding, accept_encoding


def _decode_all(decoder: BoundedDecoder, body: bytes, chunk: int = 4096) -> tuple[bytes, int]:
    out, largest = bytearray(), 0
    for start in range(0, len(body), chunk):
        for piece in decoder.decode(body[start : start + chunk]):
            out += piece
            largest = max(largest, len(piece))
    for piece in decoder.flush():
        out += piece
    return bytes(out), largest


@pytest.mark.parametrize(
    ("encoding", "encode"),
    [
        (None, lambda data: data),
        ("identity", lambda data: data),
        ("gzip", gzip.compress),
        ("x-gzip", gzip.compress),
        ("GZIP", gzip.compress),
        ("deflate", zlib.compress),  # zlib-wrapped, as the standard says
        ("deflate", lambda data: zlib.compress(data)[2:-4]),  # raw deflate, as some servers send it
        ("identity, gzip", gzip.compress),
    ],
)
def test_a_body_under_the_cap_decodes_to_itself(encoding, encode):
    data = bytes(range(256)) * 400
    assert _decode_all(BoundedDecoder(encoding, len(data)), encode(data))[0] == data


def test_brotli_under_the_cap_decodes_to_itself():
    brotli = pytest.importorskip("brotli")
    data = b"abc" * 50_000
    assert _decode_all(BoundedDecoder("br", len(data)), brotli.compress(data))[0] == data
    assert "br" in accept_encoding()


@pytest.mark.parametrize("bomb", ["gzip", "deflate", "br"])
def test_a_bomb_stops_one_piece_past_the_cap(bomb):
    if bomb == "br":
        pytest.importorskip("brotli")
    body = {"gzip": lambda: gzip_bomb(64 << 20), "deflate": lambda: deflate_stream(64 << 20, 15), "br": lambda: brotli_bomb(64 << 20)}[bomb]()
    decoder = BoundedDecoder(bomb, 1 << 20)
    with pytest.raises(ResponseTooLarge, match="1048576"):
        _decode_all(decoder, body)
    assert decoder.decoded <= (1 << 20) + 2 * PIECE_BYTES


def test_without_a_total_each_piece_is_still_bounded():
    output, largest = _decode_all(BoundedDecoder("gzip", None), gzip_bomb(16 << 20), chunk=65536)
    assert len(output) == 16 << 20 and largest <= PIECE_BYTES


@pytest.mark.parametrize("encoding", ["gzip, gzip", "gzip,deflate", "br, gzip", "zstd", "compress", "snappy"])
def test_stacked_and_unknown_encodings_are_refused_naming_the_header(encoding):
    with pytest.raises(UnsupportedEncoding, match="Content-Encoding"):
        BoundedDecoder(encoding, 1 << 20)


def test_a_body_larger_than_the_cap_as_sent_is_refused():
    decoder = BoundedDecoder("gzip", 1000, raw_slack=100)
    with pytest.raises(ResponseTooLarge, match="as sent"):
        list(decoder.decode(b"\x00" * 1101))


# -- any byte stream: every member decoded, the cap held, and always an end ------------------------

_DECODE_ERRORS: tuple[type[BaseException], ...] = (zlib.error, ResponseTooLarge)
try:
    import brotli as _brotli_module

    _DECODE_ERRORS += (_brotli_module.error,)
    _ENCODINGS = ["identity", "gzip", "deflate", "br"]
except ImportError:  # pragma: no cover - brotli is in the core session
    _ENCODINGS = ["identity", "gzip", "deflate"]


def _bounded_pieces(decoder: BoundedDecoder, chunks: list[bytes]) -> list[bytes]:
    """The pieces decoded from ``chunks``, stopping after more than any terminating decoder yields.

    A round of the decoder fills its output room (a 64 KiB piece, or what is left of the cap), uses up
    its input chunk, or ends a gzip member (18 bytes at least): so a decoder that ends yields at most
    ``cap / 64 KiB + 2 per chunk + 1 per 18 bytes`` pieces. More means it is looping (as it did on two gzip
    members), and the test fails instead of hanging."""

    def stream():
        for chunk in chunks:
            yield from decoder.decode(chunk)
        yield from decoder.flush()

    size = sum(map(len, chunks))
    limit = (decoder.max_bytes or 0) // PIECE_BYTES + 2 * len(chunks) + size // 18 + 8
    pieces = list(itertools.islice(stream(), limit + 1))
    assert len(pieces) <= limit, f"the decoder yielded over {limit} pieces from {size} bytes: it loops"
    return pieces


def _split(body: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({min(cut, len(body)) for cut in cuts} | {0, len(body)})
    return [body[a:b] for a, b in zip(points, points[1:])] or [b""]


@st.composite
def _gzip_members(draw) -> tuple[bytes, bytes]:
    """(body, decoded): one to five gzip members back to back, some padded with zero bytes after."""
    parts = draw(st.lists(st.binary(max_size=3000) | st.builds(lambda n: b"a" * n, st.integers(0, 200_000)), min_size=1, max_size=5))
    body = b""
    for part in parts:
        body += gzip.compress(part, compresslevel=draw(st.integers(1, 9))) + b"\0" * draw(st.integers(0, 3))
    return body, b"".join(parts)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_gzip_members(), st.lists(st.integers(0, 4000), max_size=6), st.integers(1, 400_000))
def test_gzip_members_back_to_back_decode_whole_under_the_cap(members, cuts, cap):
    body, decoded = members
    decoder = BoundedDecoder("gzip", cap)
    try:
        out = b"".join(_bounded_pieces(decoder, _split(body, cuts)))
    except ResponseTooLarge:
        assert len(decoded) > cap
        return
    assert out == decoded and len(out) <= cap


@settings(max_examples=150, deadline=None)
@given(st.sampled_from(_ENCODINGS), st.binary(max_size=2000), st.lists(st.integers(0, 2000), max_size=6), st.integers(0, 100_000))
def test_any_byte_stream_ends_with_the_body_or_an_error(encoding, body, cuts, cap):
    if encoding == "gzip" and body[:1] != b"\x1f":  # mostly valid members with garbage around them
        body = gzip.compress(body[:200]) + body[200:] + gzip.compress(body[:100])
    decoder = BoundedDecoder(encoding, cap, raw_slack=4096)
    try:
        out = b"".join(_bounded_pieces(decoder, _split(body, cuts)))
    except _DECODE_ERRORS:
        return
    assert len(out) <= cap


def test_two_members_decode_to_both_not_the_first_alone():
    body = gzip.compress(b"a" * 200_000) + gzip.compress(b"b" * 200_000)
    assert b"".join(_bounded_pieces(BoundedDecoder("gzip", 1 << 20), [body])) == b"a" * 200_000 + b"b" * 200_000


def test_data_after_a_deflate_stream_is_refused():
    with pytest.raises(zlib.error, match="follow the end"):
        _bounded_pieces(BoundedDecoder("deflate", 1 << 20), [zlib.compress(b"x" * 1000) + b"trailing"])
