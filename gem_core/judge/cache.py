"""Verdicts kept by key, so a replay or a re-score of the same answer costs no judge call.

The key (see :func:`verdict_key`) is a hash of everything the verdict depends on: the judge model, the
rubric, the prompt version, the task, the reference and the answer. What is stored is the judge's raw
reply, and a hit is parsed again against the rubric like a fresh reply, so an entry can never pay more
than a reply of the judge could. Only replies that parsed are stored: an error is retried next time.

:class:`VerdictCache` with a path is a SQLite file (WAL mode, so several processes of one run share it);
without one it is an in-memory map of at most ``max_entries``. A cache file is trusted like the judge
itself: use one you wrote.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import sqlite3
import threading
from collections import OrderedDict
from pathlib import Path

from gem_core.env import warn_once
from gem_core.errors import GemError, InvalidArgument, InvalidArgumentType
from gem_core.judge.verdict import MAX_VERDICT_CHARS

__all__ = ["CacheUnusable", "VerdictCache", "verdict_key"]

logger = logging.getLogger("gem.judge")

#: The cache files this process has found sound, by (device, inode, size, modification and change times):
#: ``PRAGMA quick_check`` reads every page, seconds for a large cache, and ran for each Judge made on the file.
#: A file replaced or written since (another inode, size or time; a reset mtime still moves the ctime) is
#: checked again; a refused one is never kept here. A forked worker inherits what its parent checked.
_CHECKED: set[tuple[int, ...]] = set()
_CHECKED_LOCK = threading.Lock()


def verdict_key(model: str, rubric_digest: str, prompt_version: str, task: str, reference: str | None, answer: str) -> str:
    """The cache key of one judgement (a SHA-256 hex digest of its inputs)."""
    payload = json.dumps([model, rubric_digest, prompt_version, task, reference, answer], ensure_ascii=False)
    return hashlib.sha256(payload.encode("utf-8", "surrogatepass")).hexdigest()


def _stored(text: str) -> str | bytes:
    """``text`` as the file keeps it: TEXT when it is valid UTF-8 (as every cache so far holds it), else its
    UTF-8 bytes with lone surrogates kept (a BLOB). A judge's reply can hold one (a JSON escape) and still parse:
    SQLite refuses it as TEXT, and the file cache must pay what the in-memory one pays."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-8", "surrogatepass")
    return text


def _loaded(value: object) -> str | None:
    """A reply as :func:`_stored` kept it, or None for a value no version of this cache writes."""
    if isinstance(value, bytes):
        try:
            return value.decode("utf-8", "surrogatepass")
        except UnicodeDecodeError:
            return None
    return value if isinstance(value, str) else None


class CacheUnusable(GemError, OSError):
    """The ``--judge-cache`` path cannot hold the verdict cache (a folder, not SQLite, another table named
    ``verdicts``, corrupt, its folder missing, not writable); the message names the path and the fix."""


