"""Run a grader or scorer on an untrusted answer with a hard time limit that recovers by itself.

Graders parse what a model wrote: SymPy on ``9^{9^{9^{9}}}`` or reasoning-gym on ``10**10**10`` computes
for minutes. Timeouts built on ``signal.alarm`` work only in the main thread, useless under a
thread-pool vector env or an event loop, and a thread cannot be stopped. So scoring runs in small
persistent worker processes (``python -m gem_core.envs.scoring_pool``): the caller sends
``(function, args)`` and waits up to ``timeout`` seconds; on expiry it kills that worker, starts a fresh
one in the background, and reports a timeout. Workers are plain subprocesses, not ``multiprocessing``
children, so they neither re-import the user's ``__main__`` nor fork a threaded parent.

The function is named by ``"package.module:function"`` and imported in the worker; arguments and the
result travel pickled over the worker's stdin/stdout (both ends are this package, the untrusted answer
is only ever a string argument). A ``prepare`` call (building a dataset, say) may run first under the
start-up time limit, so a slow first build is not billed as the answer's time.

Why not the Python sandbox's pool (:mod:`gem_core.tools.sandbox`), which also bounds untrusted work?
Measured with ``bench/grading_pools.py`` (one grade at a time, warm pools, 2 cores under load 10): a
math-verify grade takes a median 6-8 ms here and 245-249 ms in the sandbox (30-40x), because a sandbox
call is a fresh isolated process (bwrap, forked from a zygote) while a scoring worker is reused until
it overruns. Graders need the time and memory limit, not the isolation: they run this package's code
on an answer that is only ever a string argument, never executed. So the two pools stay apart; they
share the shape of their lifecycle (created on first use, owned by an object, ``close()``).
"""

from __future__ import annotations

import argparse
import atexit
import importlib
import logging
import os
import pickle
import select
import shutil
import struct
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gem_core.cpus import usable_cpus
from gem_core.errors import InvalidArgument

__all__ = ["ScoringPool", "CallResult", "scoring_pool", "SETUP_REPORTED", "report_scoring", "MAX_CALL_SECONDS", "check_time_limit"]

logger = logging.getLogger("gem.envs.scoring_pool")

_HEADER = struct.Struct("!Q")

SETUP_REPORTED = 0.05
"""Envs put ``info["scorer_setup_seconds"]`` on a step whose scoring first waited this long for a
worker to start or a dataset to be built there: time outside the step's declared limit, made visible.
"""


MAX_CALL_SECONDS = 24 * 3600.0
"""The longest time limit a grade, a score or an item's data program may have (one day). More is no limit
but a hang, and past ~24.8 days the wait itself fails (``poll`` takes its milliseconds as a C int)."""


def check_time_limit(name: str, value: Any, *, none_means: str | None = None) -> float:
    """An env's time limit ``name`` on untrusted work, checked when the env is made: a finite number of
    seconds above 0, at most :data:`MAX_CALL_SECONDS`. Otherwise 0 or nan paid 0 for every correct answer,
    and inf or a text made each step raise. ``none_means`` says, in the message, what None does where the
    env takes it (the env passes None on without calling this).

    Raises:
        InvalidArgument: if it is out of range or not a number.
    """
    from gem_core.vector.calls import check_amount

    seconds = check_amount(name, value, "seconds", none_means=none_means)
    if seconds > MAX_CALL_SECONDS:
        raise InvalidArgument(f"{name}={value!r:.80} is more than the {MAX_CALL_SECONDS:g} s (one day) a call may be given.")
    return seconds


def report_scoring(env: Any, info: dict[str, Any], answer: str, error: str | None, setup_seconds: float) -> None:
    """Put a scoring's trouble into a step's ``info``: ``error`` (warned once per env id, since the
    answer was paid 0 for it) and ``scorer_setup_seconds`` when the worker's setup took long."""
    from gem_core.env import log_error_once

    if error is not None:
        info["error"] = error
        log_error_once(env, error, f"answer {answer[:80]!r}")
    if setup_seconds >= SETUP_REPORTED:
        info["scorer_setup_seconds"] = setup_seconds


