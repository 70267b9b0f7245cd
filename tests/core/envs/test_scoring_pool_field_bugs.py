"""Scoring workers that die, overrun their ``prepare``, or are abandoned by an interrupted call, and time limits
that were not checked: each used to raise a raw builtin out of a step or leave a worker process outside the pool
(alive after ``close()``, its scratch folder left in /tmp)."""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time
from pathlib import Path

import pytest

import gem_core
from gem_core.envs.math.grading import GraderPool, default_grader, grade
from gem_core.envs.scoring_pool import ScoringPool, _Worker
from gem_core.errors import GemError


def _gone(worker: _Worker, seconds: float = 10.0) -> bool:
    """Whether ``worker``'s process has exited (it is our child: poll reaps it), waiting at most ``seconds``."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if worker.proc.poll() is not None:
            return True
        time.sleep(0.05)
    return False


def _stop(worker: _Worker) -> None:
    """Kill a worker a test left behind, so no test leaks a process even when it fails."""
    if worker.proc.poll() is None:
        worker.proc.kill()
        worker.proc.wait(timeout=10)


def _sigkill(worker: _Worker) -> None:
    """The OOM killer taking an idle worker: SIGKILL, then wait (at most 10 s) until the process is dead, a
    zombie not yet reaped by Popen."""
    os.kill(worker.proc.pid, signal.SIGKILL)
    deadline = time.monotonic() + 10
    while os.waitid(os.P_PID, worker.proc.pid, os.WEXITED | os.WNOWAIT | os.WNOHANG) is None:
        assert time.monotonic() < deadline, "a SIGKILLed worker did not die"
        time.sleep(0.01)


# ------------------------------------------------------------------------------ 1. a worker that died idle


def test_a_worker_killed_while_idle_is_replaced_and_its_scratch_folder_removed() -> None:
    """Before the fix, _borrow handed back the dead idle worker: writing the request raised BrokenPipeError,
    then kill() closed stdin with the request unflushed and raised a second BrokenPipeError out of call() (out of
    env.step: a correct answer got no reward), and the dead worker's scratch folder stayed in /tmp."""
    pool = ScoringPool(max_workers=1)
    try:
        pool.warm_up(1)
        (dead,) = pool._idle
        _sigkill(dead)
        result = pool.call("math:factorial", 5, timeout=30)
        assert result.ok and result.value == 120
        assert not Path(dead.scratch).exists()
        assert dead not in pool._idle
    finally:
        pool.close()


def test_a_math_step_after_the_grading_worker_died_idle_is_still_graded() -> None:
    """Before the fix, the second step raised BrokenPipeError out of env.step instead of paying 1 for the
    correct answer (math, qa and rg envs all score through the pool)."""
    pytest.importorskip("math_verify")
    env = gem_core.make("math:Sample")
    try:
        env.reset(options={"index": 0})  # the gold is 27
        assert env.step("\\boxed{\\sqrt{729}}")[1] == 1.0  # math-verify decides: the grading pool has a worker
        for worker in list(default_grader()._idle):
            _sigkill(worker)
        env.reset(options={"index": 0})
        _, reward, _, _, info = env.step("\\boxed{\\sqrt{729}}")
        assert reward == 1.0, info
    finally:
        env.close()


def test_a_worker_that_dies_after_it_was_borrowed_is_retried_once_on_a_fresh_one() -> None:
    """The worker may die between _borrow's check and the request (the check says alive). Before the fix the
    request's BrokenPipeError, then a second one from kill() flushing the unsent request, came out of call()."""
    pool = ScoringPool(max_workers=1)
    try:
        pool.warm_up(1)
        (dead,) = pool._idle
        _sigkill(dead)
        dead.proc.poll = lambda: None  # type: ignore[method-assign]  # the check ran just before the kill
        result = pool.call("math:factorial", 5, timeout=30)
        assert result.ok and result.value == 120
        assert not Path(dead.scratch).exists()
    finally:
        pool.close()
        del dead.proc.poll
        _stop(dead)


def test_killing_a_worker_with_an_unsent_request_does_not_raise() -> None:
    """Before the fix, kill() closed stdin with bytes still buffered: closing flushed them into the dead
    worker's pipe and raised BrokenPipeError (inside the except that was handling the first one)."""
    worker = _Worker(None, None)
    try:
        _sigkill(worker)
        assert worker.proc.stdin is not None
        worker.proc.stdin.write(b"unsent")  # stays in the buffer
        worker.kill()
        assert not Path(worker.scratch).exists()
    finally:
        _stop(worker)


# --------------------------------------------------------------------------- 2. a prepare that overruns


def _children() -> list[int]:
    out = subprocess.run(["pgrep", "-P", str(os.getpid())], capture_output=True, text=True, timeout=10).stdout
    return [int(pid) for pid in out.split()]