class VerdictCache:
    """Raw judge replies by :func:`verdict_key`, on disk (``path``) or in memory.

    Args:
        path: a SQLite file, created if absent; None keeps verdicts in this process only.
        max_entries: the in-memory cache's bound (oldest dropped first; 0 keeps none); ignored with a path.

    Raises:
        InvalidArgument: if ``max_entries`` is negative.
        InvalidArgumentType: if ``max_entries`` is not a whole number.
    """

    def __init__(self, path: str | os.PathLike | None = None, *, max_entries: int = 100_000):
        # checked here: a bad bound fails only when a verdict is stored, and a judge turns that into reward 0
        if isinstance(max_entries, bool) or not isinstance(max_entries, int):
            raise InvalidArgumentType(f"VerdictCache max_entries={max_entries!r:.40}: must be a whole number >= 0.")
        if max_entries < 0:
            raise InvalidArgument(f"VerdictCache max_entries={max_entries}: must be a whole number >= 0 (0 keeps no verdict).")
        self.path = None if path is None else str(Path(path).expanduser())
        self.max_entries = max_entries
        self._lock = threading.Lock()
        self._memory: OrderedDict[str, str] = OrderedDict()
        self._db: sqlite3.Connection | None = None
        self.hits = self.misses = 0

    def _connection(self) -> sqlite3.Connection:
        assert self.path is not None, "an in-memory cache (path None) never opens a database: callers check first"
        if self._db is None:
            try:
                db = sqlite3.connect(self.path, timeout=30.0, check_same_thread=False, isolation_level=None)
                db.execute("PRAGMA journal_mode=WAL")
                db.execute("CREATE TABLE IF NOT EXISTS verdicts (key TEXT PRIMARY KEY, model TEXT NOT NULL, reply TEXT NOT NULL)")
            except sqlite3.Error as exc:
                raise CacheUnusable(self._unusable(exc)) from None
            self._db = db
        return self._db

    def _unusable(self, exc: BaseException) -> str:
        return (f"--judge-cache {self.path}: cannot use it as the judge's verdict cache ({exc}); give a writable SQLite "
                "file path in a folder that exists (cache=... in code), or none")

    def check(self) -> None:
        """Refuse a cache file that cannot be used, before any judging starts. Opens and closes a connection, so
        nothing is held across a fork. The full read of its pages is done once per file (as it is now) and process.

        Raises:
            CacheUnusable: (an ``OSError``, naming the path and the fix) the path is a folder, not SQLite, a
                database whose ``verdicts`` table is not this cache's, a corrupt one, or in a folder that does not exist.
        """
        if self.path is None:
            return
        if os.path.isdir(self.path):
            raise CacheUnusable(self._unusable(IsADirectoryError("it is a folder")))
        if not os.path.isdir(os.path.dirname(os.path.abspath(self.path))):
            raise CacheUnusable(self._unusable(FileNotFoundError("its folder does not exist")))
        with self._lock:
            if self._db is not None:
                return
            try:
                self._readable(self._connection())
            finally:
                if self._db is not None:
                    self._db.close()
                    self._db = None

    def _readable(self, db: sqlite3.Connection) -> None:
        """A file that opens as SQLite may still fail every lookup (another program's ``verdicts`` table, damaged
        pages): each judgement would then be a reward of 0 and the judge never asked, so it is refused here."""
        identity = self._identity()  # taken before the check: a change made during it is checked next time
        try:
            db.execute("SELECT key, model, reply FROM verdicts LIMIT 1").fetchall()
            with _CHECKED_LOCK:
                if identity is not None and identity in _CHECKED:
                    return
            problems = [row[0] for row in db.execute("PRAGMA quick_check").fetchall()]
        except sqlite3.Error as exc:
            raise CacheUnusable(self._unusable(exc)) from None
        if problems != ["ok"]:
            raise CacheUnusable(self._unusable(sqlite3.DatabaseError(f"database disk image is malformed: {problems[0]}")))
        if identity is not None:
            with _CHECKED_LOCK:
                _CHECKED.add(identity)

    def _identity(self) -> tuple[int, ...] | None:
        """Which file, in which state, the path names now (None when it cannot be told: then it is checked)."""
        if self.path is None:
            return None
        try:
            info = os.stat(self.path)
        except (OSError, ValueError):
            return None
        return info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns, info.st_ctime_ns

    def _failed(self, exc: BaseException) -> None:
        # A cache is a saving, never a source of rewards: a file that breaks mid-run costs judge calls instead.
        warn_once(logger, ("judge-cache", self.path), "--judge-cache %s: %s; every verdict it cannot read or store is asked of the "
                  "judge (further errors of this cache are not logged)", self.path, exc)

    def get(self, key: str) -> str | None:
        """The raw reply stored under ``key``, or None (also when the file fails mid-run: the judge is asked instead)."""
        with self._lock:
            if self.path is None:
                reply = self._memory.get(key)
                if reply is not None:
                    self._memory.move_to_end(key)
            else:
                try:
                    row = self._connection().execute("SELECT reply FROM verdicts WHERE key = ?", (key,)).fetchone()
                except (sqlite3.Error, CacheUnusable) as exc:
                    self._failed(exc)
                    row = None
                reply = _loaded(row[0]) if row else None
                if reply is not None and len(reply) > MAX_VERDICT_CHARS:
                    reply = None
            if reply is None:
                self.misses += 1
            else:
                self.hits += 1
            return reply

    def put(self, key: str, model: str, reply: str) -> None:
        """Store ``reply`` (a reply that parsed as a verdict) under ``key``; a file that fails mid-run skips it (logged once)."""
        if len(reply) > MAX_VERDICT_CHARS:
            return
        with self._lock:
            if self.path is None:
                self._memory[key] = reply
                self._memory.move_to_end(key)
                while len(self._memory) > self.max_entries:
                    self._memory.popitem(last=False)
            else:
                try:
                    self._connection().execute(
                        "INSERT OR REPLACE INTO verdicts (key, model, reply) VALUES (?, ?, ?)", (key, _stored(model), _stored(reply))
                    )
                except (sqlite3.Error, CacheUnusable) as exc:
                    self._failed(exc)

    def __len__(self) -> int:
        with self._lock:
            if self.path is None:
                return len(self._memory)
            return int(self._connection().execute("SELECT COUNT(*) FROM verdicts").fetchone()[0])

    def close(self) -> None:
        """Close the SQLite file; safe to call twice."""
        with self._lock:
            if self._db is not None:
                self._db.close()
                self._db = None

    def __reduce__(self):  # a copy in another process opens the same file (or starts its own memory)
        return (VerdictCache, (self.path,), {"max_entries": self.max_entries})

    def __setstate__(self, state: dict) -> None:
        self.max_entries = state["max_entries"]
