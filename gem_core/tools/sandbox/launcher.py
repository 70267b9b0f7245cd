"""Sandboxes are started from one thread that lives as long as the process.

bubblewrap's ``--die-with-parent`` is ``prctl(PR_SET_PDEATHSIG, SIGKILL)``, and the kernel sends that
signal when the *thread* that forked bubblewrap ends, not when its process does. Started from a
caller's thread, a sandbox died with that thread: a zygote started by the first of four caller threads
was killed as soon as that thread finished, and the three calls still running in it ended with no
status (exit 70, nothing printed). So every sandbox process is forked by a daemon thread of this module
that never ends before the process; the sandbox still dies with the process, which is what
``--die-with-parent`` is there for.
"""

from __future__ import annotations

import concurrent.futures
import os
import queue
import subprocess
import threading
from typing import Any

__all__ = ["start_process"]

_Job = tuple[list[str], dict[str, Any], concurrent.futures.Future]


class _Launcher:
    """One daemon thread that runs ``subprocess.Popen`` for whoever asks, and never returns."""

    def __init__(self) -> None:
        self.jobs: queue.SimpleQueue[_Job] = queue.SimpleQueue()
        self.thread = threading.Thread(target=self._serve, name="gem-sandbox-launcher", daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while True:
            command, options, future = self.jobs.get()
            if not future.set_running_or_notify_cancel():
                continue
            try:
                future.set_result(subprocess.Popen(command, **options))
            except BaseException as error:  # handed to the caller, whatever it is: this thread must live on
                future.set_exception(error)


_launcher: _Launcher | None = None
_lock = threading.Lock()


def _forget_after_fork() -> None:
    """A forked child has none of its parent's threads: its first sandbox starts a launcher of its own."""
    global _launcher, _lock
    _launcher, _lock = None, threading.Lock()


os.register_at_fork(after_in_child=_forget_after_fork)


def start_process(command: list[str], **options: Any) -> subprocess.Popen:
    """``subprocess.Popen(command, **options)``, forked by the launcher thread; waits for it.

    The descriptors named in ``pass_fds`` must stay open until this returns (the caller's do: it waits).

    Raises:
        OSError: the program cannot be started (and whatever else ``Popen`` raised).
    """
    global _launcher
    with _lock:
        if _launcher is None or not _launcher.thread.is_alive():
            _launcher = _Launcher()
        launcher = _launcher
    future: concurrent.futures.Future = concurrent.futures.Future()
    launcher.jobs.put((command, options, future))
    return future.result()
