"""The kernel memory a sandbox's sockets hold, read by the host through ``sock_diag`` (issue 47).

A socket's queues are kernel memory in no process's RSS: loopback TCP send queues filled and handed to
exec'd ``/bin/sleep`` holders kept 938 MiB under a 128 MiB cap. A sandbox can make only Unix and netlink
sockets (:mod:`.syscall_filter`), and has a network namespace of its own (per call on the zygote, per
sandbox otherwise); a socket belongs to the namespace it was made in, wherever its descriptor travels
afterwards, and stays listed there as long as any process or queue holds it. So the sandbox's
supervisor makes a ``NETLINK_SOCK_DIAG`` socket in that namespace before any snippet code runs and hands
it to the host, which asks the kernel for every socket of the namespace with its memory:

- Unix sockets (``unix_diag``): a writer's queued data is charged to the writer (``wmem_alloc``). A writer
  that closes leaves its data at the reader, charged to a socket no longer listed, and the reader only
  says how many bytes wait (one-byte writes cost the kernel ~1 KiB each). A reader with data waiting
  and no listed peer is counted at :data:`UNIX_HIDDEN_BYTES`: the most a writer can leave, as the
  seccomp filter keeps every send buffer at the kernel's default and every Unix socket a stream (a
  datagram reader reports its first message's length only);
- netlink sockets (``netlink_diag``): their receive and send allocations.

The kernel answers on the host's copy of the socket; a snippet has no capabilities in the namespace, so
it cannot send to that socket, and any message not from the kernel (port 0) is ignored.
"""

from __future__ import annotations

import socket
import struct

__all__ = ["SocketMemory", "diag_socket", "check_available", "UNIX_HIDDEN_BYTES"]

_NETLINK_SOCK_DIAG, _SOCK_DIAG_BY_FAMILY = 4, 20
_NLM_F_REQUEST, _NLM_F_DUMP = 0x1, 0x300
_NLMSG_ERROR, _NLMSG_DONE = 2, 3
_HEADER = struct.Struct("=IHHII")  # struct nlmsghdr
_ATTRIBUTE = struct.Struct("=HH")  # struct nlattr

# unix_diag: struct unix_diag_req (family, protocol, pad, states, ino, show, cookie) and struct
# unix_diag_msg (family, type, state, pad, ino, cookie: 16 bytes); attributes PEER 2, RQLEN 4, MEMINFO 5.
_UNIX_REQUEST = struct.Struct("=BBxxIII8x")
_UNIX_MESSAGE = struct.Struct("=BBBxI8x")
_UNIX_PEER, _UNIX_RQLEN, _UNIX_MEMINFO = 2, 4, 5
_UDIAG_SHOW_PEER, _UDIAG_SHOW_RQLEN, _UDIAG_SHOW_MEMINFO = 0x4, 0x10, 0x20
# netlink_diag: struct netlink_diag_req (family, protocol, pad, ino, show, cookie) and its 28-byte reply
# head; NETLINK_DIAG_MEMINFO is attribute 0, NDIAG_SHOW_MEMINFO 1, NDIAG_PROTO_ALL 255.
_NETLINK_REQUEST = struct.Struct("=BBxxII8x")
_NETLINK_MESSAGE_SIZE = 28
# struct sk_meminfo fields used: rmem_alloc, wmem_alloc, optmem
_RMEM, _WMEM, _OPTMEM = 0, 2, 6

_SOCK_STREAM, _LISTENING = 1, 10
_ALL_STATES = 0xFFFFFFFF


def _default_send_buffer() -> int:
    try:
        with open("/proc/sys/net/core/wmem_default", "rb") as file:
            return int(file.read())
    except (OSError, ValueError):
        return 212992  # the kernel's default


UNIX_HIDDEN_BYTES = 2 * _default_send_buffer()
"""What a closed Unix writer can leave queued at its reader, charged to no listed socket: its send buffer
(the kernel's default; the sandbox cannot change it) plus the one buffer it may allocate past it, taken
as twice the send buffer.
"""
#: How many datagrams a Unix datagram socket queues from writers other than its peer (the kernel's
#: ``net.unix.max_dgram_qlen`` in a new network namespace, 10) plus one.
_DGRAM_QUEUE = 11


def diag_socket() -> socket.socket:
    """A ``NETLINK_SOCK_DIAG`` socket in the caller's network namespace (made by a sandbox's supervisor)."""
    return socket.socket(socket.AF_NETLINK, socket.SOCK_RAW | socket.SOCK_CLOEXEC, _NETLINK_SOCK_DIAG)


def _sockets_in_use(pid: int) -> int | None:
    """How many sockets exist in ``pid``'s network namespace (``sockets: used``); None if unreadable."""
    try:
        with open(f"/proc/{pid}/net/sockstat", "rb") as file:
            first = file.readline()
        return int(first.split()[2]) if first.startswith(b"sockets: used ") else None
    except (OSError, ValueError, IndexError):
        return None


def check_available() -> None:
    """Raise ``OSError`` where this kernel cannot report Unix or netlink socket memory (no
    ``CONFIG_UNIX_DIAG`` / ``CONFIG_NETLINK_DIAG``): the sandbox could not count socket buffers there."""
    memory = SocketMemory(diag_socket().detach())
    try:
        memory.bytes_held()
        if memory.failed:
            raise OSError(memory.failed, "the kernel's sock_diag cannot report Unix and netlink sockets")
    finally:
        memory.close()