def _readable(fd: int, timeout: float) -> bool:
    """Whether ``fd`` has something to read within ``timeout`` seconds. ``poll``, not ``select``: a trainer with many
    connections and files open holds descriptors past 1023, which ``select`` refuses (ValueError)."""
    poller = select.poll()
    poller.register(fd, select.POLLIN)
    return bool(poller.poll(timeout * 1000))


@dataclass(frozen=True)
class CallResult:
    """What a bounded call returned: ``value`` on success; ``timed_out`` or ``error`` otherwise."""

    value: Any = None
    timed_out: bool = False
    error: str | None = None
    #: Seconds spent before the call proper: waiting for a starting worker and running ``prepare``.
    #: Not covered by the call's time limit (it is bounded by ``startup_timeout`` instead).
    setup_seconds: float = 0.0

    @property
    def ok(self) -> bool:
        """Whether the call returned in time without an error."""
        return not self.timed_out and self.error is None

    @property
    def scoring_error(self) -> str | None:
        """What a scoring env puts in ``info["error"]``: ``None`` on success, ``"timeout"``, or
        ``"scorer crashed: <exception>"``; the one mapping, so every env's errors read (and are
        warned about, :func:`report_scoring`) alike."""
        if self.timed_out:
            return "timeout"
        return None if self.error is None else f"scorer crashed: {self.error}"


def _resolve(reference: str) -> Callable[..., Any]:
    module_name, _, attr = reference.partition(":")
    return getattr(importlib.import_module(module_name), attr)


def _write_frame(stream: Any, payload: Any) -> None:
    data = pickle.dumps(payload, protocol=pickle.HIGHEST_PROTOCOL)
    stream.write(_HEADER.pack(len(data)) + data)
    stream.flush()


class _Worker:
    """One scoring subprocess speaking length-prefixed pickles over its stdin/stdout."""

    def __init__(self, memory_mb: int | None, warm_up: str | None):
        env = dict(os.environ)
        # the worker imports gem_core the way this process did, installed or from a checkout
        package_root = str(Path(__file__).resolve().parents[2])
        env["PYTHONPATH"] = os.pathsep.join(p for p in (package_root, env.get("PYTHONPATH", "")) if p)
        # What a worker computes is the same in every run: reasoning-gym iterates sets of strings to make some
        # items (see gem_core.envs.reasoning_gym.env.DEPENDS_ON_HASH_SEED), and a set's order follows the hash seed.
        env["PYTHONHASHSEED"] = "0"
        command = [sys.executable, "-m", "gem_core.envs.scoring_pool"]
        if memory_mb:
            command += ["--memory-mb", str(memory_mb)]
        if warm_up:
            command += ["--warm-up", warm_up]
        # The worker's working folder (a scorer that writes a file writes it there) is made and removed here:
        # a worker is stopped with SIGKILL (an overrun, close()), so no cleanup of its own would run.
        self.scratch = tempfile.mkdtemp(prefix="gem-scoring-")
        command += ["--scratch", self.scratch]
        try:
            self.proc = subprocess.Popen(
                command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env, close_fds=True,
                cwd=self.scratch,
            )
        except BaseException:
            shutil.rmtree(self.scratch, ignore_errors=True)
            raise
        self.ready = False
        self._buffer = b""

    def _read_exactly(self, n: int, deadline: float) -> bytes | None:
        """``n`` bytes from the worker, or ``None`` when ``deadline`` passes first."""
        assert self.proc.stdout is not None
        fd = self.proc.stdout.fileno()
        while len(self._buffer) < n:
            remaining = deadline - time.monotonic()
            if remaining <= 0 or not _readable(fd, remaining):
                return None
            chunk = os.read(fd, max(n - len(self._buffer), 65536))
            if not chunk:
                raise EOFError("scoring worker exited")
            self._buffer += chunk
        data, self._buffer = self._buffer[:n], self._buffer[n:]
        return data

    def _read_frame(self, timeout: float) -> tuple[bool, Any]:
        deadline = time.monotonic() + max(timeout, 0.0)
        header = self._read_exactly(_HEADER.size, deadline)
        if header is None:
            return False, None
        body = self._read_exactly(_HEADER.unpack(header)[0], deadline)
        return (False, None) if body is None else (True, pickle.loads(body))

    def wait_ready(self, timeout: float) -> None:
        if self.ready:
            return
        answered, message = self._read_frame(timeout)
        if not answered or message != "ready":
            raise TimeoutError(f"scoring worker did not start within {timeout:.0f}s")
        self.ready = True

    def call(self, function: str, args: tuple, timeout: float) -> tuple[bool, Any]:
        """``(answered, (status, value))``; ``answered`` is False (and the reply None) if the worker overran
        ``timeout``. BrokenPipeError (only the request's write raises it) means the worker died before it."""
        assert self.proc.stdin is not None
        _write_frame(self.proc.stdin, (function, args))
        return self._read_frame(timeout)

    def stop(self) -> None:
        """Kill the process and remove its scratch folder, leaving the pipes to the thread that reads them (closing
        them under its poll could hand their descriptor numbers to another file)."""
        if self.proc.poll() is None:
            self.proc.kill()
        shutil.rmtree(self.scratch, ignore_errors=True)

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:  # pragma: no cover
            pass
        for stream in (self.proc.stdin, self.proc.stdout):
            if stream is not None:
                try:  # closing stdin flushes a request the dead worker never read: EPIPE, nothing to do about it
                    stream.close()
                except OSError:
                    pass
        shutil.rmtree(self.scratch, ignore_errors=True)


