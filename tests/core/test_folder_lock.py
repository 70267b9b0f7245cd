"""One process at a time in a folder (gem_core.transport.folder_lock), as an eval's output folder, a training run's
``--out`` and a curriculum's ``state_dir`` use it."""

from __future__ import annotations

import errno
import os

import pytest

from gem_core.errors import InvalidArgument
from gem_core.transport import folder_lock
from gem_core.transport.folder_lock import lock_folder, release_folder

LOCK = ".test.lock"


def take(folder):
    return lock_folder(folder, LOCK, what="folder", why="the test says so", error=InvalidArgument)


def test_a_held_folder_is_refused_and_released_it_holds_no_lock_file(tmp_path):
    held = take(tmp_path)
    assert (tmp_path / LOCK).read_text() == f"{os.getpid()}\n"
    with pytest.raises(InvalidArgument, match=f"folder {tmp_path} is in use by another owner in this process \\(pid {os.getpid()}\\)"):
        take(tmp_path)
    release_folder(tmp_path, LOCK, held)
    assert not (tmp_path / LOCK).exists()
    release_folder(tmp_path, LOCK, take(tmp_path))


def test_a_lock_file_removed_by_its_holder_after_it_was_opened_is_not_the_one_taken(tmp_path, monkeypatch):
    """A run that opened the lock file just before its holder released and removed it would lock the removed
    file, and a third run would then lock a new one beside it: two runs in one folder."""
    first = take(tmp_path)
    stale = os.open(tmp_path / LOCK, os.O_RDWR)  # the second run's open, before the first run ends
    release_folder(tmp_path, LOCK, first)
    opened = []
    real_open = folder_lock._open_lock_file

    def open_stale_first(path, what, error):
        opened.append(path)
        return stale if len(opened) == 1 else real_open(path, what, error)

    monkeypatch.setattr(folder_lock, "_open_lock_file", open_stale_first)
    second = take(tmp_path)
    assert len(opened) == 2  # the removed file was let go, and the one at the path taken
    assert os.fstat(second).st_ino == os.stat(tmp_path / LOCK).st_ino
    monkeypatch.setattr(folder_lock, "_open_lock_file", real_open)
    with pytest.raises(InvalidArgument, match="is in use by"):
        take(tmp_path)
    release_folder(tmp_path, LOCK, second)


def test_a_lock_file_that_is_a_directory_is_refused_naming_it(tmp_path):
    (tmp_path / LOCK).mkdir()
    with pytest.raises(InvalidArgument, match=f"The lock file {tmp_path / LOCK} is not a regular file; refused. Remove it"):
        take(tmp_path)


@pytest.mark.parametrize("number", [errno.EACCES, errno.ENOSPC, errno.EROFS])
def test_a_lock_file_that_cannot_be_made_is_refused_naming_the_folder_and_the_reason(tmp_path, monkeypatch, number):
    def refuse(*args, **kwargs):
        raise OSError(number, os.strerror(number))

    monkeypatch.setattr(folder_lock.os, "open", refuse)
    with pytest.raises(InvalidArgument, match=f"folder {tmp_path}: its lock file {tmp_path / LOCK} cannot be made .*{os.strerror(number)}"):
        take(tmp_path)


def test_a_folder_that_cannot_be_made_is_refused_naming_it_and_the_reason(tmp_path, monkeypatch):
    def refuse(*args, **kwargs):
        raise PermissionError(errno.EACCES, os.strerror(errno.EACCES))

    monkeypatch.setattr(folder_lock.Path, "mkdir", refuse)
    with pytest.raises(InvalidArgument, match=f"folder {tmp_path / 'out'} cannot be made .*{os.strerror(errno.EACCES)}"):
        take(tmp_path / "out")
