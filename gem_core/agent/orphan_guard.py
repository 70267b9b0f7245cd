"""Ends the agents' process groups when the process that started them is gone, however it went.

An agent runs in a session of its own (so a limit kills it with every process it started), which also puts it out
of reach of what ends its trainer: a trainer killed by the OOM killer, SIGKILL or a lost node runs no cleanup, and
left every agent of its batch running, with the tests and shells those had started.

One guard process per trainer process watches them: the trainer tells it each group it starts and each it has ended,
over a pipe only the trainer holds. When the trainer is gone the pipe reads end-of-file, and the guard kills every
group still listed. A group is struck off before its leader is reaped, so its id cannot have passed to another
process when the guard uses it. Run as ``python -I -S orphan_guard.py``, the guard imports nothing but the standard
library; its own session keeps it out of reach of the trainer's Ctrl-C.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading

__all__ = ["OrphanGuard"]


class OrphanGuard:
    """The trainer's side: starts the guard on first use (again in a forked child, which needs its own)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._process: subprocess.Popen | None = None
        self._pid = 0

    def watch(self, group: int) -> None:
        """List process group ``group``: killed if this process dies before :meth:`release`."""
        self._send(f"+{group}\n")

    def release(self, group: int) -> None:
        """Strike ``group`` off (call it before its leader is reaped)."""
        self._send(f"-{group}\n")

    def _send(self, line: str) -> None:
        with self._lock:
            try:
                if self._process is not None and self._pid != os.getpid() and self._process.stdin is not None:
                    self._process.stdin.close()  # a forked child's copy: its parent's guard must still see its end
                    self._process = None
                if self._process is None or self._process.poll() is not None:
                    self._process = subprocess.Popen(
                        [sys.executable, "-I", "-S", __file__], stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                        stderr=subprocess.DEVNULL, start_new_session=True,
                    )
                    self._pid = os.getpid()
                assert self._process.stdin is not None
                self._process.stdin.write(line.encode())
                self._process.stdin.flush()
            except OSError:  # no guard (it was killed, or cannot start): the agents still end at their limits
                self._process = None


def _guard() -> None:
    groups: set[int] = set()
    for line in sys.stdin.buffer:  # until end-of-file: the trainer is gone
        group = int(line[1:])
        if line.startswith(b"+"):
            groups.add(group)
        else:
            groups.discard(group)
    for group in groups:
        try:
            os.killpg(group, signal.SIGKILL)
        except OSError:
            pass


if __name__ == "__main__":
    _guard()
