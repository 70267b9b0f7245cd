"""A zygote: one bubblewrap sandbox, built once, whose initialised interpreter forks calls ahead of time.

Starting a sandbox per snippet costs a bubblewrap start plus an interpreter start (and numpy's import);
under back-to-back calls that is the whole cost (issue 23). A zygote pays it once, and keeps
``SandboxConfig.pool_size`` calls forked and waiting, so a snippet is only handed over. Each call is a
PID namespace of its own: its PID 1 is an init that only waits (a ``CLONE_VM`` child of the zygote that
runs no code: no address space to copy or tear down), and its PID 2 is the call's process, forked from
the zygote into that namespace and into a network namespace no other running call has (concurrent calls
cannot reach each other, not even through an abstract Unix socket; a namespace is reused once its call
has ended, as making one costs a seventh of a call; no IP socket can be made in it). That process makes
new mount and IPC namespaces, mounts a fresh ``/tmp`` and ``/dev/shm`` (size and inode caps enforced by
the kernel), drops every capability (as root: switches to a uid of its own), loads the seccomp filter,
and only then waits for its request; resource limits are applied when it arrives. When the call's init
is killed (by the host once it has the status, or by the zygote once it reaped the call's process), the
kernel kills everything the snippet left behind. The zygote never runs snippet code, never sees a
request, and keeps only each running call's status socket, to write there what ``waitpid`` says of the
call's process; its control socket is closed in every call. A call sends the zygote the order for its
replacement once it has ended, or has run for a sample interval (``SandboxConfig.sample_interval``): the
refill then runs in the zygote after a short call, not while it runs, when it took CPU from the snippet.

A call's request pipe, stdout, stderr, status socket and report pipe travel to the zygote over a Unix
socket (``SCM_RIGHTS``). The call's process says it is ready on the status socket, with pidfds of the
call's init and of itself attached, then closes the socket before any snippet code runs; the kernel
attaches its PID, translated into the host's PID namespace (``SCM_CREDENTIALS``), so the host samples the
call's memory and kills it without searching the process tree.

The way back takes one wake-up, as a fork and exit does: the snippet's process writes its report (what
the snippet returned, a limit it hit, the wait status it is about to exit with) on the report pipe and
exits, and the host, woken by the report, takes the status once the kernel shows that process exiting
with the wait status the report claims (:class:`_Report`). Anything else (a death by signal, no report,
a claim the kernel does not confirm) waits for the zygote, the process's parent, to report what
``waitpid`` says. A call's own PID 1 used to be a fork of the zygote that forked the snippet's process and
waited for it: two copies and two tear-downs of an address space with numpy in it per call, which made a
call cost 7-9 ms of CPU against 5-5.5 ms now, and which, back to back on two cores, competed with the
calls themselves (issue 46).
"""

from __future__ import annotations

import collections
import json
import os
import select
import signal
import socket
import struct
import subprocess
import tempfile
import threading
import time
from pathlib import Path

from gem_core.tools.sandbox.accounting import SandboxMonitor
from gem_core.tools.sandbox.config import MIB, SandboxConfig, SandboxResult, SandboxUnavailableError
from gem_core.tools.sandbox.isolation import bwrap_launch, site_dirs
from gem_core.tools.sandbox.launcher import start_process
from gem_core.tools.sandbox.socket_memory import SocketMemory
from gem_core.tools.sandbox.syscall_filter import compiled_filter
from gem_core.tools.sandbox.worker import kill_group, watch

__all__ = ["Zygote"]

_PROGRAM = Path(__file__).with_name("in_sandbox.py").read_text(encoding="utf-8")
_CREDENTIALS = struct.Struct("3i")  # struct ucred: pid, uid, gid