def _attributes(data: bytes, start: int, end: int) -> dict[int, bytes]:
    found: dict[int, bytes] = {}
    while start + _ATTRIBUTE.size <= end:
        length, kind = _ATTRIBUTE.unpack_from(data, start)
        if length < _ATTRIBUTE.size:
            break
        found[kind & 0x3FFF] = data[start + _ATTRIBUTE.size:start + length]
        start += (length + 3) & ~3
    return found


def _meminfo(raw: bytes | None) -> tuple[int, ...]:
    """The ``sk_meminfo`` array of an attribute, padded with zeros to nine fields."""
    count = len(raw or b"") // 4
    return struct.unpack(f"={count}I", (raw or b"")[: count * 4]) + (0,) * max(0, 9 - count)


class SocketMemory:
    """Sums the socket memory of one network namespace, through a ``NETLINK_SOCK_DIAG`` socket made in it.

    Args:
        fd: the socket's descriptor (owned from now on; :meth:`close` closes it).
    """

    def __init__(self, fd: int):
        self.socket = socket.socket(fileno=fd)
        self.socket.settimeout(1.0)
        self._sequence = 0
        #: The error number of the last dump the kernel refused (0: none): a kernel without
        #: ``unix_diag`` or ``netlink_diag`` (see :func:`check_available`).
        self.failed = 0

    def close(self) -> None:
        """Close the netlink socket."""
        self.socket.close()

    def bytes_held(self, pid: int | None = None) -> int:
        """Bytes in the queues of every socket of the namespace (a dump that fails counts as 0).

        Args:
            pid: a process in the namespace, if known: where its ``/proc/PID/net/sockstat`` counts no
                socket but this one (a queue needs a socket that holds it), the dumps (0.1-0.3 ms) are skipped.
        """
        if pid is not None and _sockets_in_use(pid) == 1:
            return 0
        return self._unix() + self._netlink()

    def _dump(self, request: bytes) -> list[tuple[bytes, int]]:
        """``(payload, offset of its body)`` of each reply message to a dump request."""
        self._sequence = (self._sequence + 1) & 0xFFFFFFFF
        header = _HEADER.pack(_HEADER.size + len(request), _SOCK_DIAG_BY_FAMILY, _NLM_F_REQUEST | _NLM_F_DUMP, self._sequence, 0)
        try:
            self.socket.sendto(header + request, (0, 0))
        except OSError:
            return []
        replies: list[tuple[bytes, int]] = []
        while True:
            try:
                data, (sender, _) = self.socket.recvfrom(1 << 16)
            except OSError:
                return replies
            if sender != 0:
                continue  # not the kernel
            at = 0
            while at + _HEADER.size <= len(data):
                length, kind, _, sequence, _ = _HEADER.unpack_from(data, at)
                if length < _HEADER.size:
                    return replies
                if sequence == self._sequence:
                    if kind == _NLMSG_ERROR and length >= _HEADER.size + 4:
                        self.failed = -struct.unpack_from("=i", data, at + _HEADER.size)[0] or self.failed
                    if kind in (_NLMSG_DONE, _NLMSG_ERROR):
                        return replies
                    replies.append((data[at:at + length], _HEADER.size))
                at += (length + 3) & ~3

    def _unix(self) -> int:
        show = _UDIAG_SHOW_PEER | _UDIAG_SHOW_RQLEN | _UDIAG_SHOW_MEMINFO
        sockets = []
        for message, body in self._dump(_UNIX_REQUEST.pack(socket.AF_UNIX, 0, _ALL_STATES, 0, show)):
            if len(message) < body + _UNIX_MESSAGE.size:
                continue
            _, kind, state, inode = _UNIX_MESSAGE.unpack_from(message, body)
            attributes = _attributes(message, body + _UNIX_MESSAGE.size, len(message))
            peer = struct.unpack("=I", attributes[_UNIX_PEER][:4])[0] if len(attributes.get(_UNIX_PEER, b"")) >= 4 else 0
            waiting = struct.unpack("=I", attributes[_UNIX_RQLEN][:4])[0] if len(attributes.get(_UNIX_RQLEN, b"")) >= 4 else 0
            if state == _LISTENING:
                waiting = 0  # a listener's count of pending connections, each listed as a socket of its own
            sockets.append((inode, kind, peer, waiting, _meminfo(attributes.get(_UNIX_MEMINFO))))
        listed = {inode for inode, *_ in sockets}
        total = 0
        for _, kind, peer, waiting, info in sockets:
            total += info[_RMEM] + info[_WMEM] + info[_OPTMEM]
            if waiting and peer not in listed:
                # data from a writer that closed: charged to it, and it is no longer listed (a datagram
                # socket, which the sandbox cannot make, could hold a message from each of many writers)
                total += UNIX_HIDDEN_BYTES * (_DGRAM_QUEUE if kind != _SOCK_STREAM else 1)
        return total

    def _netlink(self) -> int:
        total = 0
        for message, body in self._dump(_NETLINK_REQUEST.pack(socket.AF_NETLINK, 255, 0, 1)):
            info = _meminfo(_attributes(message, body + _NETLINK_MESSAGE_SIZE, len(message)).get(0))
            total += info[_RMEM] + info[_WMEM]
        return total

