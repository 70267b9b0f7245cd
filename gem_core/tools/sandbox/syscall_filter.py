"""The seccomp filter every bubblewrap sandbox runs under, compiled with libseccomp (through ``pyseccomp``).

Namespaces and resource limits keep a snippet away from the host's files, network and processes; the
filter takes away the kernel interfaces that would let it attack those walls or the sandbox's own
supervisor: debugging other processes (``ptrace``, ``process_vm_*``), new namespaces (``unshare``,
``setns``, ``clone`` with a namespace flag), mounting, the kernel keyring, BPF, perf events,
``userfaultfd``, ``io_uring`` (a large kernel surface whose queued operations seccomp never sees), module
loading and other administration calls. Everything else is allowed: ordinary
programs (numpy, subprocess, threads) run unchanged. Denied calls fail with ``EPERM``; ``clone3`` fails
with ``ENOSYS`` (its flags sit behind a pointer the filter cannot read), so the C library falls back to
``clone``, whose flags it can.

Memory that belongs to no process is not there either (issue 27): ``memfd_create`` and ``memfd_secret``
(a memfd sent over a unix socket to the sender itself and closed is held by the socket's queue, which
no ``/proc`` file shows: 512 MiB under a 128 MiB cap), and System V ``shmget``, ``semget`` and ``msgget``
(a segment filled and detached, semaphore sets and full message queues: 512 MiB of shared memory and
about 1 GiB of kernel memory under 128 MiB; their limits live in ``/proc/sys/kernel``, which a call
cannot change in a sandbox per call). They fail with ``ENOSYS``, as on a kernel built without them, so
programs that probe for them fall back (libffi, for one, to a file). What remains to share memory sits
on the call's size-capped ``/tmp`` and ``/dev/shm``, counted by :mod:`.accounting`; a snippet's stdin is
a sealed memfd its worker makes before the filter applies.

Kernel buffers no process maps either (issue 47): a POSIX message queue (``mq_open`` fails with
``ENOSYS``, and ``RLIMIT_MSGQUEUE`` is 0), and sockets. Only Unix and netlink sockets can be made, the
families whose queues the host reads through the kernel's ``sock_diag`` (:mod:`.socket_memory`); any
other fails with ``EAFNOSUPPORT``. IP sockets are gone with them: the sandbox has no network, and
loopback TCP queues filled and then hidden (a connection reset takes a socket off the kernel's lists
with its receive queue still full) held 938 MiB under a 128 MiB cap. A Unix socket is a stream
(``SOCK_DGRAM`` and ``SOCK_SEQPACKET`` fail with ``EPROTONOSUPPORT``): only a stream reader reports all
it holds. Setting a socket's buffer sizes
(``SO_SNDBUF``, ``SO_RCVBUF``) does nothing and reports success: a Unix socket closed with data queued
at its peer leaves that data charged to no socket the host can see, at most
:data:`.socket_memory.UNIX_HIDDEN_BYTES` with the kernel's default send buffer, which the host counts for
every such peer. A pipe cannot grow past the kernel's default 16 pages (``F_SETPIPE_SZ`` fails with
``EPERM``), so the host counts each pipe a snippet's process holds at that; no named pipe can be made
(``mknod`` of a FIFO fails with ``EPERM``), as its buffer would be held under a file name.

bubblewrap loads the compiled program (``--seccomp FD``) just before it starts the worker, so the
worker and everything it starts run under it; nothing inside can remove a seccomp filter.
"""

from __future__ import annotations

import errno
import functools
import tempfile

__all__ = ["DENIED_SYSCALLS", "ABSENT_SYSCALLS", "NAMESPACE_FLAGS", "SOCKET_FAMILIES", "compiled_filter"]

DENIED_SYSCALLS = (
    "ptrace", "process_vm_readv", "process_vm_writev", "kcmp", "pidfd_getfd",
    "unshare", "setns",
    "mount", "umount2", "pivot_root", "chroot", "move_mount", "open_tree", "fsopen", "fsconfig", "fsmount",
    "fspick", "mount_setattr",
    "keyctl", "add_key", "request_key",
    "bpf", "perf_event_open", "userfaultfd",
    "io_uring_setup", "io_uring_enter", "io_uring_register",
    "init_module", "finit_module", "delete_module", "kexec_load", "kexec_file_load",
    "open_by_handle_at", "name_to_handle_at",
    "acct", "swapon", "swapoff", "reboot", "syslog", "iopl", "ioperm", "quotactl", "lookup_dcookie",
    "personality", "vhangup", "settimeofday", "clock_settime", "adjtimex", "clock_adjtime",
)
"""Calls that fail with EPERM inside the sandbox."""

ABSENT_SYSCALLS = ("memfd_create", "memfd_secret", "shmget", "semget", "msgget", "mq_open")
"""Calls that fail with ENOSYS inside the sandbox: ways to hold memory outside every process."""

