"""``atomic_path``: the target is the previous file or the new one, whole, never half of either."""

from __future__ import annotations

import errno
import multiprocessing
import os

import pytest

from gem_core.transport.atomic_file import atomic_path


def test_the_target_appears_when_the_block_ends_and_the_writer_sees_its_suffix(tmp_path):
    target = tmp_path / "sub" / "train.parquet"
    with atomic_path(target) as partial:
        assert partial.suffix == ".parquet" and partial.parent == target.parent and partial != target
        partial.write_text("rows\n")
        assert not target.exists()  # nobody reads it before it is whole
    assert target.read_text() == "rows\n" and list(target.parent.iterdir()) == [target]


@pytest.mark.parametrize("failure", [OSError(errno.ENOSPC, "No space left on device"), KeyboardInterrupt()])
def test_a_failure_midway_keeps_the_previous_file_and_leaves_no_temporary(tmp_path, failure):
    target = tmp_path / "report.json"
    target.write_text("previous\n")
    with pytest.raises(type(failure)):
        with atomic_path(target) as partial:
            partial.write_text('{"half": ')
            raise failure
    assert target.read_text() == "previous\n" and list(tmp_path.iterdir()) == [target]


def test_a_rename_that_fails_leaves_no_temporary(tmp_path, monkeypatch):
    target = tmp_path / "state.json"

    def disk_full(*args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "replace", disk_full)
    with pytest.raises(OSError, match="No space left"), atomic_path(target) as partial:
        partial.write_text("{}")
    assert list(tmp_path.iterdir()) == []


def test_a_block_that_writes_nothing_fails_and_leaves_the_target(tmp_path):
    target = tmp_path / "x.jsonl"
    target.write_text("previous\n")
    with pytest.raises(FileNotFoundError), atomic_path(target):
        pass
    assert target.read_text() == "previous\n"


def _write_many(target: str, text: str) -> None:
    for _ in range(200):  # bounded
        with atomic_path(target) as partial:
            partial.write_text(text * 1000)


def test_two_processes_writing_one_target_never_leave_it_mixed(tmp_path):
    target = tmp_path / "rows.jsonl"
    context = multiprocessing.get_context("spawn")
    writers = [context.Process(target=_write_many, args=(str(target), letter)) for letter in "ab"]
    for writer in writers:
        writer.start()
    for writer in writers:
        writer.join(timeout=120)
        assert writer.exitcode == 0
    assert target.read_text() in ("a" * 1000, "b" * 1000)
    assert list(tmp_path.iterdir()) == [target]


def test_a_folder_as_the_target_is_refused_before_writing_naming_the_folder(tmp_path):
    writes = []
    with pytest.raises(IsADirectoryError) as caught:
        with atomic_path(tmp_path) as partial:
            writes.append(partial)
    assert caught.value.filename == str(tmp_path) and "give the path of the file" in str(caught.value)
    assert writes == [] and list(tmp_path.iterdir()) == []
