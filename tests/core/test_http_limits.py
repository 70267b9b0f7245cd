"""gem_core/transport/http_limits.py: bodies decoded under a cap, one encoding at most, every piece bounded."""

from __future__ import annotations

import gzip
import zlib

import pytest
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
