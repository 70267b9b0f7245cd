"""Named tensors from a trainer to a generation server over one loopback TCP stream: a CPU weight transfer.

vLLM receives a trainer's new weights through an NCCL group: the trainer opens a rendezvous at
``master_address:master_port``, the server's workers join it, and each update is a broadcast of the
parameters that the server reads against a manifest (names, dtypes, shapes) sent over HTTP. NCCL needs
GPUs. This module is the same exchange on a CPU: :class:`WeightSender` (trainer side) listens on the
rendezvous address, :func:`WeightReceiver.connect` (server side) joins it, and an update is a stream of
framed tensors that the receiver checks against the same manifest. It replaces the transport only; which
tensors are sent, and when, stays the trainer's decision.

Frame: 4-byte big-endian header length, a JSON header ``{"name", "dtype", "shape"}`` (``{"end": true}``
ends an update), then the tensor's raw bytes. The receiver bounds every read by the manifest: an
unexpected name, dtype or shape, or a header over 64 KiB, is an error, so a stray client cannot make the
server allocate more than the manifest's tensors.
"""

from __future__ import annotations

import json
import socket
import struct
import time
from collections.abc import Iterable, Iterator
from typing import Any

from gem_core.errors import GemError

__all__ = ["WeightSender", "WeightReceiver", "WeightStreamError"]

_MAX_HEADER = 64 << 10


class WeightStreamError(GemError, RuntimeError):
    """A weight stream broke off or carried a tensor its manifest does not name."""


def _dtype(name: str) -> Any:
    import torch

    dtype = getattr(torch, name.removeprefix("torch."), None)
    if not isinstance(dtype, torch.dtype):
        raise WeightStreamError(f"unknown dtype {name!r} in the weight manifest")
    return dtype


def _read_exactly(conn: socket.socket, size: int) -> bytearray:
    data = bytearray(size)
    view, got = memoryview(data), 0
    while got < size:
        n = conn.recv_into(view[got:], size - got)
        if n == 0:
            raise WeightStreamError(f"the weight stream closed after {got} of {size} bytes")
        got += n
    return data


class WeightSender:
    """The trainer's end: listens on ``(host, port)`` until the server joins, then streams named tensors.

    Args:
        host: the rendezvous address (loopback: the server runs on this machine).
        port: the rendezvous port (0 picks a free one; :attr:`port` says which).
        timeout: seconds to wait for the server to join, and for each send.
    """

    def __init__(self, host: str = "127.0.0.1", port: int = 0, *, timeout: float = 300.0):
        self._listener = socket.create_server((host, port))
        self._listener.settimeout(timeout)
        self.host, self.port = host, self._listener.getsockname()[1]
        self.timeout = timeout
        self._conn: socket.socket | None = None

    def accept(self) -> WeightSender:
        """Block until the server joins (``/init_weight_transfer_engine`` makes it connect); returns self.

        Raises:
            WeightStreamError: if no server joins within the timeout.
        """
        try:
            self._conn, _ = self._listener.accept()
        except TimeoutError:
            raise WeightStreamError(f"no generation server joined {self.host}:{self.port} within {self.timeout:g} s") from None
        finally:
            self._listener.close()
        self._conn.settimeout(self.timeout)
        return self

    def send(self, named_tensors: Iterable[tuple[str, Any]]) -> int:
        """Stream ``(name, tensor)`` pairs, then the end mark; returns the number of tensors sent.

        Raises:
            WeightStreamError: if called before :meth:`accept`.
        """
        import torch

        if self._conn is None:
            raise WeightStreamError("WeightSender.send() before accept(): the server has not joined")
        count = 0
        for name, tensor in named_tensors:
            flat = tensor.detach().to("cpu").contiguous()
            header = json.dumps({"name": name, "dtype": str(flat.dtype).removeprefix("torch."), "shape": list(flat.shape)})
            payload = flat.reshape(-1).view(torch.uint8).numpy().tobytes() if flat.numel() else b""
            self._conn.sendall(struct.pack(">I", len(header)) + header.encode() + payload)
            count += 1
        end = json.dumps({"end": True}).encode()
        self._conn.sendall(struct.pack(">I", len(end)) + end)
        return count

    def close(self) -> None:
        """Close the stream (the server's next update then fails instead of hanging)."""
        for sock in (self._conn, self._listener):
            if sock is not None:
                sock.close()
        self._conn = None


class WeightReceiver:
    """The server's end of a :class:`WeightSender` stream (see the module docstring).

    Args:
        conn: the connected socket (see :meth:`connect`).
    """

    def __init__(self, conn: socket.socket):
        self._conn = conn

    @classmethod
    def connect(cls, host: str, port: int, *, timeout: float = 300.0) -> WeightReceiver:
        """Join the trainer's rendezvous, retrying until it listens (the two ends start concurrently).

        Raises:
            WeightStreamError: if the trainer's rendezvous cannot be joined within ``timeout``.
        """
        deadline = time.monotonic() + timeout
        while True:
            try:
                conn = socket.create_connection((host, port), timeout=timeout)
                return cls(conn)
            except OSError as error:
                if time.monotonic() >= deadline:
                    raise WeightStreamError(f"could not join the trainer's weight stream at {host}:{port}: {error}") from None
                time.sleep(0.05)

    def receive(self, names: list[str], dtype_names: list[str], shapes: list[list[int]]) -> Iterator[tuple[str, Any]]:
        """Yield the tensors of one update, each checked against the manifest (vLLM's ``update_info`` fields).

        Raises:
            WeightStreamError: if a tensor is not in the manifest (or comes twice), differs from it in dtype or shape,
                a header is oversized, or the stream ends before every manifest tensor arrived.
        """
        import torch

        expected = {name: (dtype, [int(d) for d in shape]) for name, dtype, shape in zip(names, dtype_names, shapes, strict=True)}
        seen: set[str] = set()
        while True:
            (size,) = struct.unpack(">I", _read_exactly(self._conn, 4))
            if size > _MAX_HEADER:
                raise WeightStreamError(f"a weight-stream header of {size} bytes (at most {_MAX_HEADER})")
            header = json.loads(_read_exactly(self._conn, size))
            if header.get("end"):
                break
            name = header.get("name")
            if name not in expected or name in seen:
                raise WeightStreamError(f"the weight stream sent {name!r}, which the update's manifest does not name (or names once)")
            dtype_name, shape = expected[name]
            if header.get("dtype") != dtype_name.removeprefix("torch.") or list(header.get("shape", [])) != shape:
                raise WeightStreamError(
                    f"{name!r} arrived as {header.get('dtype')}{header.get('shape')}, the manifest says {dtype_name}{shape}"
                )
            dtype = _dtype(dtype_name)
            numel = 1
            for d in shape:
                numel *= d
            raw = _read_exactly(self._conn, numel * dtype.itemsize)
            tensor = torch.frombuffer(raw, dtype=torch.uint8).view(dtype).reshape(shape) if numel else torch.empty(shape, dtype=dtype)
            seen.add(name)
            yield name, tensor
        missing = set(expected) - seen
        if missing:
            raise WeightStreamError(f"the weight stream ended without {len(missing)} manifest tensors, e.g. {sorted(missing)[0]!r}")

    def close(self) -> None:
        """Close the connection."""
        self._conn.close()
