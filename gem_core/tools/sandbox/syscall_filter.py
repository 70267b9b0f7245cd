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

bubblewrap loads the compiled program (``--seccomp FD``) just before it starts the worker, so the
worker and everything it starts run under it; nothing inside can remove a seccomp filter.
"""

from __future__ import annotations

import errno
import functools
import tempfile

__all__ = ["DENIED_SYSCALLS", "ABSENT_SYSCALLS", "NAMESPACE_FLAGS", "compiled_filter"]

#: Calls that fail with EPERM inside the sandbox.
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

#: Calls that fail with ENOSYS inside the sandbox: ways to hold memory outside every process.
ABSENT_SYSCALLS = ("memfd_create", "memfd_secret", "shmget", "semget", "msgget")

#: ``clone`` flags that make a new namespace (CLONE_NEWNS, NEWCGROUP, NEWUTS, NEWIPC, NEWUSER, NEWPID,
#: NEWNET, NEWTIME).
NAMESPACE_FLAGS = (0x00020000, 0x02000000, 0x04000000, 0x08000000, 0x10000000, 0x20000000, 0x40000000, 0x00000080)


@functools.lru_cache(maxsize=1)
def compiled_filter() -> bytes:
    """The filter as a BPF program for ``bwrap --seccomp`` (compiled once per process).

    Raises:
        ImportError / OSError: ``pyseccomp`` or the system's libseccomp is missing; the caller turns it
            into a :class:`~gem_core.tools.sandbox.SandboxUnavailableError` that says what to install.
    """
    import pyseccomp as seccomp

    rules = seccomp.SyscallFilter(defaction=seccomp.ALLOW)
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
