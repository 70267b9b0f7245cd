"""One process at a time in a folder: an exclusive ``flock`` on a lock file in it, which holds the owner's pid.

Two runs given one folder (a seed sweep launched with one output folder, a restarted job while the first
still runs) overwrite each other's files: a curriculum's sampler state, an eval's episode log, a training run's
log, metrics and curve. The second is refused instead, and told who holds the folder. The lock file is never opened through
a symbolic link nor written when it is not this user's own regular file: another user who plants one in
a folder they own must not get a root run to truncate and write the link's target.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

from gem_core.errors import GemError

__all__ = ["lock_folder", "release_folder"]


def lock_folder(folder: Path, lock_name: str, *, what: str, why: str, error: type[GemError]) -> int | None:
    """Create ``folder`` if missing and take the exclusive lock on its ``lock_name`` file; the lock's descriptor
    (None where the platform has no ``fcntl``). Closing the descriptor, or the process's end, releases it.

    ``what`` names the folder in messages (``"state_dir"``, ``"--out"``) and ``why`` says what sharing it breaks.

    Raises:
        GemError: ``error``, when ``folder`` is a file, or another process (or another owner in this one) holds
            it, or its lock file is a symbolic link or not this user's own regular file, or the folder or its lock
            file cannot be made (a read-only folder, a full disk).
    """
    if folder.exists() and not folder.is_dir():
        raise error(f"{what} {folder} is a file, not a folder: give a folder (created if missing).")
    try:
        import fcntl
    except ImportError:  # no flock on this platform: unlocked
        fcntl = None  # type: ignore[assignment]  # the module or None: typeshed has no optional-module type
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as problem:  # a read-only parent, a full disk: the run is refused naming the folder and why
        raise error(f"{what} {folder} cannot be made ({problem.strerror or problem}): give a folder this run can write.") from None
    if fcntl is None:
        return None
    path = folder / lock_name
    while True:
        fd = _open_lock_file(path, what, error)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            owner = os.read(fd, 32).decode("ascii", "replace").strip() or "unknown"
            os.close(fd)
            who = ("another owner in this process" if owner == str(os.getpid()) else "another process") + f" (pid {owner})"
            raise error(f"{what} {folder} is in use by {who}: {why}; wait for it to end, or give each run its own {what}.") from None
        except BaseException:
            os.close(fd)
            raise
        if _is_at(fd, path):
            break
        os.close(fd)  # its holder removed it (release_folder) after this open: lock the file now at the path
    try:
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode("ascii"), 0)
    except OSError:  # a full disk: the lock holds all the same, and a refused run is told "pid unknown"
        pass
    return fd


def release_folder(folder: Path, lock_name: str, fd: int | None) -> None:
    """Give up a folder taken by :func:`lock_folder` (``fd``, its descriptor) and remove the lock file, so that a
    run's output folder holds its outputs only. The file goes while still locked, and a run that opened it just
    before takes the next one (:func:`lock_folder` checks that the file it locked is still the one at the path)."""
    if fd is None:
        return
    try:
        path = folder / lock_name
        if _is_at(fd, path):
            path.unlink()
    except OSError:  # gone already, or a read-only folder: the lock is released all the same
        pass
    finally:
        os.close(fd)


def _is_at(fd: int, path: Path) -> bool:
    """Whether ``fd`` is the file at ``path`` (not one removed or replaced since it was opened)."""
    try:
        at_path = os.stat(path, follow_symlinks=False)
    except OSError:
        return False
    opened = os.fstat(fd)
    return (opened.st_dev, opened.st_ino) == (at_path.st_dev, at_path.st_ino)


def _open_lock_file(path: Path, what: str, error: type[GemError]) -> int:
    """A descriptor of the lock file at ``path``, never through a symbolic link and never another user's file:
    a link, a file that is not a regular file of this user, or one with other hard links is refused before
    anything is written, naming the fix."""
    fix = f"remove it (rm {path}) if no run uses this {what}, or give a {what} of your own"
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
                     | getattr(os, "O_NONBLOCK", 0), 0o644)
    except OSError as problem:
        if problem.errno == errno.ELOOP:
            raise error(f"The lock file {path} is a symbolic link: a run would write its pid into the link's target; "
                        f"refused. {fix[0].upper()}{fix[1:]}.") from None
        if problem.errno == errno.EISDIR:  # a directory cannot be opened for writing: refused as a FIFO is
            raise error(f"The lock file {path} is not a regular file; refused. {fix[0].upper()}{fix[1:]}.") from None
        # a read-only folder, a full disk: the run could not lock its folder, so it is refused saying why
        raise error(f"{what} {path.parent}: its lock file {path} cannot be made ({problem.strerror or problem}); "
                    f"give a {what} this run can write.") from None
    info = os.fstat(fd)
    why = None
    if not stat.S_ISREG(info.st_mode):
        why = "is not a regular file"
    elif hasattr(os, "geteuid") and info.st_uid != os.geteuid():
        why = f"belongs to uid {info.st_uid}, not to this run's user (uid {os.geteuid()}): it is not overwritten"
    elif info.st_nlink > 1:
        why = f"has {info.st_nlink} hard links: writing it would change another file too"
    if why is not None:
        os.close(fd)
        raise error(f"The lock file {path} {why}; refused. {fix[0].upper()}{fix[1:]}.")
    return fd
