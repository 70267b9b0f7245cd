"""The verdict cache's integrity check reads a file once per process, not once per Judge.

``PRAGMA quick_check`` reads every page of the SQLite file: with a cache of millions of verdicts that is
seconds, and it ran each time a Judge (or a cache) was made on the file. A file that changed since its check
(another inode, size or modification time) is checked again, and a corrupt one is refused every time.
"""

from __future__ import annotations

import os
import sqlite3

import pytest

from gem_core.judge import Judge
from gem_core.judge.cache import VerdictCache

DEAD = "http://127.0.0.1:1/v1"


@pytest.fixture
def quick_checks(monkeypatch):
    """The ``PRAGMA quick_check`` statements run on every SQLite connection opened from now on."""
    seen: list[str] = []
    connect = sqlite3.connect

    def traced(*args, **kwargs):
        db = connect(*args, **kwargs)
        db.set_trace_callback(lambda sql: seen.append(sql) if "quick_check" in sql.lower() else None)
        return db

    monkeypatch.setattr(sqlite3, "connect", traced)
    return seen


def _cache_file(path) -> None:
    cache = VerdictCache(path)
    cache.put("k", "m", '{"score": 1}')
    cache.close()


def _spoil(path) -> None:
    """Damage the last half of the pages in place (same inode, same size), dated a second later, as a file
    damaged later in the run would be: the first lookup still works, only the full check sees the damage."""
    with sqlite3.connect(path) as db:
        db.executemany("INSERT INTO verdicts VALUES (?, ?, ?)", [(str(i), "m", "x" * 500) for i in range(200)])
    db.close()
    before = os.stat(path)
    size = before.st_size
    with open(path, "r+b") as out:
        out.seek(size // 8192 * 4096)
        out.write(b"\xaa" * (size - size // 8192 * 4096))
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns + 1_000_000_000))


def test_two_judges_on_one_cache_file_check_it_once(tmp_path, quick_checks):
    path = tmp_path / "verdicts.sqlite"
    _cache_file(path)
    first, second = Judge(DEAD, "j", cache=str(path)), Judge(DEAD, "j", cache=str(path))
    VerdictCache(path).check()
    assert len(quick_checks) == 1
    assert second.cache.get("k") == '{"score": 1}'  # the unchecked opening still reads the file
    first.close()
    second.close()


def test_a_cache_file_damaged_after_its_check_is_checked_again_and_refused(tmp_path, quick_checks):
    path = tmp_path / "verdicts.sqlite"
    _cache_file(path)
    Judge(DEAD, "j", cache=str(path)).close()
    _spoil(path)
    for attempt in (1, 2):  # a refused file is never remembered as checked
        with pytest.raises(OSError) as caught:
            Judge(DEAD, "j", cache=str(path))
        assert f"--judge-cache {path}: cannot use it as the judge's verdict cache" in str(caught.value)
        assert "malformed" in str(caught.value)
        assert len(quick_checks) == 1 + attempt


def test_another_file_at_the_same_path_is_checked_again(tmp_path, quick_checks):
    path = tmp_path / "verdicts.sqlite"
    _cache_file(path)
    Judge(DEAD, "j", cache=str(path)).close()
    _cache_file(tmp_path / "other.sqlite")
    os.replace(tmp_path / "other.sqlite", path)
    Judge(DEAD, "j", cache=str(path)).close()
    assert len(quick_checks) == 2


@pytest.mark.parametrize("max_entries, error", [(-1, ValueError), ("5", TypeError), (True, TypeError), (2.5, TypeError)])
def test_a_bad_max_entries_is_refused_naming_it(max_entries, error):
    from gem_core.errors import GemError

    with pytest.raises(error, match=r"^VerdictCache max_entries=") as caught:
        VerdictCache(max_entries=max_entries)
    assert isinstance(caught.value, GemError)


def test_max_entries_0_keeps_no_verdict():
    cache = VerdictCache(max_entries=0)
    cache.put("k", "m", "reply")
    assert cache.get("k") is None and len(cache) == 0
