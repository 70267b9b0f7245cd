"""Limits for the whole sandbox, enforced by the host: memory summed over the snippet's process tree,
and the number of files in its private ``/tmp`` and ``/dev/shm``.

Per-process limits (``RLIMIT_AS``) let a snippet multiply its memory by forking, and a tmpfs's size cap
does not count inodes (300k empty files cost 300 MiB of host kernel memory). The kernel's tool for a
group limit is a cgroup, but cgroup v2 is not delegated everywhere (this project's CI machine has no
v2 memory controller), so the host samples instead, every ``SandboxConfig.sample_interval`` seconds:

- memory: the resident anonymous memory of every process the snippet started, found through
  ``/proc/PID/task/TID/children`` from the worker down (the worker's supervisor, which never runs
  snippet code, is not counted). Each sample sums ``RssAnon`` (cheap, but a page shared copy-on-write
  after a fork counts in every process sharing it); only when that sum is over the cap is the precise
  figure read, ``Pss_Anon`` from ``smaps_rollup`` (shared pages split among their sharers), and the
  cap is judged on it;
- shared memory the snippet holds: ``RssShmem`` (``Pss_Shmem`` when judging), and the blocks of every
  ``memfd`` file its processes hold open, counted once each. Written with ``write()`` and never mapped,
  a memfd's pages are in no process's RSS: 58 memfds of 16 MiB (``RLIMIT_FSIZE`` each) held 928 MiB
  under a 256 MiB cap, per process, before they were counted (inside bubblewrap the only memfd left is
  the sealed stdin: the seccomp filter takes ``memfd_create`` away, as a memfd sent over a socket and
  closed is held by the socket's queue, where no ``/proc`` file shows it);
- the bytes in use on the sandbox's private ``/tmp`` and ``/dev/shm`` (bwrap mode), from ``statvfs``
  through ``/proc/PID/root``: tmpfs pages are memory, and a file there can be held by no process at all
  (unlinked while a unix socket carries it), where neither RSS nor open files find it. Four calls under
  128 MiB each held 160 MiB that way, until counted. (A file that is also mapped counts twice while its
  pages are mapped: the sum errs on the side of the cap.)
- files: inodes in use on the sandbox's ``/tmp`` and ``/dev/shm``, from ``statvfs`` through
  ``/proc/PID/root``;
- the working directory (``SandboxConfig.work_dir``, a host directory): bytes and entries under it,
  walked every tenth sample (a ``statvfs`` would measure the host's whole file system).

Past a cap the host kills the sandbox and reports ``limit="memory"`` or ``"disk"``. What sampling cannot
do: stop a burst between two samples (a snippet can touch memory at a few GiB/s, so it may overshoot by
that rate times the interval before it dies), or see pages of a shared anonymous mapping (``mmap`` with
``MAP_SHARED | MAP_ANONYMOUS``, or of ``/dev/zero``) that one process touched and unmapped while another,
which never touched them, still maps them. System V shared memory, semaphores and message queues, which
no process holds either, do not exist in the sandbox (:mod:`.syscall_filter`).
"""

from __future__ import annotations

import os

__all__ = ["process_tree", "anonymous_memory", "held_memfd_bytes", "tmpfs_bytes", "SandboxMonitor", "work_dir_over"]

#: The sandbox's private tmpfs mounts (bwrap mode): their pages are memory the snippet holds.
PRIVATE_TMPFS = ("/tmp", "/dev/shm")


def _children(pid: int) -> list[int]:
    found: list[int] = []
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return found
    for task in tasks:
        try:
            with open(f"/proc/{pid}/task/{task}/children", "rb") as file:
                found.extend(int(child) for child in file.read().split())
        except (OSError, ValueError):
            continue
    return found


def process_tree(root: int) -> list[tuple[int, int]]:
    """``(pid, depth)`` of ``root`` (depth 0) and every process below it."""
    tree, frontier = [(root, 0)], [(root, 0)]
    while frontier:
        pid, depth = frontier.pop()
        for child in _children(pid):
            tree.append((child, depth + 1))
            frontier.append((child, depth + 1))
    return tree


def _fields_bytes(path: str, names: tuple[bytes, ...]) -> int | None:
    """The sum of the ``kB`` fields ``names`` of a /proc file, in bytes; None if it cannot be read or
    holds none of them."""
    total, found = 0, False
    try:
        with open(path, "rb") as file:
            for line in file:
                if line.startswith(names):
                    total += int(line.split()[1]) * 1024
                    found = True
    except (OSError, ValueError, IndexError):
        return None
    return total if found else None


def anonymous_memory(pid: int, proportional: bool = False) -> int:
    """Resident anonymous and shared (shmem, memfd, tmpfs) memory ``pid`` maps, in bytes (0 if it is
    gone); ``proportional`` splits pages shared with other processes among them (slower: the kernel
    walks the page tables)."""
    if proportional:
        value = _fields_bytes(f"/proc/{pid}/smaps_rollup", (b"Pss_Anon:", b"Pss_Shmem:"))
        if value is not None:
            return value
    return _fields_bytes(f"/proc/{pid}/status", (b"RssAnon:", b"RssShmem:")) or 0


