"""Shell commands in the sandbox, with one host directory they may change: a terminal env's workspace.

A :class:`WorkDir` is a fresh host directory that lives as long as an episode; :func:`run_shell` runs one
``bash -c`` command in a sandbox of its own (bubblewrap started per call: the zygote cannot bind a host
directory it does not see) with that directory bound read-write at ``/workspace`` as its working
directory. Everything else is as for a Python snippet: no network, a read-only view of the system
directories only (not the home or working directory, not GEM's checkout or package data), a private
``/tmp``, the seccomp filter, the resource limits and the output cap, plus a cap on the bytes and files
under the work directory (``limit="disk"``).

The command reaches bash through ``execv`` from the worker's snippet process, after the limits are set
and the seccomp filter is loaded, so the shell and all it starts stay under them. A command too long to
be one argument (:data:`MAX_ARGUMENT_BYTES`) is written to a script file in the sandbox's ``$HOME`` (its
private ``/tmp`` under bubblewrap) and run as ``bash FILE`` instead: the same shell, stdin and directory,
but ``$0`` and its error messages name the file.
"""

from __future__ import annotations

import os
import random
import tempfile
import weakref
from dataclasses import replace
from pathlib import Path

from gem_core.errors import MissingFile
from gem_core.tools.sandbox.config import SandboxConfig, SandboxResult
from gem_core.tools.sandbox.isolation import resolve_mode
from gem_core.tools.sandbox.pool import SandboxPool

__all__ = ["WorkDir", "run_shell", "SHELL", "MAX_ARGUMENT_BYTES"]

SHELL = "bash"
"""The shell commands run in (``bash``, found on the sandbox's ``PATH``)."""
MAX_ARGUMENT_BYTES = 128 * 1024
"""The kernel's limit on one argument of ``execve`` (``MAX_ARG_STRLEN``: 32 pages, 128 KiB with 4 KiB pages),
its terminating NUL included: a longer ``bash -c`` command failed with ``E2BIG`` ("Argument list too long")."""
#: Where a command too long for ``bash -c`` is written (``$HOME``: a fresh directory of each sandbox).
_SCRIPT = ".gem-command.sh"
_uids = random.SystemRandom()


