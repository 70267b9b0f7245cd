"""The compiled seccomp program, run here by a small classic-BPF interpreter on ``struct seccomp_data``
built for each case: what it decides for each syscall and argument, without a sandbox, and how many
instructions it runs to decide. The hostile tests in ``test_sandbox*.py`` check the same walls through
bubblewrap; these check every socket family and type, every namespace flag and the program's length of
path, which no snippet can see."""

from __future__ import annotations

import errno
import struct

import pytest

seccomp = pytest.importorskip("pyseccomp")

from gem_core.tools.sandbox import syscall_filter  # noqa: E402

_ALLOW, _ACTION = 0x7FFF0000, 0xFFFF0000
_ERRNO = 0x00050000
_AF_UNIX, _AF_NETLINK, _SOCK_STREAM, _SOCK_DGRAM, _SOCK_SEQPACKET, _SOCK_CLOEXEC = 1, 16, 1, 2, 5, 0o2000000


def run_filter(program: bytes, nr: int, args: tuple[int, ...] = (), arch: int | None = None) -> tuple[int, int]:
    """What ``program`` returns for syscall ``nr`` with ``args``, and how many instructions it ran."""
    registers = [value & 0xFFFF_FFFF_FFFF_FFFF for value in (*args, 0, 0, 0, 0, 0, 0)[:6]]  # an int is sign-extended
    data = struct.pack("<iIQ6Q", nr, seccomp.system_arch() if arch is None else arch, 0, *registers)
    code = [struct.unpack_from("<HBBI", program, offset) for offset in range(0, len(program), 8)]
    a = x = 0
    memory = [0] * 16
    pc = ran = 0
    while True:
        op, jt, jf, k = code[pc]
        ran += 1
        pc += 1
        if op == 0x20:  # ld [k]
            a = struct.unpack_from("<I", data, k)[0]
        elif op in (0x00, 0x01):  # ld #k, ldx #k
            a, x = (k, x) if op == 0x00 else (a, k)
        elif op in (0x60, 0x61):  # ld M[k], ldx M[k]
            a, x = (memory[k], x) if op == 0x60 else (a, memory[k])
        elif op in (0x02, 0x03):  # st M[k], stx M[k]
            memory[k] = a if op == 0x02 else x
        elif op == 0x54:  # and #k
            a &= k
        elif op == 0x44:  # or #k
            a |= k
        elif op == 0x07:  # tax
            x = a
        elif op == 0x87:  # txa
            a = x
        elif op == 0x05:  # ja k
            pc += k
        elif op & 0x07 == 0x05:  # conditional jumps, on #k (0x_5) or X (0x_d)
            operand = x if op & 0x08 else k
            test = {0x10: a == operand, 0x20: a > operand, 0x30: a >= operand, 0x40: a & operand != 0}[op & 0xF0]
            pc += jt if test else jf
        elif op == 0x06:  # ret #k
            return k, ran
        elif op == 0x16:  # ret a
            return a, ran
        else:
            raise AssertionError(f"instruction {op:#x} at {pc - 1} is not one this interpreter knows: extend it")


@pytest.fixture(scope="module")
def program() -> bytes:
    try:
        return syscall_filter.compiled_filter()
    except OSError as error:
        pytest.skip(f"libseccomp is not installed: {error}")


def nr(name: str) -> int:
    return seccomp.resolve_syscall(seccomp.system_arch(), name)


def decide(program: bytes, name: str, *args: int) -> int:
    return run_filter(program, nr(name), args)[0]


def test_listed_calls_fail_with_their_errno_and_ordinary_calls_pass(program):
    # the walls the sandbox's security model names, whatever the list says
    for name in ("ptrace", "process_vm_readv", "unshare", "setns", "mount", "bpf", "perf_event_open", "userfaultfd",
                 "io_uring_setup", "keyctl", "init_module", "kexec_load"):
        assert decide(program, name) == _ERRNO | errno.EPERM, name
    for name in ("memfd_create", "shmget", "semget", "msgget", "mq_open"):
        assert decide(program, name) == _ERRNO | errno.ENOSYS, name
    for name in syscall_filter.DENIED_SYSCALLS:
        if nr(name) >= 0:  # not every call exists on every architecture (iopl on arm64)
            assert decide(program, name) == _ERRNO | errno.EPERM, name
    for name in syscall_filter.ABSENT_SYSCALLS:
        if nr(name) >= 0:
            assert decide(program, name) == _ERRNO | errno.ENOSYS, name
    for name in ("read", "write", "openat", "close", "mmap", "munmap", "futex", "exit_group", "wait4"):
        assert decide(program, name) == _ALLOW, name