def test_a_prepare_past_startup_timeout_is_a_timeout_error_and_its_worker_is_killed() -> None:
    """Before the fix, worker.call returned (False, None) and ``answered, (status, value) = ...`` raised
    "TypeError: cannot unpack non-iterable NoneType object" out of call(); the TimeoutError branch never ran and
    the worker, outside the pool, kept sleeping after close()."""
    pool = ScoringPool(max_workers=1)
    try:
        pool.warm_up(1)
        pool.startup_timeout = 1.0  # after the start, which may take longer on a loaded machine
        (worker,) = pool._idle
        result = pool.call("os:getpid", timeout=5.0, prepare=("time:sleep", (30,)))
        assert result.error is not None and "preparing time:sleep" in result.error
        assert _gone(worker)
        assert not Path(worker.scratch).exists()
    finally:
        pool.close()
        _stop(worker)


# --------------------------------------------------------------------- 3. an interrupted call's worker


def test_an_interrupted_call_kills_its_worker() -> None:
    """Before the fix, a KeyboardInterrupt (or SystemExit, or any exception not in the handled list) while a call
    waited left its worker running the call outside the pool: close() did not stop it, it kept a core busy."""
    def interrupt(*_: object) -> None:
        raise KeyboardInterrupt

    pool = ScoringPool(max_workers=1)
    previous = signal.signal(signal.SIGALRM, interrupt)
    try:
        pool.warm_up(1)
        (worker,) = pool._idle
        signal.setitimer(signal.ITIMER_REAL, 0.5)
        with pytest.raises(KeyboardInterrupt):
            pool.call("time:sleep", 60, timeout=120.0)
        assert _gone(worker)
        assert not Path(worker.scratch).exists()
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
        pool.close()
        _stop(worker)


def test_close_stops_a_worker_whose_call_is_running() -> None:
    """Before the fix, close() stopped only idle workers: one running a long call from another thread kept
    running (a core busy) until the call's own limit, however long."""
    pool = ScoringPool(max_workers=1)
    results = []
    thread = threading.Thread(target=lambda: results.append(pool.call("time:sleep", 60, timeout=120.0)))
    try:
        pool.warm_up(1)
        (worker,) = pool._idle
        thread.start()
        deadline = time.monotonic() + 10
        while pool._idle and time.monotonic() < deadline:
            time.sleep(0.02)
        pool.close()
        assert _gone(worker, 5.0)
        thread.join(10)
        assert not thread.is_alive()
        assert results and not results[0].ok
        assert not Path(worker.scratch).exists()
    finally:
        pool.close()
        _stop(worker)
        thread.join(10)


# ------------------------------------------------------------------------------- 6. unchecked limits


@pytest.mark.parametrize("timeout", [float("inf"), float("nan"), 0, -1, "5", True, 10**9])
def test_scoring_and_grading_refuse_a_time_limit_that_is_no_limit(timeout: object) -> None:
    """Before the fix, timeout=inf raised a raw OverflowError and abandoned a worker (alive after close()), and
    nan/0/-1 paid 0 for a correct answer and killed a worker per call."""
    pool = GraderPool(max_workers=1)
    try:
        with pytest.raises(GemError, match="timeout"):
            pool.call("math:factorial", 5, timeout=timeout)  # type: ignore[arg-type]
        with pytest.raises(GemError, match="timeout"):
            pool.grade("\\sqrt{4}", "2", timeout)  # type: ignore[arg-type]
        with pytest.raises(GemError, match="timeout"):
            grade("\\sqrt{4}", "2", timeout)  # type: ignore[arg-type]
        assert not pool._idle  # nothing was started for a refused call
    finally:
        pool.close()


def test_grade_without_a_limit_still_grades_in_this_process() -> None:
    """timeout=None keeps its meaning for grade(): in this process, without a worker."""
    assert grade("2", "2", None).correct


@pytest.mark.parametrize("max_workers", [-1, 0, "2", 1.5, True])
def test_a_pool_refuses_a_worker_count_that_is_not_a_positive_whole_number(max_workers: object) -> None:
    """Before the fix, max_workers=-1 raised a raw ValueError (from the semaphore), "2" a raw TypeError, and 0
    silently meant the default."""
    with pytest.raises(GemError, match="max_workers"):
        ScoringPool(max_workers=max_workers)  # type: ignore[arg-type]
    with pytest.raises(GemError, match="max_workers"):
        GraderPool(max_workers=max_workers)  # type: ignore[arg-type]


def test_a_pool_refuses_a_startup_timeout_that_is_no_limit() -> None:
    """startup_timeout=inf would fail each call's wait with a raw OverflowError, as timeout=inf did."""
    with pytest.raises(GemError, match="startup_timeout"):
        ScoringPool(max_workers=1, startup_timeout=float("inf"))
