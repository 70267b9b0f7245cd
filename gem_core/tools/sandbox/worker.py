"""The host side of one worker: start it, hand it a snippet, collect its output and status, end it.

The worker's program is :mod:`.in_sandbox` (a supervisor that forks the snippet's process); its status
arrives on a pipe only the supervisor holds, read up to a fixed number of bytes. Output is read without
blocking up to the output cap, and the whole-sandbox caps of :mod:`.accounting` are sampled while the
snippet runs.
"""

from __future__ import annotations

import json
import os
import random
import selectors
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Protocol

from gem_core.errors import InvalidArgument
from gem_core.tools.sandbox.accounting import SandboxMonitor, work_dir_over
from gem_core.tools.sandbox.config import MIB, SandboxConfig, SandboxResult, SandboxUnavailableError
from gem_core.tools.sandbox.isolation import ENV, bwrap_launch, site_dirs
from gem_core.tools.sandbox.launcher import start_process
from gem_core.tools.sandbox.socket_memory import SocketMemory

__all__ = ["Worker"]

_PROGRAM = Path(__file__).with_name("in_sandbox.py").read_text(encoding="utf-8")
_uids = random.SystemRandom()  # not the global generator: seeding it must not repeat uids
#: Status bytes read beyond the returned value before the worker is judged broken.
_STATUS_SLACK = 4096


def _work_dir_owner(work_dir: str | None) -> int:
    """The uid a call with a working directory runs as when the host is root: the directory's owner, so
    the files of one episode stay writable from call to call (0 when there is no working directory)."""
    if work_dir is None:
        return 0
    owner = os.stat(work_dir).st_uid
    if owner == 0:
        raise InvalidArgument(
            f"SandboxConfig.work_dir {work_dir!r} is owned by root: the sandbox would run as root. Create it "
            "with gem_core.tools.sandbox.shell.WorkDir, which gives it an unprivileged owner of its own."
        )
    return owner


def kill_group(process: subprocess.Popen) -> None:
    """SIGKILL a sandbox's process group and the process itself, then reap it (bwrap takes its PID
    namespace down with it)."""
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    try:
        process.kill()
    except ProcessLookupError:
        pass
    process.wait()