class ScoringPool:
    """Persistent scoring workers; at most ``max_workers`` busy at once.

    A caller borrows an idle worker (starting one if none is idle), so scoring from N threads runs on up
    to N cores. A worker that overruns its time limit is killed and a fresh one is started before the
    call returns, so the next call does not pay for the hang.

    Args:
        max_workers: workers busy at once (default: one per CPU this process may use, :func:`gem_core.cpus.usable_cpus`).
        memory_mb: address-space limit of each worker (a blown-up expression fails, not the host).
        startup_timeout: seconds a worker may take to start, and a ``prepare`` call to run.
        warm_up: ``"module:function"`` each worker calls before it says ready (imports, caches).

    Raises:
        InvalidArgument: if ``max_workers`` is not a whole number above 0, or ``startup_timeout`` not a number
            of seconds above 0 (at most :data:`MAX_CALL_SECONDS`).
    """

    def __init__(
        self,
        max_workers: int | None = None,
        *,
        memory_mb: int | None = 2048,
        startup_timeout: float = 120.0,
        warm_up: str | None = None,
    ):
        from gem_core.vector.calls import check_count

        self.max_workers = usable_cpus() if max_workers is None else check_count("max_workers", max_workers, none_means="one per usable CPU")
        self.memory_mb = memory_mb
        self.startup_timeout = check_time_limit("startup_timeout", startup_timeout)
        self.warm_up_function = warm_up
        self._idle: list[_Worker] = []
        #: Workers lent to a call now: close() stops them too, so an abandoned call leaves no process running.
        self._busy: set[_Worker] = set()
        self._lock = threading.Lock()
        self._slots = threading.BoundedSemaphore(self.max_workers)
        self._pid = os.getpid()
        self._closed = False

    def _new_worker(self) -> _Worker:
        return _Worker(self.memory_mb, self.warm_up_function)

    def _borrow(self) -> _Worker:
        """An idle worker that is still alive (one the OOM killer took while idle is dropped), else a new one."""
        dead = []
        try:
            with self._lock:
                while self._idle:
                    worker = self._idle.pop()
                    if worker.proc.poll() is None:
                        self._busy.add(worker)
                        return worker
                    dead.append(worker)
            worker = self._new_worker()
            with self._lock:
                self._busy.add(worker)
            return worker
        finally:
            for worker in dead:
                logger.debug("scoring worker %s died while idle (exit status %s)", worker.proc.pid, worker.proc.returncode)
                worker.kill()

    def _give_back(self, worker: _Worker) -> None:
        with self._lock:
            self._busy.discard(worker)
            if not self._closed:
                self._idle.append(worker)
                return
        worker.kill()

    def _discard(self, worker: _Worker) -> None:
        with self._lock:
            self._busy.discard(worker)
        worker.kill()

    def call(
        self,
        function: str,
        *args: Any,
        timeout: float,
        prepare: tuple[str, tuple] | None = None,
    ) -> CallResult:
        """Run ``function(*args)`` in a worker with a deadline of ``timeout`` seconds (start-up excluded).

        ``prepare`` is ``("module:function", args)`` run first under ``startup_timeout`` (its result
        is dropped); use it for per-process caches the scorer needs. A worker that died while idle is
        replaced, and a request it could not take is sent once more, to another worker. An exception that interrupts the wait
        (KeyboardInterrupt, SystemExit) kills the worker before it propagates.

        Raises:
            InvalidArgument: if ``timeout`` is not a number of seconds above 0, at most :data:`MAX_CALL_SECONDS`
                (inf failed the wait, and 0 or nan scored every answer as a timeout).
        """
        timeout = check_time_limit("timeout", timeout)
        with self._slots:
            setup_start = time.monotonic()
            worker = self._borrow()
            try:
                try:
                    answered, reply, setup = self._send(worker, function, args, timeout, prepare, setup_start)
                except BrokenPipeError as exc:  # died idle, after _borrow looked: the request once more, on another worker
                    logger.debug("scoring worker for %s lost before the request: %s", function, exc)
                    self._discard(worker)
                    worker = self._borrow()
                    answered, reply, setup = self._send(worker, function, args, timeout, prepare, setup_start)
            except (OSError, EOFError, TimeoutError, ValueError, pickle.PickleError) as exc:  # worker died (e.g. out of memory)
                self._discard(worker)
                logger.debug("scoring worker for %s lost: %s: %s", function, type(exc).__name__, exc)
                return CallResult(error=f"{type(exc).__name__}: {exc}", setup_seconds=time.monotonic() - setup_start)
            except BaseException:  # interrupted mid-call: the worker would go on computing outside the pool
                self._discard(worker)
                raise
            if not answered:
                logger.debug("%s overran %ss; killing its worker", function, timeout)
                self._discard(worker)
                self._give_back(self._new_worker())  # starts importing now, ready for the next call
                return CallResult(timed_out=True, error="timeout", setup_seconds=setup)
            self._give_back(worker)
            status, value = reply
            if status == "ok":
                return CallResult(value=value, setup_seconds=setup)
            return CallResult(error=value, setup_seconds=setup)

    def _send(
        self, worker: _Worker, function: str, args: tuple, timeout: float, prepare: tuple[str, tuple] | None, setup_start: float,
    ) -> tuple[bool, Any, float]:
        """``(answered, reply, setup seconds)`` of one call on ``worker``, ``prepare`` first."""
        worker.wait_ready(self.startup_timeout)
        if prepare is not None:
            prepared, _ = worker.call(prepare[0], tuple(prepare[1]), self.startup_timeout)
            if not prepared:
                raise TimeoutError(f"preparing {prepare[0]} took longer than {self.startup_timeout}s")
        setup = time.monotonic() - setup_start
        answered, reply = worker.call(function, args, timeout)
        return answered, reply, setup

    def warm_up(self, n: int = 1) -> None:
        """Start ``n`` workers now (e.g. before a benchmark) so the first calls do not wait for start-up."""
        workers = [self._new_worker() for _ in range(min(n, self.max_workers))]
        for worker in workers:
            worker.wait_ready(self.startup_timeout)
            self._give_back(worker)

    def close(self) -> None:
        """Stop every worker: the idle ones, and those in use (their calls return an error)."""
        with self._lock:
            workers, self._idle = self._idle, []
            busy = list(self._busy)
            self._closed = True
        if os.getpid() != self._pid:  # a forked child must not touch the parent's workers
            return
        for worker in workers:
            worker.kill()
        for worker in busy:  # the calling thread sees the worker exit, and closes its pipes itself
            worker.stop()


