"""The terminal checker's copy of the agent's tree (issue 47.5), without a sandbox: which links arrive as
files and which are left out."""

from __future__ import annotations

import pytest

from gem_core.envs.terminal.checker_view import checker_files, resolve_link

TREE = {
    "a.txt": (0o644, b"A"),
    "d": (0o755, None),
    "d/b.txt": (0o600, b"B"),
    "here": (0o777, "."),
    "up": (0o777, "d/.."),
    "to_b": (0o777, "d/b.txt"),
    "d/to_a": (0o777, "../a.txt"),
    "chain": (0o777, "d/to_a"),
}


@pytest.mark.parametrize("link, target, expected", [
    ("x", "/tmp/expected.ini", None),  # absolute
    ("x", "../tmp/expected.ini", None),  # above the root
    ("x", "here/../tmp/expected.ini", None),  # inside by its spelling; `here` is the root, so `..` leaves
    ("x", "d/../../a.txt", None),
    ("x", "up/a.txt", "a.txt"),
    ("x", "chain", "a.txt"),
    ("d/x", "../to_b", "d/b.txt"),
    ("x", "a.txt/", None),  # a file used as a directory
    ("x", "d", None),  # a directory: not copied
    ("x", "missing", None),
    ("x", "x", None),  # a loop
])
def test_a_link_resolves_over_the_tree_alone(link, target, expected):
    tree = dict(TREE, **{link: (0o777, target)})
    assert resolve_link(tree, link) == expected


def test_the_copy_holds_no_link_and_stays_within_its_size():
    tree = dict(TREE, **{f"many{i}": (0o777, "a.txt") for i in range(10)})
    files = checker_files(tree, max_bytes=1 + 1 + 4)  # a.txt, d/b.txt and four copies, in path order
    assert not any(isinstance(content, str) for _, content in files.values())
    assert files["chain"] == files["d/to_a"] == (0o644, b"A")  # a copy keeps its file's mode
    assert "to_b" not in files  # past the size
    assert sum(isinstance(content, bytes) for _, content in files.values()) == 6
    assert "here" not in files and "up" not in files
