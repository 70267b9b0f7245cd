"""A shell env's working directory (:class:`~gem_core.tools.sandbox.shell.WorkDir`) of any depth is handed
to its owner and deleted without recursion (issue 27.7): ``os.walk`` and ``shutil.rmtree`` recurse once per
level, so a tree 1,100 levels deep (one ``mkdir -p`` away for an agent) broke both.

``test_sandbox_unprivileged.py`` runs this file again as an unprivileged user, where directories a command
took its own permissions away from (``chmod 000``) must still be deleted.
"""

from __future__ import annotations

import gc
import os
from pathlib import Path

from gem_core.tools.sandbox.shell import WorkDir

LEVELS = 1100


def build_deep_tree(root: str, levels: int, name: str = "d", link_to: str = "/etc") -> str:
    """``root/name/name/...`` ``levels`` deep with a file and a symbolic link to ``link_to`` at the bottom,
    made one level at a time (Python's ``os.makedirs`` recurses too); each level is reached through its
    parent's descriptor, so the tree may be deeper than ``PATH_MAX`` allows a path to be. Returns the
    bottom directory's path relative to ``root``."""
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
    try:
        for _ in range(levels):
            os.mkdir(name, dir_fd=fd)
            child = os.open(name, os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
            os.close(fd)
            fd = child
        os.close(os.open("bottom.txt", os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=fd))
        os.symlink(link_to, "outside", dir_fd=fd)  # removed, never followed
    finally:
        os.close(fd)
    return "/".join([name] * levels)


def owner_of_each_level(root: str, levels: int) -> set[int]:
    """The owners of the directories of a ``build_deep_tree`` tree and of its bottom file."""
    owners, path = set(), Path(root)
    for _ in range(levels):
        path = path / "d"
        owners.add(path.lstat().st_uid)
    owners.add((path / "bottom.txt").lstat().st_uid)
    return owners


def test_a_tree_1100_levels_deep_is_given_to_the_owner_and_deleted_by_close(tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "kept.txt").write_text("not the work directory's")
    work = WorkDir()
    parent = Path(work.path).parent
    build_deep_tree(work.path, LEVELS, link_to=str(outside))
    work.chown_tree()
    assert owner_of_each_level(work.path, LEVELS) == {os.stat(work.path).st_uid}
    if os.geteuid() == 0:  # the owner is an unprivileged uid of the directory's own; links keep theirs
        assert os.stat(work.path).st_uid != 0 and outside.stat().st_uid == 0
    work.close()
    assert work.closed and not parent.exists()
    assert (outside / "kept.txt").read_text() == "not the work directory's"


def test_a_work_dir_garbage_collected_without_close_deletes_its_deep_tree():
    work = WorkDir()
    parent = Path(work.path).parent
    build_deep_tree(work.path, LEVELS)
    del work
    gc.collect()
    assert not parent.exists()


def test_a_tree_deeper_than_path_max_is_deleted():
    work = WorkDir()
    parent = Path(work.path).parent
    build_deep_tree(work.path, 40, "n" * 200)  # paths of 8 KB
    work.close()
    assert not parent.exists()


def test_directories_without_permissions_are_deleted_too():
    """A command may ``chmod 000`` its own directories (run unprivileged, the host is that same user)."""
    work = WorkDir()
    parent = Path(work.path).parent
    bottom = build_deep_tree(work.path, 50)
    for depth in range(50, 0, -7):  # every seventh level, deepest first, so the way down stays open
        os.chmod(os.path.join(work.path, *bottom.split("/")[:depth]), 0)
    work.close()
    assert not parent.exists()
