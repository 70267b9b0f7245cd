"""Ends what the agents left once the process that started them is gone, however it went: their processes and folders.

An agent runs in a session of its own (so a limit kills it with every process it started), which also puts it out
of reach of what ends its trainer: a trainer killed by the OOM killer, SIGKILL, SIGTERM or a lost node runs no
cleanup, and left every agent of its batch running, with the tests and shells those had started, and the runs'
temporary folders (two per run) in the temporary directory for good.

One guard process per trainer process watches them: the trainer tells it each agent it starts and each folder it
makes, and strikes each off once it has ended it or removed it, over a pipe. The guard acts once the trainer's
process is gone, which it learns from a pidfd of it (where the kernel has none: its parent changed, looked at five
times a second), not from the pipe's end-of-file alone: a fork of the trainer (a data loader's worker, a
multiprocessing helper) holds the pipe's write end too, and may outlive it. Then it ends every agent still listed
(:func:`end_process_tree`: its process group, and every process descended from it or from a member of the group)
and removes every folder still listed (:func:`remove_path`: following no link). An agent is struck off before its
leader is reaped, and the guard checks the leader's start time before it walks the leader's descendants, so a pid
that passed to another process is not followed. Run as ``python -I -S orphan_guard.py TRAINER_PID``, the guard
imports nothing but the standard library (so the run imports these functions from here); its own session keeps it
out of reach of the trainer's Ctrl-C.
"""

from __future__ import annotations

import json
import os
import select
import shutil
import signal
import stat
import subprocess
import sys
import threading

__all__ = ["OrphanGuard", "end_process_tree", "remove_path"]

_CHECK_SECONDS = 0.2  # without a pidfd: how often the guard looks whether the trainer is gone
_MAX_ROUNDS = 100  # of end_process_tree's walk: each stops every process it finds, so only a fork bomb needs many


class OrphanGuard:
    """The trainer's side: starts the guard on first use (again in a forked child, which needs its own)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._process: subprocess.Popen | None = None
        self._pid = 0

    def watch(self, group: int) -> None:
        """List the agent whose process (and process group) is ``group``, while it is this process's unreaped child:
        it is ended (:func:`end_process_tree`) if this process dies before :meth:`release`."""
        self._send(["+", group, _start_time(group)])

    def release(self, group: int) -> None:
        """Strike ``group`` off (call it before its leader is reaped)."""
        self._send(["-", group])

    def watch_path(self, path: str | os.PathLike[str]) -> None:
        """List a folder (or file) to remove if this process dies before :meth:`release_path`."""
        self._send(["+path", os.fspath(path)])

    def release_path(self, path: str | os.PathLike[str]) -> None:
        """Strike ``path`` off (once it is removed)."""
        self._send(["-path", os.fspath(path)])

    def _send(self, message: list) -> None:
        with self._lock:
            try:
                if self._process is not None and self._pid != os.getpid() and self._process.stdin is not None:
                    self._process.stdin.close()  # a forked child's copy: its parent's guard must still see its end
                    self._process = None
                if self._process is None or self._process.poll() is not None:
                    self._process = subprocess.Popen(
                        [sys.executable, "-I", "-S", __file__, str(os.getpid())], stdin=subprocess.PIPE,
                        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
                    )
                    self._pid = os.getpid()
                assert self._process.stdin is not None
                self._process.stdin.write(json.dumps(message).encode() + b"\n")
                self._process.stdin.flush()
            except OSError:  # no guard (it was killed, or cannot start): the agents still end at their limits
                self._process = None


def end_process_tree(leader: int, start_time: int | None = None) -> None:
    """SIGKILL process group ``leader`` and every process descended from ``leader`` or from a member of its group.

    A process that called setsid left the group but not the tree, as long as its parent lives: it is found through
    ``/proc`` by its parent's pid. Each process is stopped before its children are looked for, and the walk is
    repeated until it finds no new process, so none forks a child past it; a process found as the child of a stopped
    one cannot have been reaped, so its pid is still its own when it is signalled. A process whose parent ended
    before the walk is init's (or, in a PID namespace, its init's: see :mod:`~gem_core.agent.program`), out of reach
    unless it is still in the group.

    Args:
        leader: the process whose group this is; for a caller that is its parent, not yet reaped.
        start_time: the leader's (``/proc`` clock ticks), for a caller that is not its parent: if the pid now names
            another process, only the group is killed.
    """
    stopped: list[int] = []
    if start_time is None or _start_time(leader) == start_time:
        for _ in range(_MAX_ROUNDS):
            new = [pid for pid in _tree(leader, _processes()) if pid not in stopped]
            if not new:
                break
            for pid in new:  # parents first: each child's parent is stopped before it is signalled
                _signal(pid, signal.SIGSTOP)
            stopped += new
    try:
        os.killpg(leader, signal.SIGKILL)
    except OSError:  # the group is empty
        pass
    for pid in stopped:
        _signal(pid, signal.SIGKILL)


def remove_path(path: str | os.PathLike[str]) -> None:
    """Remove ``path`` and all it holds, never following a symbolic link and never raising.

    The folder was an agent's, which may have left links to anywhere in it, replaced it by a link or a file, or
    made parts of it read-only: what it did to its own folder is no reason to fail its run, nor to touch anything
    outside. A folder left read-only is made writable and removed (that matters only to a non-root process).
    """
    try:
        if not stat.S_ISDIR(os.lstat(path).st_mode):
            os.unlink(path)
            return
    except OSError:
        return
    shutil.rmtree(path, ignore_errors=True)  # fd-based here: it follows no link, at the top or below
    if os.path.lexists(path):
        for folder, _, _ in os.walk(path):  # into real folders only, not through links
            try:
                os.chmod(folder, stat.S_IRWXU)
            except OSError:
                pass
        shutil.rmtree(path, ignore_errors=True)


def _signal(pid: int, number: int) -> None:
    try:
        os.kill(pid, number)
    except OSError:  # gone, or not ours to signal
        pass


def _stat(pid: int) -> list[bytes] | None:
    """The fields of ``/proc/PID/stat`` after the command name (state, ppid, pgrp, ...); None once it is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as file:
            data = file.read()
    except OSError:
        return None
    return data[data.rindex(b")") + 2:].split()