SOCKET_FAMILIES = (1, 16)
"""Socket families a snippet may create: AF_UNIX and AF_NETLINK (their queues are what
:mod:`.socket_memory` counts; the sandbox's supervisor makes its ``sock_diag`` socket under this filter).
"""
#: A Unix socket is a stream: a datagram or seqpacket reader reports only its first message's length
#: (or none for empty ones), so a queue left by writers that closed could not be told from an empty one.
_AF_UNIX, _SOCK_STREAM = 1, 1
#: setsockopt(SOL_SOCKET, ...) names that size a socket's buffers: SO_SNDBUF, SO_RCVBUF, SO_SNDBUFFORCE,
#: SO_RCVBUFFORCE. They succeed and change nothing.
_SOL_SOCKET, _BUFFER_OPTIONS = 1, (7, 8, 32, 33)
#: fcntl's F_SETPIPE_SZ; a FIFO's file type bits in mknod's mode.
_F_SETPIPE_SZ, _S_IFMT, _S_IFIFO = 1031, 0o170000, 0o010000

NAMESPACE_FLAGS = (0x00020000, 0x02000000, 0x04000000, 0x08000000, 0x10000000, 0x20000000, 0x40000000, 0x00000080)
"""``clone`` flags that make a new namespace (CLONE_NEWNS, NEWCGROUP, NEWUTS, NEWIPC, NEWUSER, NEWPID,
NEWNET, NEWTIME).
"""


@functools.lru_cache(maxsize=1)
def compiled_filter() -> bytes:
    """The filter as a BPF program for ``bwrap --seccomp`` (compiled once per process).

    Raises:
        ImportError / OSError: ``pyseccomp`` or the system's libseccomp is missing; the caller turns it
            into a :class:`~gem_core.tools.sandbox.SandboxUnavailableError` that says what to install.
    """
    import pyseccomp as seccomp

    rules = seccomp.SyscallFilter(defaction=seccomp.ALLOW)
    try:
        # Syscall numbers as a binary tree, not a list: the kernel runs the filter on every call it cannot
        # decide from its cache (those with argument rules: socket, clone, ioctl, fcntl...), and emulates it for
        # every syscall number when each sandboxed call loads it (240 -> 150 us per load here).
        rules.set_attr(seccomp.Attr.CTL_OPTIMIZE, 2)
    except (OSError, AttributeError):
        pass  # libseccomp < 2.5: the list decides the same, only slower
    denied = seccomp.ERRNO(errno.EPERM)
    for name in DENIED_SYSCALLS:
        try:
            rules.add_rule(denied, name)
        except (RuntimeError, ValueError, OSError):
            continue  # not a syscall on this architecture (iopl on arm64, ...)
    for name in ABSENT_SYSCALLS:
        try:
            rules.add_rule(seccomp.ERRNO(errno.ENOSYS), name)
        except (RuntimeError, ValueError, OSError):
            continue  # not a syscall on this architecture
    _socket_rules(seccomp, rules)
    for flag in NAMESPACE_FLAGS:
        rules.add_rule(denied, "clone", seccomp.Arg(0, seccomp.MASKED_EQ, flag, flag))
    rules.add_rule(seccomp.ERRNO(errno.ENOSYS), "clone3")
    # TIOCSTI would push characters into a terminal's input; bwrap's --new-session already cuts the
    # terminal off, this is the second wall.
    rules.add_rule(denied, "ioctl", seccomp.Arg(1, seccomp.MASKED_EQ, 0xFFFFFFFF, 0x5412))
    with tempfile.TemporaryFile() as program:
        rules.export_bpf(program)
        program.seek(0)
        return program.read()


def _socket_rules(seccomp, rules) -> None:
    """Only the socket families whose buffers the host can count; socket and pipe buffer sizes stay the
    kernel's defaults; no FIFOs. (libseccomp compares the full 64-bit register: a family with high bits set is greater
    than any allowed one, so it is refused too.)"""
    no_family, no_type = seccomp.ERRNO(errno.EAFNOSUPPORT), seccomp.ERRNO(errno.EPROTONOSUPPORT)
    for call in ("socket", "socketpair"):
        rules.add_rule(no_family, call, seccomp.Arg(0, seccomp.GT, max(SOCKET_FAMILIES)))
        for family in range(max(SOCKET_FAMILIES)):
            if family not in SOCKET_FAMILIES:
                rules.add_rule(no_family, call, seccomp.Arg(0, seccomp.EQ, family))
        for kind in range(16):  # the low four bits of ``type``; the rest are flags
            if kind != _SOCK_STREAM:
                rules.add_rule(no_type, call, seccomp.Arg(0, seccomp.EQ, _AF_UNIX), seccomp.Arg(1, seccomp.MASKED_EQ, 0xF, kind))
    denied = seccomp.ERRNO(errno.EPERM)
    rules.add_rule(denied, "fcntl", seccomp.Arg(1, seccomp.MASKED_EQ, 0xFFFFFFFF, _F_SETPIPE_SZ))
    rules.add_rule(denied, "mknod", seccomp.Arg(1, seccomp.MASKED_EQ, _S_IFMT, _S_IFIFO))
    rules.add_rule(denied, "mknodat", seccomp.Arg(2, seccomp.MASKED_EQ, _S_IFMT, _S_IFIFO))
    for option in _BUFFER_OPTIONS:
        rules.add_rule(
            seccomp.ERRNO(0), "setsockopt",
            seccomp.Arg(1, seccomp.MASKED_EQ, 0xFFFFFFFF, _SOL_SOCKET), seccomp.Arg(2, seccomp.MASKED_EQ, 0xFFFFFFFF, option),
        )