def held_memfd_bytes(pids: list[int]) -> int:
    """Bytes allocated to the ``memfd`` files that ``pids`` hold open, each file once: memory that no
    RSS shows until it is mapped and touched."""
    seen: set[tuple[int, int]] = set()
    total = 0
    for pid in pids:
        try:
            fds = os.listdir(f"/proc/{pid}/fd")
        except OSError:
            continue
        for fd in fds:
            path = f"/proc/{pid}/fd/{fd}"
            try:
                if not os.readlink(path).startswith("/memfd:"):
                    continue
                stats = os.stat(path)
            except OSError:
                continue
            if (stats.st_dev, stats.st_ino) not in seen:
                seen.add((stats.st_dev, stats.st_ino))
                total += stats.st_blocks * 512
    return total


def tmpfs_bytes(root: str) -> int:
    """Bytes in use on the private tmpfs mounts below ``root`` (``/proc/PID/root`` of a process inside).

    Allocated blocks, not file sizes: a sparse file costs what was written, and a file unlinked while
    still open, or in flight on a socket, still counts until it is freed.
    """
    total = 0
    for mount in PRIVATE_TMPFS:
        try:
            stats = os.statvfs(root + mount)
        except OSError:
            continue
        total += max(0, stats.f_blocks - stats.f_bfree) * stats.f_frsize
    return total


def _inodes_in_use(path: str) -> int:
    try:
        stats = os.statvfs(path)
    except OSError:
        return 0
    return max(0, stats.f_files - stats.f_ffree)


class SandboxMonitor:
    """Samples one worker's tree and says which whole-sandbox cap it broke, if any.

    Args:
        root: the host pid of the worker process (bwrap, or the supervisor in process mode).
        supervisor_depth: how far below ``root`` the supervisor sits (2 under bwrap: bwrap, the
            namespace's init, the supervisor; 0 in process mode). Processes below it are the snippet's.
        memory_bytes: the memory cap for all of the snippet's processes together.
        max_files: the inode cap for the private ``/tmp`` and ``/dev/shm`` (None: not checked).
        count_tmpfs: add the bytes in use on the private ``/tmp`` and ``/dev/shm`` to the snippet's
            memory (bwrap mode: the process at ``supervisor_depth`` sees them).
    """

    #: Samples between two walks of the working directory (a walk costs more than a memory sample).
    WORK_DIR_EVERY = 10

    def __init__(
        self,
        root: int,
        supervisor_depth: int,
        memory_bytes: int,
        max_files: int | None,
        work_dir: str | None = None,
        work_bytes: int = 0,
        work_files: int = 0,
        count_tmpfs: bool = False,
    ):
        self.root, self.supervisor_depth = root, supervisor_depth
        self.count_tmpfs = count_tmpfs
        self.memory_bytes, self.max_files = memory_bytes, max_files
        self.work_dir, self.work_bytes, self.work_files = work_dir, work_bytes, work_files
        self.peak_memory = 0
        self._samples = 0

    def snippet_pids(self) -> list[int]:
        return [pid for pid, depth in process_tree(self.root) if depth > self.supervisor_depth]

    def broken_cap(self) -> str | None:
        """``"memory"``, ``"disk"`` or None."""
        tree = process_tree(self.root)
        snippet = [pid for pid, depth in tree if depth > self.supervisor_depth]
        inside = [pid for pid, depth in tree if depth == self.supervisor_depth]
        root = f"/proc/{inside[0]}/root" if inside else None
        held = held_memfd_bytes(snippet)
        if self.count_tmpfs and root is not None:
            held += tmpfs_bytes(root)
        used = held + sum(anonymous_memory(pid) for pid in snippet)
        if used > self.memory_bytes:
            used = held + sum(anonymous_memory(pid, proportional=True) for pid in snippet)
        self.peak_memory = max(self.peak_memory, used)
        if used > self.memory_bytes:
            return "memory"
        if self.max_files is not None and root is not None:
            if sum(_inodes_in_use(root + mount) for mount in PRIVATE_TMPFS) > self.max_files:
                return "disk"
        self._samples += 1
        if self.work_dir is not None and self._samples % self.WORK_DIR_EVERY == 1:
            if work_dir_over(self.work_dir, self.work_bytes, self.work_files):
                return "disk"
        return None


def work_dir_over(path: str, max_bytes: int, max_files: int) -> bool:
    """Whether the tree under ``path`` takes more than ``max_bytes`` (allocated blocks) or holds more than
    ``max_files`` entries; the walk stops as soon as it knows, and never follows a symbolic link."""
    used, count, pending = 0, 0, [path]
    while pending:
        try:
            entries = os.scandir(pending.pop())
        except OSError:
            continue
        with entries:
            for entry in entries:
                count += 1
                try:
                    stats = entry.stat(follow_symlinks=False)
                    if entry.is_dir(follow_symlinks=False):
                        pending.append(entry.path)
                except OSError:
                    continue
                used += stats.st_blocks * 512
                if used > max_bytes or count > max_files:
                    return True
    return False
