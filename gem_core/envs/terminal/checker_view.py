"""What a terminal task's checker sees: a copy of the agent's working directory with no way out of it.

The checker runs in the same kind of sandbox as the agent's commands, and some checkers keep their
expected values in files of their own (``replace_text`` writes ``/tmp/expected.ini`` and compares).
Run on the agent's directory itself, a symbolic link planted there led the checker to them:
``ln -sf /tmp/expected.ini app.ini`` then ``submit`` paid 1.0 (issue 47). A link can leave the tree by
an absolute target, by ``..``, through ``/proc/self/root``, or through another link that leads back up
(``here -> .``, then ``here/../tmp/...``), so no test of a link's spelling is enough.

So the checker gets a fresh directory holding the tree's regular files and directories only, as the host
read them without following any link. A link whose path, resolved over that snapshot alone, ends at a
regular file inside the tree arrives as a copy of that file (``ln -s out/sorted unique.txt`` still counts
as writing ``unique.txt``); every other link (out of the tree, to a directory, dangling, a loop) is left
out. Nothing is resolved on a real file system, so whatever the resolution decides, no content from
outside the tree can reach the copy.
"""

from __future__ import annotations

__all__ = ["Tree", "checker_files", "MAX_LINK_HOPS"]

MAX_LINK_HOPS = 40
"""Links followed while resolving one path before it counts as a loop (the kernel's limit)."""

Tree = dict[str, tuple[int, bytes | str | None]]
"""relative path -> (mode, content): bytes for a regular file, None for a directory, str for a link's target."""


def resolve_link(tree: Tree, link: str) -> str | None:
    """The path, inside ``tree``, of the regular file that the link at ``link`` leads to, resolved as the
    kernel would (``..`` after a link climbs from where the link led) but over ``tree`` alone; None where
    it leaves the tree, dangles, loops, or ends anywhere but at a regular file."""
    position = link.split("/")[:-1]  # where resolution stands: the directory holding the link
    target = tree[link][1]
    if not isinstance(target, str) or target.startswith("/"):
        return None
    remaining, hops = target.split("/"), 1
    while remaining:
        part = remaining.pop(0)
        if part in ("", "."):
            continue
        if part == "..":
            if not position:
                return None  # above the tree's root
            position.pop()
            continue
        key = "/".join([*position, part])
        if key not in tree:
            return None
        content = tree[key][1]
        if isinstance(content, str):  # another link: its target, from the directory it lies in
            hops += 1
            if hops > MAX_LINK_HOPS or content.startswith("/"):
                return None
            remaining = content.split("/") + remaining
        elif content is None:
            position.append(part)
        else:
            return key if not remaining else None  # "file/..." is not a path
    return None  # it ends at a directory (or the root)


def checker_files(tree: Tree, max_bytes: int) -> Tree:
    """The checker's copy of ``tree``: its directories and regular files, and each link that leads to a
    regular file inside the tree as a copy of that file, while the copies keep the whole under
    ``max_bytes`` (a thousand links to one large file would otherwise multiply it); other links are left out.
    """
    files: Tree = {key: entry for key, entry in tree.items() if not isinstance(entry[1], str)}
    total = sum(len(content) for _, content in files.values() if isinstance(content, bytes))
    for key, (_, content) in sorted(tree.items()):
        if not isinstance(content, str):
            continue
        found = resolve_link(tree, key)
        if found is None:
            continue
        mode, data = tree[found]
        if isinstance(data, bytes) and total + len(data) <= max_bytes:
            files[key] = (mode, data)
            total += len(data)
    return files
