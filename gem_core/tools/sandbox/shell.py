"""Shell commands in the sandbox, with one host directory they may change: a terminal env's workspace.

A :class:`WorkDir` is a fresh host directory that lives as long as an episode; :func:`run_shell` runs one
``bash -c`` command in a sandbox of its own (bubblewrap started per call: the zygote cannot bind a host
directory it does not see) with that directory bound read-write at ``/workspace`` as its working
directory. Everything else is as for a Python snippet: no network, a read-only view of the system
directories only (not the home or working directory, not GEM's checkout or package data), a private
``/tmp``, the seccomp filter, the resource limits and the output cap, plus a cap on the bytes and files
under the work directory (``limit="disk"``).

The command reaches bash through ``execv`` from the worker's snippet process, after the limits are set
and the seccomp filter is loaded, so the shell and all it starts stay under them.
"""

from __future__ import annotations

import os
import random
import shutil
import sys
import tempfile
import weakref
from dataclasses import replace
from pathlib import Path

from gem_core.tools.sandbox.config import SandboxConfig, SandboxResult
from gem_core.tools.sandbox.isolation import resolve_mode
from gem_core.tools.sandbox.pool import SandboxPool

__all__ = ["WorkDir", "run_shell", "SHELL"]

#: The shell commands run in (``bash``, found on the sandbox's ``PATH``).
SHELL = "bash"
_uids = random.SystemRandom()


class WorkDir:
    """A fresh, empty host directory for one episode's files, removed by :meth:`close` (or when the object
    is garbage-collected).

    It sits inside a private (``0700``) temporary directory, so no other host user reaches it. Run as
    root, it is owned by a random unprivileged uid of its own, which the commands then run as: files
    stay writable from one command to the next, and nothing in it belongs to root.
    """

    def __init__(self, prefix: str = "gem-workdir-"):
        self._parent = tempfile.mkdtemp(prefix=prefix)
        self.path = os.path.join(self._parent, "work")
        os.mkdir(self.path, 0o755)
        if os.geteuid() == 0:
            uid = _uids.randrange(1_000_000, 2_000_000_000)
            os.chown(self.path, uid, uid)
        self._finalizer = weakref.finalize(self, _remove_tree, self._parent)

    @property
    def closed(self) -> bool:
        return not self._finalizer.alive

    def chown_tree(self) -> None:
        """Give everything under the directory to its owner (after the host wrote files into it)."""
        owner = os.stat(self.path)
        if os.geteuid() != 0:
            return
        for root, dirs, files in os.walk(self.path):
            for name in (*dirs, *files):
                os.lchown(os.path.join(root, name), owner.st_uid, owner.st_gid)

    def close(self) -> None:
        """Delete the directory and all in it (symbolic links are removed, never followed)."""
        self._finalizer()

    def __repr__(self) -> str:
        return f"WorkDir({self.path!r}{', closed' if self.closed else ''})"


def _remove_tree(path: str) -> None:
    """``rm -rf path``, also where a command took its own permissions away (``chmod 000 dir``)."""

    def allow_and_retry(function, failed_path, _error):
        try:
            os.chmod(os.path.dirname(failed_path), 0o700)
            if os.path.isdir(failed_path) and not os.path.islink(failed_path):
                os.chmod(failed_path, 0o700)
                _remove_tree(failed_path)
            else:
                function(failed_path)
        except OSError:
            pass

    if sys.version_info >= (3, 12):
        shutil.rmtree(path, onexc=allow_and_retry)
    else:
        shutil.rmtree(path, onerror=allow_and_retry)


def run_shell(
    command: str,
    work_dir: WorkDir | str,
    *,
    timeout: float = 10.0,
    memory_mb: int = 512,
    mode: str | None = None,
    config: SandboxConfig | None = None,
) -> SandboxResult:
    """Run ``bash -c command`` in a fresh sandbox whose working directory is ``work_dir``.

    Args:
        command: the shell command (untrusted).
        work_dir: the directory to bind read-write (a :class:`WorkDir`, or its path).
        timeout, memory_mb: as for :func:`~gem_core.tools.sandbox.run_python`.
        mode: ``"bwrap"`` (default) or ``"process"``; None reads ``$GEM_SANDBOX``.
        config: other limits (output cap, processes, file size, work-directory caps); its ``work_dir``,
            ``pool_size`` and ``zygote`` are set here.

    Raises:
        SandboxUnavailableError: the mode cannot run on this machine (see :func:`resolve_mode`).
    """
    path = work_dir.path if isinstance(work_dir, WorkDir) else str(work_dir)
    if not Path(path).is_dir():
        raise FileNotFoundError(f"The work directory {path!r} does not exist (closed already?).")
    resolved = resolve_mode(mode)
    settings = replace(config or SandboxConfig(), work_dir=path, pool_size=0, zygote=False, preload=())
    code = f"import os\nos.execvp({SHELL!r}, [{SHELL!r}, '-c', {command!r}])\n"
    return SandboxPool(resolved, settings).run(code, timeout=timeout, memory_mb=memory_mb)