class Worker:
    """One started sandbox waiting for its snippet.

    Args:
        mode: the isolation mode (``"bwrap"`` or ``"process"``).
        config: the sandbox's limits and settings.
        preload: modules the worker imports before it waits (warm start for the snippets).
    """

    def __init__(self, mode: str, config: SandboxConfig, preload: tuple[str, ...] = ()):
        self.mode = mode
        self.config = config
        # A socket, not a pipe: the supervisor's "R" carries the socket through which the host counts
        # the sandbox's socket memory (:mod:`.socket_memory`).
        status_ours, status_theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        self.status_fd = status_ours.detach()
        status_write = status_theirs.detach()
        self.sockets: SocketMemory | None = None
        self.workdir: str | None = None
        privileged = os.geteuid() == 0
        drop_to_uid = 0
        launch = None
        if mode == "bwrap":
            launch = bwrap_launch(config, privileged)
            prefix, pass_fds, cwd = launch.command, (status_write, *launch.fds), "/"
            if privileged:
                drop_to_uid = _work_dir_owner(config.work_dir) or _uids.randrange(1_000_000, 2_000_000_000)
        else:
            self.workdir = tempfile.mkdtemp(prefix="gem-sandbox-")
            prefix, pass_fds, cwd = [], (status_write,), config.work_dir or self.workdir
        paths = os.pathsep.join(site_dirs(config.python))
        # The snippet's stdin: a memfd made here, as the sandbox's seccomp filter forbids making one inside.
        stdin_file = os.memfd_create("stdin", os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
        program = [
            config.python, "-I", "-S", "-B", "-c", _PROGRAM,
            str(status_write), str(drop_to_uid), ",".join(preload), paths, str(stdin_file),
        ]
        env = dict(ENV, HOME=self.workdir) if mode == "process" else {}
        try:
            self.process = start_process(
                [*prefix, *program],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                pass_fds=(*pass_fds, stdin_file),
                start_new_session=True,
                cwd=cwd,
                env=env,
            )
        finally:
            os.close(status_write)
            os.close(stdin_file)
            if launch is not None:
                launch.close()

    def wait_ready(self, timeout: float = 60.0) -> None:
        """Block until the worker has started (and preloaded its modules).

        Raises:
            SandboxUnavailableError: if the worker failed to start (the message holds the end of its stderr).
        """
        selector = selectors.DefaultSelector()
        selector.register(self.status_fd, selectors.EVENT_READ)
        ready = selector.select(timeout)
        selector.close()
        byte = self._receive_ready() if ready else b""
        if byte != b"R":
            self.kill()
            stderr = self.process.stderr.read().decode(errors="replace") if self.process.stderr else ""
            raise SandboxUnavailableError(
                f"A {self.mode!r} sandbox worker failed to start: {stderr.strip()[-1000:] or 'no output'}"
            )

    def _receive_ready(self) -> bytes:
        """The supervisor's ready byte; keeps the socket-memory socket it carries (bwrap mode: in the
        sandbox's own network namespace; in process mode it would count the host's, so it is closed)."""
        status = socket.socket(fileno=self.status_fd)
        try:
            byte, fds, _, _ = socket.recv_fds(status, 1, 1)
        except OSError:
            return b""
        finally:
            status.detach()
        for fd in fds:
            if self.mode == "bwrap" and self.sockets is None:
                self.sockets = SocketMemory(fd)
            else:
                os.close(fd)
        return byte

    def alive(self) -> bool:
        """Whether the worker process is still running."""
        return self.process.poll() is None

    def kill(self, pids: Sequence[int] = ()) -> None:
        """Kill the worker and everything it started: its process group, the processes found in its tree
        (``pids``), and bwrap, which takes its PID namespace down with it."""
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        kill_group(self.process)

    def close(self) -> None:
        """Kill the worker, close its pipes and remove its working directory."""
        self.kill()
        self._close_handles()
        if self.workdir:
            shutil.rmtree(self.workdir, ignore_errors=True)

    def _close_handles(self) -> None:
        for stream in (self.process.stdin, self.process.stdout, self.process.stderr):
            if stream is not None:
                try:
                    stream.close()  # through the file object, so nothing closes the fd number again later
                except OSError:
                    pass
        if self.status_fd >= 0:
            os.close(self.status_fd)
            self.status_fd = -1  # never close the number twice: it may belong to another file by then
        if self.sockets is not None:
            self.sockets.close()
            self.sockets = None

    def forget(self) -> None:
        """Drop this handle without touching the process (it belongs to the parent after a fork)."""
        self._close_handles()
        self.process.returncode = 0  # not our child: keep Popen from waiting for it

    def run(self, request: dict, timeout: float) -> SandboxResult:
        """Hand the snippet over, collect output until it ends, a limit hits or the timeout expires."""
        start = time.monotonic()
        process = self.process
        # start_process opens all three as pipes
        assert process.stdin is not None and process.stdout is not None and process.stderr is not None
        request = dict(request, max_returned_bytes=self.config.max_returned_bytes)
        payload = json.dumps(request).encode()
        try:
            # Length-prefixed, not ended by EOF: a forked copy of this process may hold the pipe open.
            process.stdin.write(b"%d\n" % len(payload) + payload)
            process.stdin.close()
        except (BrokenPipeError, OSError):
            pass  # died before reading: reported below from its exit status
        monitor = SandboxMonitor(
            process.pid,
            supervisor_depth=2 if self.mode == "bwrap" else 0,
            memory_bytes=int(request["memory_mb"]) * MIB,
            max_files=self.config.max_tmp_files if self.mode == "bwrap" else None,
            work_dir=self.config.work_dir,
            work_bytes=self.config.max_work_mb * MIB,
            work_files=self.config.max_work_files,
            count_tmpfs=self.mode == "bwrap",
            sockets=self.sockets,
        )
        pidfd = os.pidfd_open(process.pid)
        try:
            watched = watch(
                process.stdout.fileno(), process.stderr.fileno(), self.status_fd, pidfd,
                start + timeout, self.config, lambda _lines: monitor,
            )
        finally:
            os.close(pidfd)
        self.kill(monitor.snippet_pids() if self.mode == "process" else [])
        work_dir = self.config.work_dir
        # Sampled, the directory is walked only every few samples: a command that fills it and ends (or is
        # stopped) between two walks is caught here, once nothing runs that could write to it.
        if work_dir is not None and watched.cap != "disk":
            if work_dir_over(work_dir, self.config.max_work_mb * MIB, self.config.max_work_files):
                watched.cap = "disk"

        def exit_code_without_status() -> int:
            code = process.returncode
            if self.mode == "bwrap" and code > 128:
                code = -(code - 128)  # bwrap reports death by signal N as 128 + N
            return code

        result = watched.result(self.mode, start, exit_code_without_status)
        self.close()
        return result


class Watched:
    """What :func:`watch` saw of one snippet."""

    def __init__(self, output: _OutputCollector, lines: list[dict], timed_out: bool, cap: str | None):
        self.output, self.lines, self.timed_out, self.cap = output, lines, timed_out, cap
        self.status = next((line for line in lines if _is_status(line)), None)

    def result(self, mode: str, start: float, exit_code_without_status: Callable[[], int]) -> SandboxResult:
        returned = None
        exit_code: int | None
        limit: str | None
        if self.cap is not None:  # first: a full work dir found after a timeout must still end a terminal episode
            exit_code, limit = None, self.cap
        elif self.timed_out:
            exit_code, limit = None, "time"
        elif self.output.over_cap:
            exit_code, limit = None, "output"
        elif self.status is not None:
            exit_code, limit = int(self.status["exit"]), self.status.get("limit")
            if limit not in (None, *_LIMITS):
                limit = None
            returned = self.status.get("returned") if exit_code == 0 and limit is None else None
            returned = returned if isinstance(returned, str) else None
            if limit is None and exit_code == -signal.SIGXCPU:
                limit = "cpu"
        else:
            exit_code = exit_code_without_status()
            limit = "cpu" if exit_code == -signal.SIGXCPU else None
        output = self.output
        duration = time.monotonic() - start
        return SandboxResult(output.text(0), output.text(1), exit_code, self.timed_out, limit, mode, duration, returned)


def watch(
    stdout_fd: int,
    stderr_fd: int,
    status_fd: int,
    end_fd: int | None,
    deadline: float,
    config: SandboxConfig,
    monitor_for: Callable[[list[dict]], SandboxMonitor | None],
    report: Report | None = None,
) -> Watched:
    """Read output and status until the status line arrives, ``end_fd`` turns readable (the worker
    died), the deadline passes, or a cap breaks; ``monitor_for(status lines so far)`` gives the monitor
    to sample (None until it can be built). ``report``: a pipe whose reader may give the status first
    (a zygote call's snippet report, :class:`gem_core.tools.sandbox.zygote._Report`)."""
    output = _OutputCollector(stdout_fd, stderr_fd, config.max_output_bytes)
    status_cap = config.max_returned_bytes * 2 + _STATUS_SLACK  # JSON may escape each byte
    selector = selectors.DefaultSelector()
    for fd in output.fds:
        selector.register(fd, selectors.EVENT_READ)
    os.set_blocking(status_fd, False)
    selector.register(status_fd, selectors.EVENT_READ)
    if end_fd is not None:
        selector.register(end_fd, selectors.EVENT_READ)
    if report is not None:
        os.set_blocking(report.fd, False)
        selector.register(report.fd, selectors.EVENT_READ)
    status_bytes = bytearray()
    lines: list[dict] = []
    timed_out = done = False
    cap: str | None = None
    next_sample = time.monotonic() + config.sample_interval
    try:
        while not done and not output.over_cap and cap is None:
            now = time.monotonic()
            if now >= deadline:
                timed_out = True
                break
            if now >= next_sample:
                monitor = monitor_for(lines)
                cap = monitor.broken_cap() if monitor is not None else None
                next_sample = now + config.sample_interval
                continue
            for key, _ in selector.select(min(deadline, next_sample) - now):
                if key.fd == end_fd:
                    done = True  # ended without a status line (a signal, or bwrap failed)
                elif report is not None and key.fd == report.fd:
                    chunk = _read_some(report.fd)
                    if not chunk:
                        if chunk == b"":
                            selector.unregister(report.fd)
                        continue
                    status = report.feed(chunk)
                    if status is not None:
                        lines.append(status)
                        done = True
                elif key.fd == status_fd:
                    chunk = _read_some(status_fd)
                    if not chunk:
                        selector.unregister(status_fd)
                        done = done or chunk == b""
                    status_bytes += chunk or b""
                    if len(status_bytes) > status_cap:
                        done = True  # a supervisor does not say that much: treat it as dead
                        break
                    complete, _, rest = bytes(status_bytes).rpartition(b"\n")
                    if complete:
                        lines.extend(_parse_lines(complete))
                        status_bytes = bytearray(rest)
                        done = done or any(_is_status(line) for line in lines)
                elif not output.read(key.fd):
                    selector.unregister(key.fd)
    finally:
        selector.close()
    # The snippet is done or stopped: take what is already in the pipes.
    for fd in output.fds:
        output.read(fd, until_empty=True)
    return Watched(output, lines, timed_out, cap)


class Report(Protocol):
    """A pipe :func:`watch` reads besides the output, whose reader may give the status."""

    fd: int

    def feed(self, chunk: bytes) -> dict | None:
        """Take bytes read from ``fd``; the status (``{"exit": int, ...}``) once known, else None."""


def _read_some(fd: int) -> bytes | None:
    """Bytes available on ``fd``: ``b""`` at end of file, None if none are available now."""
    try:
        return os.read(fd, 65536)
    except BlockingIOError:
        return None
    except OSError:
        return b""


_LIMITS = ("time", "cpu", "memory", "output", "processes", "file_size", "open_files", "disk")


def _parse_lines(data: bytes) -> list[dict]:
    """The JSON objects among the supervisor's status lines."""
    found = []
    for line in data.split(b"\n"):
        try:
            value = json.loads(line)
        except ValueError:
            continue
        if isinstance(value, dict):
            found.append(value)
    return found


def _is_status(line: dict) -> bool:
    return isinstance(line.get("exit"), int)


class _OutputCollector:
    """Reads stdout and stderr without blocking and keeps at most ``cap`` bytes of them together."""

    def __init__(self, stdout_fd: int, stderr_fd: int, cap: int):
        self.fds = (stdout_fd, stderr_fd)
        self.cap = cap
        self.total = 0
        self.buffers = {stdout_fd: bytearray(), stderr_fd: bytearray()}
        for fd in self.fds:
            os.set_blocking(fd, False)

    @property
    def over_cap(self) -> bool:
        return self.total > self.cap

    def read(self, fd: int, until_empty: bool = False) -> bool:
        """Read what is available; False once the stream has ended."""
        while True:
            chunk = _read_some(fd)
            if chunk is None:
                return True
            if not chunk:
                return False
            self.buffers[fd] += chunk[: max(0, self.cap - self.total)]
            self.total += len(chunk)
            if not until_empty or self.over_cap:
                return True

    def text(self, index: int) -> str:
        return bytes(self.buffers[self.fds[index]]).decode("utf-8", errors="replace")
