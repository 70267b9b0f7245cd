"""``bench/session_cachegrind.py``: each counted run reports its full garbage collections, and the one that the
start-up's objects set off comes before the counted turns (issue 46: whether it fell inside a way's window moved
that way's LL misses by ~110 a turn, so a change was judged by where a collection fell, not by its code)."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench" / "session_cachegrind.py"


def _bench():
    spec = importlib.util.spec_from_file_location("session_cachegrind_under_test", BENCH)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_a_played_run_collects_fully_before_its_turns_and_prints_its_collections():
    done = subprocess.run([sys.executable, str(BENCH), "--play", "bare", "--turns", "20", "--episodes", "2"],
                          capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    found = _bench().GC_LINE.search(done.stdout)
    assert found is not None, done.stdout
    assert int(found.group(3)) >= 1  # 20 bare turns set off no full collection: this one is the bench's own


def test_the_counts_of_a_run_hold_its_full_collections_and_a_run_without_them_is_refused(monkeypatch):
    bench = _bench()
    summary = "==1== I   refs:      1,000\n==1== D1  misses:   20\n==1== LL misses:     3\n"
    answers = iter([SimpleNamespace(returncode=0, stderr=summary, stdout="gc collections: 40 4 2\n"),
                    SimpleNamespace(returncode=0, stderr=summary, stdout="")])
    monkeypatch.setattr(bench.subprocess, "run", lambda *args, **kwargs: next(answers))
    assert bench.counts("bare", 10, 2, "49152,12,64", "2097152,16,64") == {"I": 1000, "D1 misses": 20, "LL misses": 3, "full GCs": 2}
    with pytest.raises(SystemExit, match="printed no garbage collector counts"):
        bench.counts("bare", 10, 2, "49152,12,64", "2097152,16,64")