class WorkDir:
    """A fresh, empty host directory for one episode's files, removed by :meth:`close` (or when the object
    is garbage-collected).

    It sits inside a private (``0700``) temporary directory, so no other host user reaches it. Run as
    root, it is owned by a random unprivileged uid of its own, which the commands then run as: files
    stay writable from one command to the next, and nothing in it belongs to root.

    Commands can make trees of any depth (``mkdir -p`` of 1,100 levels, or past ``PATH_MAX``): the tree is
    walked and deleted with a list of directories to visit, never by recursion, which would exhaust the
    interpreter's stack (``os.walk`` and ``shutil.rmtree`` recurse once per level).

    Args:
        prefix: the name prefix of the directory.
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
        """Whether the directory has been removed."""
        return not self._finalizer.alive

    def chown_tree(self) -> None:
        """Give everything under the directory to its owner (after the host wrote files into it);
        symbolic links are changed themselves, never followed. Nothing to do unless the host is root.

        Raises:
            OSError: an entry cannot be changed, e.g. its path is longer than ``PATH_MAX`` (the host
                writes no such path: commands, which do, create their files as the owner already).
        """
        if os.geteuid() != 0:
            return
        owner = os.stat(self.path)
        pending = [self.path]
        while pending:
            with os.scandir(pending.pop()) as entries:
                for entry in entries:
                    os.lchown(entry.path, owner.st_uid, owner.st_gid)
                    if entry.is_dir(follow_symlinks=False):
                        pending.append(entry.path)

    def close(self) -> None:
        """Delete the directory and all in it (symbolic links are removed, never followed), at any depth."""
        self._finalizer()

    def __repr__(self) -> str:
        return f"WorkDir({self.path!r}{', closed' if self.closed else ''})"


_DIRECTORY = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def _remove_tree(path: str) -> None:
    """``rm -rf path`` for a tree of any depth, without recursion; best effort (what cannot be removed
    stays, and nothing is raised: this also runs from a finalizer).

    Each subdirectory found below ``path``'s children is first moved up to lie directly in ``path``, so no
    path grows with the tree's depth (a tree deeper than ``PATH_MAX`` allows is removed too). Directories
    are opened without following links and everything inside them is reached through their descriptors,
    so a link is removed as a link wherever it is. Run unprivileged, where a command may have taken its
    own permissions away (``chmod 000``; commands then run as the host's own user), each directory is
    first given ``0700``.
    """
    as_root = os.geteuid() == 0
    try:
        if not as_root:
            os.chmod(path, 0o700)
        top = os.open(path, _DIRECTORY)
    except OSError:
        return
    moved = 0
    try:
        pending = [""]  # directories to empty, by name in ``top`` ("" is ``top`` itself)
        while pending:
            name = pending.pop()
            try:
                if name and not as_root:
                    os.chmod(name, 0o700, dir_fd=top)
                fd = os.open(name, _DIRECTORY, dir_fd=top) if name else os.dup(top)
            except OSError:
                continue
            try:
                with os.scandir(fd) as entries:
                    found = [(entry.name, entry.is_dir(follow_symlinks=False)) for entry in entries]
                for child, is_directory in found:
                    try:
                        if not is_directory:
                            os.unlink(child, dir_fd=fd)
                        elif not name:
                            pending.append(child)
                        else:
                            if not as_root:
                                os.chmod(child, 0o700, dir_fd=fd)  # moving a directory rewrites its ".."
                            moved += 1
                            while _exists(f".gem-removing-{moved}", top):
                                moved += 1
                            os.rename(child, f".gem-removing-{moved}", src_dir_fd=fd, dst_dir_fd=top)
                            pending.append(f".gem-removing-{moved}")
                    except OSError:
                        continue
            except OSError:
                pass
            finally:
                os.close(fd)
            if name:
                try:
                    os.rmdir(name, dir_fd=top)
                except OSError:
                    pass
    finally:
        os.close(top)
    try:
        os.rmdir(path)
    except OSError:
        pass


def _exists(name: str, dir_fd: int) -> bool:
    try:
        os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except FileNotFoundError:
        return False
    except OSError:
        return True
    return True


def run_shell(
    command: str,
    work_dir: WorkDir | str,
    *,
    timeout: float = 10.0,
    memory_mb: int = 512,
    mode: str | None = None,
    config: SandboxConfig | None = None,
) -> SandboxResult:
    """Run ``bash -c command`` in a fresh sandbox whose working directory is ``work_dir`` (a command of
    :data:`MAX_ARGUMENT_BYTES` or more runs from a script file: see the module docstring).

    Args:
        command: the shell command (untrusted).
        work_dir: the directory to bind read-write (a :class:`WorkDir`, or its path).
        timeout: as for :func:`~gem_core.tools.sandbox.run_python`.
        memory_mb: as for :func:`~gem_core.tools.sandbox.run_python`.
        mode: ``"bwrap"`` (default) or ``"process"``; None reads ``$GEM_SANDBOX``.
        config: other limits (output cap, processes, file size, work-directory caps); its ``work_dir``,
            ``pool_size`` and ``zygote`` are set here.

    Raises:
        SandboxUnavailableError: the mode cannot run on this machine (see :func:`resolve_mode`).
        MissingFile: ``work_dir`` does not exist (closed already).
    """
    path = work_dir.path if isinstance(work_dir, WorkDir) else str(work_dir)
    if not Path(path).is_dir():
        raise MissingFile(f"The work directory {path!r} does not exist (closed already?).")
    resolved = resolve_mode(mode)
    settings = replace(config or SandboxConfig(), work_dir=path, pool_size=0, zygote=False, preload=())
    script = command.encode("utf-8", "surrogatepass")  # never raises; at least as long as the argument
    if len(script) < MAX_ARGUMENT_BYTES:
        code = f"import os\nos.execvp({SHELL!r}, [{SHELL!r}, '-c', {command!r}])\n"
    else:
        code = (
            f"import os\npath = os.path.join(os.path.expanduser('~'), {_SCRIPT!r})\n"  # the sandbox's HOME
            f"with open(path, 'xb') as file:\n    file.write({script!r})\n"
            f"os.execvp({SHELL!r}, [{SHELL!r}, path])\n"
        )
    return SandboxPool(resolved, settings).run(code, timeout=timeout, memory_mb=memory_mb)
