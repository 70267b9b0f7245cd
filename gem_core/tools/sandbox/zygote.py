"""A zygote: one bubblewrap sandbox, built once, whose initialised interpreter forks a fresh call per snippet.

Starting a sandbox per snippet costs a bubblewrap start plus an interpreter start (and numpy's import);
under back-to-back calls that is the whole cost (issue 23). A zygote pays it once. For each call it
forks a process that makes new mount, PID, IPC and network namespaces (concurrent calls cannot
reach each other, not even over loopback), mounts a fresh ``/tmp`` and ``/dev/shm``
(size and inode caps enforced by the kernel), and forks the call's PID 1, which forks the snippet's
process. That process drops every capability (as root: switches to a uid of its own), loads the seccomp
filter, applies the resource limits, and only then runs the snippet. When the call's PID 1 exits, the
kernel kills everything the snippet left behind. The zygote itself never runs snippet code, holds no
call's pipes after the fork, and its control socket is closed in every call.

Each call's request and pipes (stdout, stderr, status) travel over a Unix socket (``SCM_RIGHTS``); the
host maps the call's process to its own PID (``NSpid``) to sample its memory and to kill it at the
timeout.
"""

from __future__ import annotations

import json
import os
import random
import signal
import socket
import subprocess
import tempfile
import threading
import time
from pathlib import Path

from gem_core.tools.sandbox.accounting import SandboxMonitor, process_tree
from gem_core.tools.sandbox.config import MIB, SandboxConfig, SandboxResult, SandboxUnavailableError
from gem_core.tools.sandbox.isolation import bwrap_launch, site_dirs
from gem_core.tools.sandbox.syscall_filter import compiled_filter
from gem_core.tools.sandbox.worker import kill_group, watch

__all__ = ["Zygote"]

_PROGRAM = Path(__file__).with_name("in_sandbox.py").read_text(encoding="utf-8")
_uids = random.SystemRandom()


def _namespace_pids(pid: int) -> list[int]:
    try:
        with open(f"/proc/{pid}/status", "rb") as file:
            for line in file:
                if line.startswith(b"NSpid:"):
                    return [int(value) for value in line.split()[1:]]
    except (OSError, ValueError):
        pass
    return []


class Zygote:
    """One started zygote sandbox; :meth:`run` is safe to call from many threads at once."""

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
        ]
        try:
            self.process = subprocess.Popen(
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
        self._pid = os.getpid()

    def wait_ready(self, timeout: float = 60.0) -> None:
        """Block until the zygote has started (and preloaded its modules)."""
        self.control.settimeout(timeout)
        try:
            byte = self.control.recv(1)
        except OSError:
            byte = b""
        self.control.settimeout(None)
        if byte != b"R":
            self.close()
            self._stderr.seek(0)
            stderr = self._stderr.read().decode(errors="replace")
            raise SandboxUnavailableError(f"A sandbox zygote failed to start: {stderr.strip()[-1000:] or 'no output'}")

    def alive(self) -> bool:
        return self.process.poll() is None

    def close(self) -> None:
        """Kill the zygote's sandbox (calls still running die with it)."""
        kill_group(self.process)
        self.control.close()
        self._stderr.close()

    def forget(self) -> None:
        """Drop this handle without touching the process (it belongs to the parent after a fork)."""
        self.control.close()
        self._stderr.close()
        self.process.returncode = 0

    def _call_pid(self, zygote_pid: int) -> int | None:
        """The host PID of the call whose PID inside the zygote's sandbox is ``zygote_pid``."""
        for pid, depth in process_tree(self.process.pid):
            namespace_pids = _namespace_pids(pid)
            if len(namespace_pids) == 2 and namespace_pids[1] == zygote_pid and depth >= 2:
                return pid
        return None

    def run(self, request: dict, timeout: float) -> SandboxResult:
        """Fork a call for the snippet, collect its output and status, kill what is left of it."""
        start = time.monotonic()
        config = self.config
        request = dict(
            request,
            max_returned_bytes=config.max_returned_bytes,
            tmp_bytes=config.tmp_mb * MIB,
            tmp_files=config.max_tmp_files,
            uid=_uids.randrange(1_000_000, 2_000_000_000) if self.privileged else 0,
        )
        payload = json.dumps(request).encode()
        request_read, request_write = os.pipe()
        out_read, out_write = os.pipe()
        err_read, err_write = os.pipe()
        status_read, status_write = os.pipe()
        theirs = (request_read, out_write, err_write, status_write)
        try:
            with self._send_lock:
                socket.send_fds(self.control, [b"C"], list(theirs))
        except OSError as error:
            for fd in (*theirs, request_write, out_read, err_read, status_read):
                os.close(fd)
            raise SandboxUnavailableError(f"The sandbox zygote is gone: {error}") from error
        for fd in theirs:
            os.close(fd)
        writer = threading.Thread(target=_write_all, args=(request_write, b"%d\n" % len(payload) + payload), daemon=True)
        writer.start()
        call: dict[str, int | None] = {"host_pid": None, "pidfd": None}
        memory_bytes = int(request["memory_mb"]) * MIB

        def monitor_for(lines: list[dict]) -> SandboxMonitor | None:
            if call["host_pid"] is None:
                zygote_pid = next((line["zpid"] for line in lines if isinstance(line.get("zpid"), int)), None)
                host_pid = None if zygote_pid is None else self._call_pid(zygote_pid)
                if host_pid is None:
                    return None
                try:
                    # Held until the call is killed: the zygote reaps the call's process only later, so
                    # its PID cannot go to another process in between.
                    call["pidfd"] = os.pidfd_open(host_pid)
                except OSError:
                    return None
                call["host_pid"] = host_pid
            # Below the call's process: its PID 1 (depth 1), then the snippet's processes.
            return SandboxMonitor(call["host_pid"], supervisor_depth=1, memory_bytes=memory_bytes, max_files=None)

        try:
            watched = watch(out_read, err_read, status_read, None, start + timeout, config, monitor_for)
            if call["host_pid"] is None:
                monitor_for(watched.lines)
        finally:
            self._kill_call(call["host_pid"], call["pidfd"])
            for fd in (out_read, err_read, status_read):
                os.close(fd)
            writer.join(timeout=1.0)
        return watched.result(self.mode, start, lambda: 70)

    def _kill_call(self, host_pid: int | None, pidfd: int | None) -> None:
        """SIGKILL the call's PID 1 and the call's process: the kernel then kills its whole PID namespace."""
        if host_pid is None or pidfd is None:
            return
        try:
            for pid, depth in process_tree(host_pid):
                if depth == 1:
                    try:
                        os.kill(pid, signal.SIGKILL)
                    except (ProcessLookupError, PermissionError):
                        pass
            try:
                signal.pidfd_send_signal(pidfd, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        finally:
            os.close(pidfd)


def _write_all(fd: int, data: bytes) -> None:
    try:
        view = memoryview(data)
        while view:
            written = os.write(fd, view)
            view = view[written:]
    except OSError:
        pass  # the call died before reading its request: its status says so
    finally:
        os.close(fd)
