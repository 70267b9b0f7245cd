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
- shared memory the snippet holds: ``RssShmem`` (``Pss_Shmem`` when judging), and each shared memory
  object its processes map or hold open, counted once: a ``MAP_SHARED | MAP_ANONYMOUS`` or shared
  ``/dev/zero`` mapping, a System V segment, a ``memfd`` (the names ``/proc/PID/maps`` gives files of
  the kernel's internal shmem mount, which no ``statvfs`` counts). Its pages stay with the object, not
  with a mapping: filled and then unmapped while a process that never touched them (a forked child), or
  one page of the same mapping, keeps the object alive, they were in no process's RSS, and four calls
  under 128 MiB held about 500 MiB each. So an object counts as far as its mappings reach (like
  ``RLIMIT_AS``, a sparse mapping counts whole), or at its allocated blocks where the host can read them
  (``stat`` through ``/proc/PID/map_files``, which needs ``CAP_CHECKPOINT_RESTORE``: a root host),
  whichever is more; its resident pages then leave the precise figure (their ``Pss`` from
  ``/proc/PID/smaps``) so that nothing counts twice. A host that is not root keeps for each object the
  most it was counted at while it lives instead. ``/proc/PID/maps`` costs about ten status reads, so a
  process's maps are read again only when its ``VmSize`` changed, and every :attr:`SandboxMonitor.MAPS_EVERY`
  samples. Written with ``write()`` and never mapped, a memfd's pages are in no process's RSS: 58 memfds
  of 16 MiB (``RLIMIT_FSIZE`` each) held 928 MiB under a 256 MiB cap, per process, before open memfds
  counted by their blocks (inside bubblewrap the only memfd left is the sealed stdin: the seccomp filter
  takes ``memfd_create`` away, as a memfd sent over a socket and closed is held by the socket's queue,
  where no ``/proc`` file shows it);
- the bytes in use on the sandbox's private ``/tmp`` and ``/dev/shm`` (bwrap mode), from ``statvfs``
  through ``/proc/PID/root``: tmpfs pages are memory, and a file there can be held by no process at all
  (unlinked while a unix socket carries it), where neither RSS nor open files find it. Four calls under
  128 MiB each held 160 MiB that way, until counted. (A file that is also mapped counts twice while its
  pages are mapped: the sum errs on the side of the cap.)
- kernel buffers (issue 47): each pipe a snippet's process holds, at the 64 KiB it can hold (pipes
  filled and handed to exec'd holders kept the kernel's per-user 64 MiB in no process's memory), and
  the queues of every socket of the sandbox's network namespace, read through ``sock_diag``
  (:mod:`.socket_memory`);
- files: inodes in use on the sandbox's ``/tmp`` and ``/dev/shm``, from ``statvfs`` through
  ``/proc/PID/root``;
- the working directory (``SandboxConfig.work_dir``, a host directory): bytes and entries under it,
  walked every tenth sample (a ``statvfs`` would measure the host's whole file system), and once more
  when the call has ended (:meth:`.worker.Worker.run`: a command that fills it and ends between two walks
  is reported too); a file counts at its size or its blocks, whichever is more, since a sparse one is
  copied whole by the host.

Past a cap the host kills the sandbox and reports ``limit="memory"`` or ``"disk"``. What sampling cannot
do: stop a burst between two samples (a snippet can touch memory at a few GiB/s, so it may overshoot by
that rate times the interval before it dies), and, on a host that is not root, see the allocated size
of a shared memory object: one filled and cut down to a page between two samples counts as that page
(512 objects of 1 MiB each held 512 MiB under a 128 MiB cap that way, run unprivileged; as root the call
is stopped). System V shared memory, semaphores and message queues, POSIX message queues, IP sockets and
named pipes, which no process holds either, do not exist in the sandbox (:mod:`.syscall_filter`); a pipe
in flight on a Unix socket (sent, then closed) is held by no process and not counted: at most
``RLIMIT_NOFILE`` of them per uid (the kernel's limit on descriptors in flight), 64 KiB each.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from gem_core.tools.sandbox.socket_memory import SocketMemory

__all__ = [
    "process_tree", "anonymous_memory", "held_memfd_bytes", "held_memfds", "shared_mappings", "object_allocated_bytes",
    "SharedMapping", "tmpfs_bytes", "SandboxMonitor", "work_dir_over",
]

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


def _status(pid: int) -> tuple[int, int]:
    """``(RssAnon + RssShmem, VmSize)`` of ``pid`` in bytes, from one read of its status ((0, 0) if it is
    gone)."""
    resident = size = 0
    try:
        with open(f"/proc/{pid}/status", "rb") as file:
            for line in file:
                if line.startswith((b"RssAnon:", b"RssShmem:")):
                    resident += int(line.split()[1]) * 1024
                elif line.startswith(b"VmSize:"):
                    size = int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return 0, 0
    return resident, size


def anonymous_memory(pid: int, proportional: bool = False) -> int:
    """Resident anonymous and shared (shmem, memfd, tmpfs) memory ``pid`` maps, in bytes (0 if it is
    gone); ``proportional`` splits pages shared with other processes among them (slower: the kernel
    walks the page tables)."""
    if proportional:
        value = _fields_bytes(f"/proc/{pid}/smaps_rollup", (b"Pss_Anon:", b"Pss_Shmem:"))
        if value is not None:
            return value
    return _status(pid)[0]


#: A shared memory object: ``(major, minor, inode)`` of its file on the kernel's internal shmem mount.
ObjectKey = tuple[int, int, int]

#: How ``/proc/PID/maps`` names memory of the kernel's internal mounts, which no file system's
#: ``statvfs`` counts: ``MAP_SHARED | MAP_ANONYMOUS`` and shared ``/dev/zero`` maps, System V segments,
#: ``memfd`` files, hugetlb shared anonymous maps. The kernel escapes newlines in names, so a memfd's
#: name cannot forge a line.
_OBJECT_NAMES = (b"/dev/zero (deleted)", b"/SYSV", b"/memfd:", b"/anon_hugepage (deleted)")


@dataclass(frozen=True)
class SharedMapping:
    """One shared mapping of a shared memory object (a line of ``/proc/PID/maps``)."""

    key: ObjectKey
    start: int
    end: int
    offset: int

    @property
    def reach(self) -> int:
        """How far into the object the mapping reaches: the object is at least this large."""
        return self.offset + self.end - self.start


def _object_lines(maps: bytes) -> list[tuple[int, bytes]]:
    """``(position, line)`` of each shared mapping of a shared memory object in a maps or smaps text."""
    found: dict[int, bytes] = {}
    for name in _OBJECT_NAMES:
        at = maps.find(name)
        while at != -1:
            start = maps.rfind(b"\n", 0, at) + 1
            end = maps.find(b"\n", at)
            line = maps[start:] if end == -1 else maps[start:end]
            fields = line.split(None, 5)
            # the name must be the line's path (not part of another name), and the mapping shared
            if len(fields) == 6 and fields[5].startswith(name) and fields[1][3:4] == b"s":
                found[start] = line
            at = maps.find(name, at + 1)
    return sorted(found.items())


def _parse_mapping(line: bytes) -> SharedMapping | None:
    try:
        span, _perms, offset, device, inode = line.split(None, 5)[:5]
        start, end = (int(part, 16) for part in span.split(b"-"))
        major, minor = (int(part, 16) for part in device.split(b":"))
        return SharedMapping((major, minor, int(inode)), start, end, int(offset, 16))
    except ValueError:
        return None


def _read_proc(path: str) -> bytes | None:
    try:
        with open(path, "rb") as file:
            return file.read()
    except OSError:
        return None


def shared_mappings(pid: int) -> list[SharedMapping]:
    """The shared mappings ``pid`` has of shared memory objects (``[]`` if it is gone)."""
    maps = _read_proc(f"/proc/{pid}/maps")
    if not maps:
        return []
    return [mapping for _, line in _object_lines(maps) if (mapping := _parse_mapping(line)) is not None]


def object_allocated_bytes(pid: int, mapping: SharedMapping) -> int | None:
    """The bytes allocated to the object behind one of ``pid``'s mappings, mapped or not, through
    ``/proc/PID/map_files``; None where the host may not follow those links (they need
    ``CAP_CHECKPOINT_RESTORE`` or ``CAP_SYS_ADMIN``: a host that is not root) or the mapping is gone."""
    try:
        return os.stat(f"/proc/{pid}/map_files/{mapping.start:x}-{mapping.end:x}").st_blocks * 512
    except OSError:
        return None


def _objects_proportional_bytes(pid: int) -> int:
    """The proportional resident size (``Pss``) of ``pid``'s mappings of shared memory objects: the part
    of its ``Pss_Shmem`` that :meth:`SandboxMonitor.broken_cap` counts per object instead."""
    smaps = _read_proc(f"/proc/{pid}/smaps") or b""
    total = 0
    for position, line in _object_lines(smaps):
        header_end = position + len(line)
        block_end = smaps.find(b"\nVmFlags:", header_end)  # the last line of each mapping's block
        at = smaps.find(b"\nPss:", header_end, len(smaps) if block_end == -1 else block_end)
        if at == -1:
            continue
        try:
            total += int(smaps[at + 5:smaps.find(b"\n", at + 1)].split()[0]) * 1024
        except (ValueError, IndexError):
            continue
    return total


def held_memfd_bytes(pids: list[int]) -> int:
    """Bytes allocated to the ``memfd`` files that ``pids`` hold open, each file once: memory that no
    RSS shows until it is mapped and touched."""
    return sum(held_memfds(pids).values())


def held_memfds(pids: list[int]) -> dict[ObjectKey, int]:
    """The ``memfd`` files that ``pids`` hold open, each once, with the bytes allocated to it."""
    return _held_files(pids)[0]


#: What one pipe can hold: 16 buffers of a page each (the kernel's default; the sandbox cannot grow a
#: pipe, see :mod:`.syscall_filter`).
PIPE_BYTES = 16 * os.sysconf("SC_PAGE_SIZE")


def _held_files(pids: list[int]) -> tuple[dict[ObjectKey, int], set[bytes]]:
    """The ``memfd`` files that ``pids`` hold open (each once, with its allocated bytes), and the pipes
    (their ``pipe:[inode]`` names): both hold kernel memory that no RSS shows."""
    found: dict[ObjectKey, int] = {}
    pipes: set[bytes] = set()
    for pid in pids:
        try:
            fds = os.listdir(f"/proc/{pid}/fd")
        except OSError:
            continue
        for fd in fds:
            path = f"/proc/{pid}/fd/{fd}"
            try:
                target = os.readlink(path.encode())
                if target.startswith(b"pipe:"):
                    pipes.add(target)
                    continue
                if not target.startswith(b"/memfd:"):
                    continue
                stats = os.stat(path)
            except OSError:
                continue
            found[(os.major(stats.st_dev), os.minor(stats.st_dev), stats.st_ino)] = stats.st_blocks * 512
    return found, pipes


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
        work_dir: the host working directory bound into the sandbox (None: none), checked now and then.
        work_bytes: the byte cap of ``work_dir``.
        work_files: the entry cap of ``work_dir``.
        count_tmpfs: add the bytes in use on the private ``/tmp`` and ``/dev/shm`` to the snippet's
            memory (bwrap mode: the process at ``supervisor_depth`` sees them).
        sockets: the memory of the sandbox's sockets, read in its own network namespace (bwrap mode;
            :mod:`.socket_memory`), added to the snippet's; None: not counted.
        snippet_root: the snippet's own process where it is not below the supervisor (a zygote's call:
            the zygote forks it into the namespace of ``root``, the call's init, which gets only the
            snippet's orphans): it and all below it are the snippet's too, and it stands for the
            sandbox where the supervisor would (its ``/proc/PID/root``, its network namespace).
    """

    #: Samples between two walks of the working directory (a walk costs more than a memory sample).
    WORK_DIR_EVERY = 10
    #: Samples between two reads of every process's ``/proc/PID/maps`` (between them, a process's maps
    #: are read again only when its ``VmSize`` changed: a read costs ten status reads).
    MAPS_EVERY = 10

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
        sockets: SocketMemory | None = None,
        snippet_root: int | None = None,
    ):
        self.root, self.supervisor_depth, self.snippet_root = root, supervisor_depth, snippet_root
        self.count_tmpfs = count_tmpfs
        self.sockets = sockets
        self.memory_bytes, self.max_files = memory_bytes, max_files
        self.work_dir, self.work_bytes, self.work_files = work_dir, work_bytes, work_files
        self.peak_memory = 0
        self._samples = 0
        #: pid -> (its VmSize when its maps were read, its shared mappings of shared memory objects)
        self._mappings: dict[int, tuple[int, list[SharedMapping]]] = {}
        #: what each live shared memory object was last counted at
        self._object_bytes: dict[ObjectKey, int] = {}

    def snippet_pids(self) -> list[int]:
        """The pids of the snippet's processes (everything below the supervisor, and the snippet root's tree)."""
        return self._processes()[0]

    def _processes(self) -> tuple[list[int], list[int]]:
        """The snippet's pids, and the pids that stand for the sandbox (the supervisor, or the snippet root)."""
        tree = process_tree(self.root)
        snippet = [pid for pid, depth in tree if depth > self.supervisor_depth]
        if self.snippet_root is None:
            return snippet, [pid for pid, depth in tree if depth == self.supervisor_depth]
        own = [pid for pid, _ in process_tree(self.snippet_root)]
        seen = set(own)
        return [*own, *(pid for pid in snippet if pid not in seen)], own[:1]

    def broken_cap(self) -> str | None:
        """``"memory"``, ``"disk"`` or None."""
        snippet, inside = self._processes()
        root = f"/proc/{inside[0]}/root" if inside else None
        statuses = {pid: _status(pid) for pid in snippet}
        mappings = self._shared_mappings(statuses)
        memfds, pipes = _held_files(snippet)
        objects = self._shared_objects(mappings, memfds)
        # each pipe at what it can hold (in bwrap mode no pipe grows past the default)
        held = sum(objects.values()) + len(pipes) * PIPE_BYTES
        if self.count_tmpfs and root is not None:
            held += tmpfs_bytes(root)
        if self.sockets is not None:
            held += self.sockets.bytes_held(inside[0] if inside else None)
        used = held + sum(resident for resident, _ in statuses.values())
        if used > self.memory_bytes:
            # Pages shared with other processes split among them; pages of shared memory objects are
            # in ``objects`` already, so their share of Pss_Shmem is taken out.
            used = held + sum(
                max(0, anonymous_memory(pid, proportional=True) - (_objects_proportional_bytes(pid) if mappings.get(pid) else 0))
                for pid in snippet
            )
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

    def _shared_mappings(self, statuses: dict[int, tuple[int, int]]) -> dict[int, list[SharedMapping]]:
        """Each process's shared mappings of shared memory objects, its maps read again where its
        ``VmSize`` changed since the last read, and every :attr:`MAPS_EVERY` samples."""
        refresh = self._samples % self.MAPS_EVERY == 0
        known, self._mappings = self._mappings, {}
        for pid, (_, size) in statuses.items():
            cached = known.get(pid)
            if cached is None or cached[0] != size or refresh:
                cached = (size, shared_mappings(pid))
            self._mappings[pid] = cached
        return {pid: mappings for pid, (_, mappings) in self._mappings.items()}

    def _shared_objects(self, mappings: dict[int, list[SharedMapping]], memfds: dict[ObjectKey, int]) -> dict[ObjectKey, int]:
        """The bytes each shared memory object the snippet maps or holds open counts for.

        Mapped: as far as its mappings reach (like ``RLIMIT_AS``, a sparse mapping counts whole), or its
        allocated bytes where the host can read them (as root), whichever is more, since pages filled and
        then unmapped stay with the object while any mapping of it is left. Where the allocated bytes
        cannot be read, the object keeps the largest figure it was counted at while it lives. Held open
        (a memfd): its allocated bytes.
        """
        reach: dict[ObjectKey, int] = {}
        where: dict[ObjectKey, list[tuple[int, SharedMapping]]] = {}
        for pid, found in mappings.items():
            for mapping in found:
                reach[mapping.key] = max(reach.get(mapping.key, 0), mapping.reach)
                where.setdefault(mapping.key, []).append((pid, mapping))
        counted: dict[ObjectKey, int] = {}
        for key, size in reach.items():
            # a mapping read from cached maps may be gone: a few others of the same object are tried
            allocated = next(
                (got for pid, mapping in where[key][:3] if (got := object_allocated_bytes(pid, mapping)) is not None), None
            )
            counted[key] = max(size, self._object_bytes.get(key, 0) if allocated is None else allocated)
        for key, allocated in memfds.items():
            counted[key] = max(counted.get(key, 0), allocated)
        self._object_bytes = counted
        return counted


def work_dir_over(path: str, max_bytes: int, max_files: int) -> bool:
    """Whether the tree under ``path`` takes more than ``max_bytes`` or holds more than ``max_files`` entries;
    the walk stops as soon as it knows, and never follows a symbolic link.

    Each entry counts at its size or its allocated blocks, whichever is more: a sparse file (``truncate -s``)
    holds no block, but the host reads and writes it whole when it copies the tree (a submit, a snapshot), so
    forty files of 16 MiB costing 8 KB of disk had the host copy 640 MiB past a 64 MiB cap.
    """
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
                used += max(stats.st_size, stats.st_blocks * 512)
                if used > max_bytes or count > max_files:
                    return True
    return False