class _ForkedCall:
    """The host's ends of one call the zygote forked ahead of time: its request pipe, stdout, stderr,
    status socket (the kernel tells who wrote on it) and the snippet's report pipe."""

    def __init__(self, control: socket.socket, send_lock: threading.Lock):
        request_read, self.request = os.pipe()
        self.stdout, stdout_write = os.pipe()
        self.stderr, stderr_write = os.pipe()
        self.report, report_write = os.pipe()
        self.status, status_theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sockets: SocketMemory | None = None
        self.snippet: _SnippetProcess | None = None
        self.init = -1  # a pidfd of the call's init: killed, it ends the call's PID namespace
        self.status.setsockopt(socket.SOL_SOCKET, socket.SO_PASSCRED, 1)
        theirs = [request_read, stdout_write, stderr_write, status_theirs.fileno(), report_write]
        try:
            with send_lock:
                socket.send_fds(control, [b"C"], theirs)
        except OSError as error:
            self.close()
            raise SandboxUnavailableError(f"The sandbox zygote is gone: {error}") from error
        finally:
            for fd in (request_read, stdout_write, stderr_write, report_write):
                os.close(fd)
            status_theirs.close()

    def started(self, deadline: float) -> int | None:
        """Wait until the call is ready for its snippet; its process's host PID. None if the deadline passed.
        The ready message carries pidfds of the call's init (:attr:`init`) and of the process itself
        (:attr:`snippet`), and the call's socket-memory socket (kept in :attr:`sockets`).

        Raises:
            SandboxUnavailableError: the call ended before it was ready (the zygote died, or the call's
                setup failed: the message carries its stderr).
        """
        if not _readable(self.status.fileno(), deadline - time.monotonic()):
            return None
        try:
            data, ancillary, _, _ = self.status.recvmsg(1, socket.CMSG_SPACE(_CREDENTIALS.size) + socket.CMSG_SPACE(3 * 4))
        except OSError:
            data, ancillary = b"", []
        for level, kind, payload in ancillary:
            if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
                for fd in struct.unpack(f"{len(payload) // 4}i", payload[: len(payload) // 4 * 4]):
                    if self.init < 0:
                        self.init = fd
                    elif self.snippet is None:
                        self.snippet = _SnippetProcess(fd)
                    elif self.sockets is None:
                        self.sockets = SocketMemory(fd)
                    else:
                        os.close(fd)
        pid = next(
            (_CREDENTIALS.unpack(payload[: _CREDENTIALS.size])[0] for level, kind, payload in ancillary
             if level == socket.SOL_SOCKET and kind == socket.SCM_CREDENTIALS),
            None,
        )
        if data != b"R" or not pid:
            os.set_blocking(self.stderr, False)
            try:
                stderr = os.read(self.stderr, 65536).decode(errors="replace")
            except OSError:
                stderr = ""
            raise SandboxUnavailableError(f"A call forked by the sandbox zygote did not start: {stderr.strip()[-1000:] or 'no output'}")
        return pid

    def hand_over(self, payload: bytes) -> threading.Thread | None:
        """Write the length-prefixed request; a thread finishes what the pipe does not take at once."""
        data = memoryview(b"%d\n" % len(payload) + payload)
        os.set_blocking(self.request, False)
        try:
            data = data[os.write(self.request, data):]
        except BlockingIOError:
            pass
        except OSError:
            data = data[:0]  # the call died before reading: its status says so
        fd, self.request = self.request, -1
        if not data:
            os.close(fd)
            return None
        os.set_blocking(fd, True)
        writer = threading.Thread(target=_write_all, args=(fd, data), daemon=True)
        writer.start()
        return writer

    def close(self) -> None:
        for fd in (self.request, self.stdout, self.stderr, self.report):
            if fd >= 0:
                os.close(fd)
        self.request = self.stdout = self.stderr = self.report = -1
        self.status.close()
        if self.sockets is not None:
            self.sockets.close()
            self.sockets = None
        if self.snippet is not None:
            self.snippet.close()
            self.snippet = None
        if self.init >= 0:
            os.close(self.init)
            self.init = -1

    def end(self) -> None:
        """Kill the call's init: the kernel then kills everything left in the call's PID namespace."""
        if self.init >= 0:
            try:
                signal.pidfd_send_signal(self.init, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass


class Zygote:
    """One started zygote sandbox; :meth:`run` is safe to call from many threads at once.

    Args:
        config: the sandbox's limits and settings, shared by every forked call.
        preload: modules the zygote imports once, so each forked call starts with them loaded.
    """

    mode = "bwrap"

    def __init__(self, config: SandboxConfig, preload: tuple[str, ...] = ()):
        self.config = config
        self.privileged = os.geteuid() == 0
        launch = bwrap_launch(config, self.privileged, zygote=True)
        host_end, zygote_end = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        seccomp_read, seccomp_write = os.pipe()
        os.write(seccomp_write, compiled_filter())
        os.close(seccomp_write)
        self._stderr = tempfile.TemporaryFile()
        paths = os.pathsep.join(site_dirs(config.python))
        program = [
            config.python, "-I", "-S", "-B", "-c", _PROGRAM, "zygote",
            str(zygote_end.fileno()), str(seccomp_read), ",".join(preload), paths,
            str(config.tmp_mb * MIB), str(config.max_tmp_files), str(config.max_returned_bytes),
            "1" if self.privileged else "0",
        ]
        try:
            self.process = start_process(
                [*launch.command, *program],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=self._stderr,
                pass_fds=(zygote_end.fileno(), seccomp_read, *launch.fds),
                start_new_session=True,
                cwd="/",
                env={},
            )
        finally:
            zygote_end.close()
            os.close(seccomp_read)
            launch.close()
        self.control = host_end
        self._send_lock = threading.Lock()
        self._forked: collections.deque[_ForkedCall] = collections.deque()
        self._forked_lock = threading.Lock()

    def wait_ready(self, timeout: float = 60.0) -> None:
        """Block until the zygote has started (and preloaded its modules), then have it fork calls ahead.

        Raises:
            SandboxUnavailableError: if the zygote failed to start (the message holds the end of its stderr).
        """
        self.control.settimeout(timeout)
        try:
            byte = self.control.recv(1)
        except OSError:
            byte = b""
        self.control.settimeout(None)
        if byte != b"R":
            self._stderr.seek(0)
            stderr = self._stderr.read().decode(errors="replace")
            self.close()
            raise SandboxUnavailableError(f"A sandbox zygote failed to start: {stderr.strip()[-1000:] or 'no output'}")
        self._top_up()

    def alive(self) -> bool:
        """Whether the zygote process is still running."""
        return self.process.poll() is None

    def _top_up(self) -> None:
        """Order forks until ``pool_size`` calls wait (the zygote forks them while the caller goes on)."""
        with self._forked_lock:
            while len(self._forked) < self.config.pool_size:
                self._forked.append(_ForkedCall(self.control, self._send_lock))

    def _refill(self) -> None:
        """:meth:`_top_up`, where a zygote that is gone is the next call's affair (it forks its own call
        then, and reports the zygote's end): the call that orders a replacement has its own result."""
        try:
            self._top_up()
        except SandboxUnavailableError:
            pass

    def _take(self) -> _ForkedCall:
        with self._forked_lock:
            if self._forked:
                return self._forked.popleft()
        return _ForkedCall(self.control, self._send_lock)

    def _drop_forked(self) -> None:
        with self._forked_lock:
            forked, self._forked = list(self._forked), collections.deque()
        for call in forked:
            call.close()

    def close(self) -> None:
        """Kill the zygote's sandbox (calls still running, and calls waiting, die with it)."""
        kill_group(self.process)
        self._drop_forked()
        self.control.close()
        self._stderr.close()

    def forget(self) -> None:
        """Drop this handle without touching the process (it belongs to the parent after a fork)."""
        self._drop_forked()
        self.control.close()
        self._stderr.close()
        self.process.returncode = 0

    def run(self, request: dict, timeout: float) -> SandboxResult:
        """Hand the snippet to a call forked ahead of time, collect its output and status, kill what is left.

        Raises:
            SandboxUnavailableError: if the zygote or the forked call died before the call reported its status.
        """
        start = time.monotonic()
        config = self.config
        payload = json.dumps(request).encode()
        call = self._take()
        writer = None
        try:
            pid = call.started(start + timeout)
            if pid is None:
                self._refill()
                return SandboxResult("", "", None, True, "time", self.mode, time.monotonic() - start)
            init = _init_of_waiting_call(call)
            if init is None:
                raise SandboxUnavailableError("A call forked by the sandbox zygote ended before it got its snippet.")
            writer = call.hand_over(payload)
            # The call's process and all below it, and what its orphans left below the call's init.
            monitor = SandboxMonitor(
                init, supervisor_depth=0, memory_bytes=int(request["memory_mb"]) * MIB, max_files=None, count_tmpfs=True,
                sockets=call.sockets, snippet_root=pid,
            )
            refilled = False

            def monitor_for(_lines: list[dict]) -> SandboxMonitor:
                # The replacement is ordered once the call has outlasted a sample interval, or has ended
                # (below): forking and setting it up costs more CPU than a short call, and done while
                # the snippet runs it competed with the snippet for the cores.
                nonlocal refilled
                if not refilled:
                    refilled = True
                    self._refill()
                return monitor

            report = _Report(call.report, config.max_returned_bytes, call.snippet)
            watched = watch(call.stdout, call.stderr, call.status.fileno(), None, start + timeout, config, monitor_for, report)
            if not refilled:
                self._refill()
            if watched.status is not None and not report.confirmed:
                # the zygote's status (waitpid's exit code), with what the snippet's report claims
                watched.status = report.status(int(watched.status["exit"]), drain=True)
        finally:
            call.end()
            call.close()
            if writer is not None:
                writer.join(timeout=1.0)
        if watched.status is None and not watched.timed_out and watched.cap is None and not watched.output.over_cap:
            if self._ended(self.ENDING_PATIENCE):
                raise SandboxUnavailableError(
                    "The sandbox zygote ended while a call ran in it (killed from outside the sandbox, or by the "
                    "kernel); the call died with it and no status was reported."
                )
        # No status and the zygote lives on: the call's setup failed (EX_SOFTWARE, its traceback on stderr).
        return watched.result(self.mode, start, lambda: 70)

    #: Seconds a call that ended without a status waits for its zygote to be seen ending (the zygote's
    #: bwrap exits once everything in its sandbox is reaped, after the call's status socket closed).
    ENDING_PATIENCE = 2.0

    def _ended(self, patience: float) -> bool:
        """Whether the zygote's sandbox has ended, waiting up to ``patience`` seconds for it to."""
        try:
            self.process.wait(timeout=patience)
        except subprocess.TimeoutExpired:
            return False
        return True


def _init_of_waiting_call(call: _ForkedCall) -> int | None:
    """The host PID of the call's init, or None if the call already ended.

    The call was handed nothing yet, so nothing more is written on its status socket until its process
    exits (then the zygote writes its status): no data and no end of file on the socket means the call
    still waits, and its init lives (the zygote kills it only after that status). The init's PID is read
    from its pidfd, which names no other process however late it is read.
    """
    if call.init < 0 or call.snippet is None or _readable(call.status.fileno(), 0):
        return None
    pid = _pid_of(call.init)
    return pid if pid > 0 else None


def _readable(fd: int, timeout: float) -> bool:
    """Whether ``fd`` is readable (or at its end) within ``timeout`` seconds. ``poll``, not ``select``: a
    host running hundreds of calls at once holds descriptors past ``select``'s limit of 1024."""
    poller = select.poll()
    poller.register(fd, select.POLLIN)
    return bool(poller.poll(max(0, int(timeout * 1000 + 0.999))))


def _pid_of(pidfd: int) -> int:
    """The host PID a pidfd names (-1 once its process was reaped, 0 if it cannot be read)."""
    try:
        with open(f"/proc/self/fdinfo/{pidfd}", "rb") as file:
            return next((int(line.split()[1]) for line in file if line.startswith(b"Pid:")), 0)
    except (OSError, ValueError, IndexError):
        return 0


_PF_EXITING = 0x4  # a task's flag from the start of its exit (``/proc/PID/stat`` field 9)


class _SnippetProcess:
    """A call's snippet process, as the host sees it: a pidfd (its own, sent when it was ready) and its ``/proc``
    directory, opened while the process was known to live, so reading it never reaches another
    process that got the PID later (the kernel refuses reads once the process is reaped)."""

    def __init__(self, pidfd: int):
        self.pidfd, self.proc = pidfd, -1
        try:
            pid = _pid_of(pidfd)
            if pid > 0:
                self.proc = os.open(f"/proc/{pid}", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
                if _readable(pidfd, 0):  # ended already: the directory may be another's
                    os.close(self.proc)
                    self.proc = -1
        except (OSError, ValueError, IndexError):
            if self.proc >= 0:
                os.close(self.proc)
            self.proc = -1

    def exiting_with(self, claimed: int, patience: float = 0.002) -> int | None:
        """``claimed`` once the kernel has begun the process's exit with that wait status (within
        ``patience`` seconds); None otherwise.

        The report is written just before ``os._exit``, so the exit starts within microseconds of it;
        the status is the kernel's exit code (``/proc/PID/stat`` field 52, which reads 0 where ptrace
        would be refused, so then only a claim of 0 is taken), and only once the exit has started: a
        snippet that forges the report gains nothing it could not get from ``os._exit`` itself. Anything
        else waits for the zygote's status. Not waiting for the exit to finish keeps tearing down an address
        space with numpy in it (about 1 ms) off the call's path.
        """
        if self.proc < 0:
            return None
        deadline = time.monotonic() + patience
        while True:
            try:
                fd = os.open("stat", os.O_RDONLY | os.O_CLOEXEC, dir_fd=self.proc)
                try:
                    fields = os.read(fd, 4096).rsplit(b")", 1)[1].split()
                finally:
                    os.close(fd)
                exiting, code = int(fields[6]) & _PF_EXITING, int(fields[49])
            except (OSError, ValueError, IndexError):
                return None
            if exiting:
                return claimed if code == claimed else None
            if time.monotonic() > deadline:
                return None
            time.sleep(0.00005)  # woken by the report: the process is on its way out

    def close(self) -> None:
        for fd in (self.pidfd, self.proc):
            if fd >= 0:
                os.close(fd)
        self.pidfd = self.proc = -1


class _Report:
    """The snippet's report, read by the host: JSON lines, the last written by the snippet's process
    just before it exits (``{"limit"?, "returned"?, "wait_status"}``), at most ``cap`` bytes kept (more
    is the ``output`` limit). :meth:`feed` gives the call's status as soon as the kernel confirms the
    claimed wait status (:meth:`_SnippetProcess.exiting_with`). Only the first complete line is checked:
    the runner writes its report once, and a snippet that writes claims of its own (it holds the pipe)
    must not keep the host polling ``/proc``; after a claim the kernel did not confirm, the zygote's status decides."""

    def __init__(self, fd: int, cap: int, snippet: _SnippetProcess | None):
        self.fd, self.cap, self.snippet = fd, cap, snippet
        self.data = bytearray()
        self.confirmed = False

    def feed(self, chunk: bytes) -> dict | None:
        """Take bytes read from the pipe; the status if the call has ended, else None."""
        if len(self.data) <= self.cap:
            self.data += chunk[: self.cap + 1 - len(self.data)]
        if self.snippet is None or len(self.data) > self.cap or not self.data.endswith(b"\n"):
            return None
        snippet, self.snippet = self.snippet, None  # one try
        claimed = _claimed_wait_status(self.data)
        if claimed is None or snippet.exiting_with(claimed) is None:
            return None
        self.confirmed = True
        return self.status(os.waitstatus_to_exitcode(claimed))

    def status(self, exit_code: int, drain: bool = False) -> dict:
        """The call's status: ``exit_code`` with the report's claims (``drain``: read what is left first;
        a process the snippet started may still hold the pipe, so only what is there now is taken)."""
        if drain:
            os.set_blocking(self.fd, False)
            try:
                while len(self.data) <= self.cap and (chunk := os.read(self.fd, 65536)):
                    self.data += chunk[: self.cap + 1 - len(self.data)]
            except OSError:
                pass
        status: dict = {"exit": exit_code}
        if len(self.data) > self.cap:
            status["limit"] = "output"
            return status
        try:
            claims = json.loads(bytes(self.data).split(b"\n", 1)[0]) if self.data else {}
        except ValueError:
            claims = {}
        if isinstance(claims, dict):
            if isinstance(claims.get("limit"), str):
                status["limit"] = claims["limit"][:20]
            if isinstance(claims.get("returned"), str):
                status["returned"] = claims["returned"]
        return status


def _claimed_wait_status(report: bytearray) -> int | None:
    """The wait status the report's last line says the process exits with; None if it does not."""
    try:
        claims = json.loads(bytes(report).rstrip(b"\n").rsplit(b"\n", 1)[-1])
    except ValueError:
        return None
    claimed = claims.get("wait_status") if isinstance(claims, dict) else None
    return claimed if isinstance(claimed, int) and not isinstance(claimed, bool) else None


def _write_all(fd: int, data: memoryview) -> None:
    try:
        while data:
            data = data[os.write(fd, data):]
    except OSError:
        pass  # the call died before reading its request: its status says so
    finally:
        os.close(fd)
