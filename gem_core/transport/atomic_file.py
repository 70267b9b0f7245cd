"""Files that appear whole or not at all: write to a temporary beside the target, then rename.

A dataset, a checkpoint's sampler state or an eval report is read later by another process (a trainer, a
resumed run, a person). Written in place, a full disk or a signal halfway leaves half a file that the reader
takes for the whole one, and the previous version is gone too. :func:`atomic_path` gives the writer a
temporary path in the target's folder (so the rename stays on one file system and is atomic) with the
target's suffix (so writers that pick their format by it, pandas and ``datasets``, keep working), named with
the process id so two processes writing the same target never share a temporary: the last rename wins and
each file read is whole.

The new file takes the place of the one it replaces as that one was: with its permissions (a trajectory file made
private stays private), and at the end of a symbolic link, which stays (a dataset kept on another disk and linked
into the run's folder is written there, not replaced by a file beside the link).
"""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
import stat
from collections.abc import Iterator
from pathlib import Path

from gem_core.errors import InvalidArgument

__all__ = ["atomic_path"]

#: The longest file name, in bytes, of the file systems in use (ext4, XFS, btrfs, APFS, tmpfs).
_NAME_MAX = 255


def _partial_name(target: Path) -> str:
    """The temporary's name: ``.STEM.PID.RANDOM.partial.SUFFIX``, the stem cut short so that the whole stays within
    :data:`_NAME_MAX` bytes (a valid target name near the limit failed with "File name too long"). The pid and
    random part keep it unique, ``.partial`` recognisable; a suffix too long to be a format's is not kept."""
    stem, suffix = target.stem, target.suffix
    tail = f".{os.getpid()}.{secrets.token_hex(3)}.partial"
    if len(os.fsencode(f".{tail}{suffix}")) > _NAME_MAX // 2:
        stem, suffix = target.name, ""
    room = _NAME_MAX - len(os.fsencode(f".{tail}{suffix}"))
    stem = stem[:room]  # characters: at least a byte each
    while len(os.fsencode(stem)) > room:  # whole characters only, never half of a multi-byte one
        stem = stem[:-1]
    return f".{stem}{tail}{suffix}"


@contextlib.contextmanager
def atomic_path(target: str | os.PathLike[str]) -> Iterator[Path]:
    """Yield a temporary path to write; when the block ends without an error it is flushed to disk and
    renamed to ``target``. On any exception (``KeyboardInterrupt`` included) the temporary is removed and
    ``target`` is left as it was. Creates ``target``'s folder; a link is followed (the file it names is the
    target), and the permissions of a file replaced are kept. A target that is neither a file nor a folder
    (``/dev/null``, ``/dev/stdout``, a FIFO) is yielded itself, to be written through: the rename replaced the
    device with a file (as root, ``--out /dev/null`` broke ``/dev/null`` for the whole machine).

    Raises:
        IsADirectoryError: ``target`` is a folder.
        InvalidArgument: ``target`` ends in a path separator, so names a folder (one that does not exist yet).
    """
    given = os.fspath(target)
    target = Path(target)
    if target.is_dir():  # else the rename fails after the whole write, naming the temporary file
        raise IsADirectoryError(errno.EISDIR, "is a folder: give the path of the file to write", str(target))
    if isinstance(given, str) and given.endswith(tuple(filter(None, (os.sep, os.altsep)))):  # Path drops it: a FILE was written
        raise InvalidArgument(f"{given!r} ends in a path separator, so names a folder: give the path of the file to write.")
    if target.exists() and not target.is_file():  # asked before the link is resolved: /dev/stdout may name a pipe
        yield target
        return
    target = Path(os.path.realpath(target))
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(_partial_name(target))
    try:
        yield partial
        with open(partial, "rb") as written:  # on disk before it takes the target's name
            with contextlib.suppress(FileNotFoundError):
                os.fchmod(written.fileno(), stat.S_IMODE(os.stat(target).st_mode))
            os.fsync(written.fileno())
        os.replace(partial, target)
    finally:
        partial.unlink(missing_ok=True)