_pools: dict[str, ScoringPool] = {}
_pools_lock = threading.Lock()


def scoring_pool(name: str, factory: Callable[..., ScoringPool] = ScoringPool, **kwargs: Any) -> ScoringPool:
    """The process-wide pool called ``name`` ("math", "qa", "rg"), created on first use as
    ``factory(**kwargs)`` and closed at exit.

    One pool per kind of scorer, so a worker warmed for math-verify is not spent on reasoning-gym. A
    forked child gets its own pools.
    """
    with _pools_lock:
        pool = _pools.get(name)
        if pool is None or pool._pid != os.getpid():
            pool = _pools[name] = factory(**kwargs)
        return pool


@atexit.register
def _close_pools() -> None:
    for pool in list(_pools.values()):
        if pool._pid == os.getpid():
            pool.close()


# ------------------------------------------------------------------------------- the worker's main loop


def _exit_when_orphaned(scratch: str, poll_seconds: float = 1.0) -> None:
    """Stop this worker if its parent dies mid-call (stdin EOF is only seen between calls); the parent that
    would have removed ``scratch`` is gone, so the worker does."""
    parent = os.getppid()

    def watch() -> None:
        while True:
            time.sleep(poll_seconds)
            if os.getppid() != parent:
                shutil.rmtree(scratch, ignore_errors=True)
                os._exit(1)

    threading.Thread(target=watch, name="orphan-watch", daemon=True).start()


