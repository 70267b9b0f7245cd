"""One process at a time in a folder (gem_core.transport.folder_lock), as an eval's output folder, a training run's
``--out`` and a curriculum's ``state_dir`` use it."""

from __future__ import annotations

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