def test_only_unix_streams_and_netlink_sockets_can_be_made(program):
    for call in ("socket", "socketpair"):
        for family in range(48):
            for kind in (_SOCK_STREAM, _SOCK_DGRAM, _SOCK_SEQPACKET, 3, 10, _SOCK_STREAM | _SOCK_CLOEXEC, _SOCK_DGRAM | _SOCK_CLOEXEC):
                decided = decide(program, call, family, kind)
                if family == _AF_NETLINK or (family == _AF_UNIX and kind & 0xF == _SOCK_STREAM):
                    assert decided == _ALLOW, (call, family, kind)
                elif family == _AF_UNIX:
                    assert decided == _ERRNO | errno.EPROTONOSUPPORT, (call, family, kind)
                else:
                    assert decided == _ERRNO | errno.EAFNOSUPPORT, (call, family, kind)
        # the whole register is compared: high bits do not turn a family into AF_UNIX
        assert decide(program, call, _AF_UNIX | 1 << 32, _SOCK_STREAM) == _ERRNO | errno.EAFNOSUPPORT


def test_no_clone_makes_a_namespace_and_clone3_is_absent(program):
    # CLONE_NEWNS, NEWCGROUP, NEWUTS, NEWIPC, NEWUSER, NEWPID, NEWNET, NEWTIME: the kernel's, not the module's list
    for flag in (0x00020000, 0x02000000, 0x04000000, 0x08000000, 0x10000000, 0x20000000, 0x40000000, 0x00000080):
        assert decide(program, "clone", flag | 17) == _ERRNO | errno.EPERM, hex(flag)  # 17: SIGCHLD
    assert decide(program, "clone", 0x3D0F00 | 17) == _ALLOW  # what a thread's clone passes
    assert decide(program, "clone3") == _ERRNO | errno.ENOSYS


def test_argument_rules_keep_other_uses_of_the_same_call(program):
    assert decide(program, "ioctl", 0, 0x5412) == _ERRNO | errno.EPERM  # TIOCSTI
    assert decide(program, "ioctl", 0, 0x5401) == _ALLOW  # TCGETS
    assert decide(program, "fcntl", 3, 1031) == _ERRNO | errno.EPERM  # F_SETPIPE_SZ
    assert decide(program, "fcntl", 3, 1) == _ALLOW  # F_GETFD
    assert decide(program, "setsockopt", 3, 1, 8) == _ERRNO | 0  # SO_RCVBUF: succeeds, changes nothing
    assert decide(program, "mknodat", -100, 0, 0o010644) == _ERRNO | errno.EPERM  # a FIFO
    assert decide(program, "mknodat", -100, 0, 0o100644) == _ALLOW  # a regular file


def test_a_call_of_another_architecture_is_not_allowed(program):
    other = seccomp.Arch.X86 if seccomp.system_arch() != seccomp.Arch.X86 else seccomp.Arch.X86_64
    assert run_filter(program, 0, (), arch=other)[0] & _ACTION != _ALLOW


def test_the_program_finds_a_call_in_a_few_steps_not_a_walk_past_every_rule(program):
    # The kernel runs the program for every call it cannot decide from its cache (those with argument rules:
    # socket, clone, ioctl, fcntl...) and, when each sandboxed call loads it, for every syscall number: a list of
    # ~70 rules walked in turn cost every call that walk (the list took 240 us to load, the tree 150).
    steps = {name: run_filter(program, nr(name), (3, 1))[1] for name in ("read", "write", "futex", "wait4", "exit_group")}
    assert max(steps.values()) <= 16, steps  # the list ran 69 to allow each
    # A call with argument rules runs its own rules after the lookup (clone: one per namespace flag), not the list's.
    steps = {name: run_filter(program, nr(name), (3, 1))[1] for name in ("fcntl", "ioctl", "clone", "socket", "setsockopt")}
    assert max(steps.values()) <= 48, steps  # the list: 67-94