def _start_time(pid: int) -> int | None:
    fields = _stat(pid)
    return int(fields[19]) if fields else None


def _processes() -> dict[int, tuple[int, int]]:
    """Every process's ``(parent pid, process group)``, by pid (none without ``/proc``)."""
    found: dict[int, tuple[int, int]] = {}
    try:
        names = os.listdir("/proc")
    except OSError:
        return found
    for name in names:
        if name.isdigit():
            fields = _stat(int(name))
            if fields:
                found[int(name)] = (int(fields[1]), int(fields[2]))
    return found


def _tree(leader: int, processes: dict[int, tuple[int, int]]) -> list[int]:
    """``leader``, the members of its group and all their descendants, each after its parent."""
    children: dict[int, list[int]] = {}
    for pid, (parent, _) in processes.items():
        children.setdefault(parent, []).append(pid)
    order: list[int] = []
    seen = set()
    queue = [leader, *(pid for pid, (_, group) in processes.items() if group == leader)]
    for pid in queue:  # grows as it goes: breadth first
        if pid not in seen:
            seen.add(pid)
            order.append(pid)
            queue += children.get(pid, [])
    return order


def _apply(data: bytes, agents: dict[int, int | None], paths: dict[str, None]) -> bytes:
    """Apply the trainer's complete lines in ``data``; the rest (a line still being written)."""
    *lines, rest = data.split(b"\n")
    for line in lines:
        try:
            operation, *arguments = json.loads(line)
        except ValueError:
            continue
        if operation == "+":
            agents[arguments[0]] = arguments[1]
        elif operation == "-":
            agents.pop(arguments[0], None)
        elif operation == "+path":
            paths[arguments[0]] = None
        elif operation == "-path":
            paths.pop(arguments[0], None)
    return rest


def _guard(trainer: int) -> None:
    agents: dict[int, int | None] = {}  # leader -> its start time
    paths: dict[str, None] = {}  # in the order made
    pending = b""
    poller = select.poll()
    poller.register(0, select.POLLIN)
    try:
        gone = os.pidfd_open(trainer)  # readable once the trainer's process has ended
        poller.register(gone, select.POLLIN)
    except (AttributeError, OSError):  # a kernel before 5.3: look at the parent
        gone = None
    while os.getppid() == trainer:  # checked after the pidfd is open: the pid cannot name another process
        events = dict(poller.poll(None if gone is not None else _CHECK_SECONDS * 1000))
        if gone in events:
            break
        if 0 in events:
            chunk = os.read(0, 1 << 16)
            if not chunk:  # every writer is gone
                break
            pending = _apply(pending + chunk, agents, paths)
    os.set_blocking(0, False)
    try:  # what the trainer wrote before it died (a fork may hold the pipe open: no end-of-file to wait for)
        while chunk := os.read(0, 1 << 16):
            pending = _apply(pending + chunk, agents, paths)
    except BlockingIOError:
        pass
    for leader, start_time in agents.items():
        end_process_tree(leader, -1 if start_time is None else start_time)  # a start time unknown: only its group
    for path in paths:
        remove_path(path)


if __name__ == "__main__":
    _guard(int(sys.argv[1]))