def _read_request(stream: Any) -> Any:
    header = stream.read(_HEADER.size)
    if len(header) < _HEADER.size:
        return None
    return pickle.loads(stream.read(_HEADER.unpack(header)[0]))


def _serve(argv: list[str] | None = None) -> None:
    """Answer ``(function, args)`` frames with ``("ok", value)`` or ``("error", message)`` until stdin closes."""
    parser = argparse.ArgumentParser(prog="python -m gem_core.envs.scoring_pool")
    parser.add_argument("--memory-mb", type=int, default=None)
    parser.add_argument("--warm-up", default=None)
    parser.add_argument("--scratch", default=None, help="the working folder the pool made for this worker (removed on exit)")
    options = parser.parse_args(argv)
    # A scorer or a dataset's own code that writes a file writes it here, not where the trainer runs.
    scratch = options.scratch or tempfile.mkdtemp(prefix="gem-scoring-")
    os.chdir(scratch)
    _exit_when_orphaned(scratch)
    try:
        _answer(options)
    finally:  # stdin closed: the parent is done with this worker (a killed one is cleaned up by the parent)
        shutil.rmtree(scratch, ignore_errors=True)


def _answer(options: argparse.Namespace) -> None:
    """The worker proper: its limits, its warm-up, then one reply per request until stdin closes."""
    if options.memory_mb:
        try:
            import resource

            limit = options.memory_mb * 1024 * 1024
            resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
        except (ImportError, ValueError, OSError):  # pragma: no cover - non-POSIX or a lower hard limit
            pass
    # The replies get a private copy of fd 1; a scorer that prints writes to /dev/null, not the protocol.
    stdout = os.fdopen(os.dup(1), "wb")
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)
    sys.stdout = open(devnull, "w", closefd=False)
    stdin = sys.stdin.buffer
    if options.warm_up:  # imports and caches before saying ready, so start-up is not billed to a call
        try:
            _resolve(options.warm_up)()
        except Exception:  # pragma: no cover - a failed warm-up shows up as errors on the calls
            pass
    _write_frame(stdout, "ready")
    while (request := _read_request(stdin)) is not None:
        try:
            function, args = request
            reply: tuple[str, Any] = ("ok", _resolve(function)(*args))
            pickle.dumps(reply)
        except BaseException as exc:  # MemoryError, RecursionError, a scorer's own bug: all are verdicts
            reply = ("error", f"{type(exc).__name__}: {exc}"[:2000])
        _write_frame(stdout, reply)


if __name__ == "__main__":
    _serve()
