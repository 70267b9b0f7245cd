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


@pytest.mark.parametrize("mode", [0o600, 0o640, 0o755], ids=oct)
def test_a_replaced_file_keeps_its_permissions(tmp_path, mode):
    """A file a user made private (``chmod 600``: trajectories and reports hold prompts and answers) stays private
    when it is written again: the new file took the umask's mode (0644) with its name."""
    target = tmp_path / "trajectories.jsonl"
    target.write_text("previous\n")
    target.chmod(mode)
    with atomic_path(target) as partial:
        partial.write_text("new\n")
    assert target.read_text() == "new\n" and (target.stat().st_mode & 0o7777) == mode


def test_a_link_as_the_target_replaces_the_file_it_names_and_stays_a_link(tmp_path):
    """A target that is a symbolic link (a dataset kept on a bigger disk, linked into the run's folder) is written
    where it points, whole: the rename had replaced the link itself with a regular file, in the link's folder."""
    elsewhere = tmp_path / "big_disk" / "train.jsonl"
    elsewhere.parent.mkdir()
    elsewhere.write_text("previous\n")
    link = tmp_path / "run" / "train.jsonl"
    link.parent.mkdir()
    link.symlink_to(elsewhere)
    with atomic_path(link) as partial:
        assert partial.parent == elsewhere.parent  # the rename stays on the file system of the file it replaces
        partial.write_text("new\n")
    assert link.is_symlink() and elsewhere.read_text() == "new\n"
    assert sorted(p.name for p in tmp_path.rglob("*")) == ["big_disk", "run", "train.jsonl", "train.jsonl"]


def test_a_link_to_nothing_yet_makes_the_file_it_names(tmp_path):
    target = tmp_path / "out" / "report.json"
    link = tmp_path / "report.json"
    link.symlink_to(target)
    with atomic_path(link) as partial:
        partial.write_text("{}")
    assert link.is_symlink() and target.read_text() == "{}"


def test_a_device_or_fifo_as_the_target_is_written_through_not_replaced(tmp_path):
    """The rename replaced a device with a regular file: as root, ``--out /dev/null`` broke /dev/null for the whole
    machine. A private device node and a FIFO stand in for it here."""
    import stat
    import threading

    if os.geteuid() != 0:
        pytest.skip("making a device node needs root")
    null = tmp_path / "null"
    os.mknod(null, 0o666 | stat.S_IFCHR, os.makedev(1, 3))
    with atomic_path(null) as partial:
        partial.write_text("rows\n")
    assert stat.S_ISCHR(null.stat().st_mode)
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    read = []
    reader = threading.Thread(target=lambda: read.append(fifo.read_text()), daemon=True)  # a replaced FIFO has no writer
    reader.start()
    with atomic_path(fifo) as partial:
        partial.write_text("rows\n")
    reader.join(timeout=30)
    assert read == ["rows\n"] and stat.S_ISFIFO(fifo.stat().st_mode)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["fifo", "null"]


def test_dev_stdout_piped_to_another_program_is_written_through(tmp_path):
    """``--out /dev/stdout | head``: /dev/stdout is a link to a pipe, which has no folder to write a temporary in;
    resolved first, the link named /proc/PID/fd/pipe:[N] and the write failed."""
    import subprocess
    import sys

    code = ("from gem_core.transport.atomic_file import atomic_path\n"
            "with atomic_path('/dev/stdout') as partial:\n"
            "    partial.write_text('rows\\n')\n")
    done = subprocess.run([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=120)
    assert done.returncode == 0 and done.stdout == "rows\n", done.stderr


@pytest.mark.parametrize("name", ["r" * 249 + ".jsonl", "\u00e9" * 122 + ".jsonl", "x" * 255, "a." + "b" * 253])
def test_a_target_name_at_the_length_limit_gets_a_temporary_that_fits(tmp_path, name):
    """The temporary's name adds the pid, a random part and ``.partial``: for a long, valid target name
    it went over the file system's 255 bytes and the write failed with "File name too long"."""
    target = tmp_path / name
    target.write_text("old\n")
    with atomic_path(target) as partial:
        assert partial.parent == target.parent and ".partial" in partial.name and len(os.fsencode(partial.name)) <= 255
        partial.write_text("new\n")
    assert target.read_text() == "new\n" and list(tmp_path.iterdir()) == [target]
