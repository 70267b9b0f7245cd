"""The ``process`` backend: envs in worker processes, several envs per worker.

Each worker hosts a group of envs (env ``i`` lives in worker ``i % num_workers``) and runs a whole
group's calls per message, so a batch costs one pipe round trip per worker, not per env. The default
is one worker per env (waits overlap, a fault touches one env); :func:`~gem_core.vector.make_vec`
groups envs that declare ``blocking = False`` (the games) over one worker per CPU.

Faults, each ending only the episodes it touches (``truncated`` with ``info["error"]``):

- An env that raises (``SystemExit`` and other ``BaseException``\\ s included) fails that call only.
- ``step_timeout``: the worker interrupts a step or reset that runs longer (``SIGALRM``), rebuilds
  that env and answers ``timeout`` for it; the other envs of the worker are untouched. A call stuck
  where a signal cannot reach it (inside a C extension) is caught by the parent's deadline: the worker
  is killed and replaced, and every env it hosted loses its episode.
- A worker process that dies is replaced by a fresh one built from the same builders; its envs'
  calls come back as ``WorkerDied`` failures.
- Recycling (``recycle_after_steps``, ``max_worker_memory_mb``): after a batch, a worker that has run
  that many steps, or whose resident memory is over the cap, is replaced. Its envs' episodes in
  progress end (``truncated``, ``info["error"]`` starting with ``WorkerRecycled``) at their next step;
  an env whose next call is a reset loses nothing but its RNG continuation.
- ``close()`` is safe at any time, from any thread: calls in flight get ``timeout`` seconds, then the
  batch returns with ``closed`` failures for the calls still running.
"""

from __future__ import annotations

import multiprocessing as mp
import multiprocessing.connection
import os
import pickle
import select
import signal
import sys
import threading
import time
import weakref
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from gem_core.errors import InvalidArgument, StartFailed
from gem_core.vector.calls import (
    CLOSED,
    TIMEOUT,
    Call,
    EnvBuilder,
    Failure,
    Step,
    check_amount,
    check_count,
    check_step_timeout,
    describe_exception,
    raise_portable_error,
)
from gem_core.vector.hosted import Batch, CallTimedOut, HostedBackend, HostedEnvs
from gem_core.vector.in_process import CLOSE_TIMEOUT

__all__ = ["ProcessBackend", "default_start_method"]

#: Extra seconds the parent waits past a worker's own step timeouts before it kills the worker.
_KILL_GRACE = 2.0


# --------------------------------------------------------------------------------------------------
# The worker. Protocol: the parent sends a batch as ``(steps, others)``, ``steps`` a list of (env index,
# action) pairs and ``others`` a list of (env index, Reset or Call) pairs (see :func:`_wire_batch`), or
# None to stop; the worker answers with a list of (env index, status, payload), status "ok" (payload: the result),
# "error" (payload: the exception as text) or "replaced" (the env was rebuilt; payload: why). Right
# after start the worker answers ("ok", None) or ("error", PortableError) for building its envs.


def _on_alarm(signum: int, frame: Any) -> None:
    raise CallTimedOut()


def _sendable(reply: tuple[int, str, Any]) -> tuple[int, str, Any]:
    try:
        pickle.dumps(reply)
        return reply
    except Exception as exc:  # noqa: BLE001 - e.g. an info value that cannot be pickled
        return reply[0], "error", f"the env's answer cannot be sent to the parent process: {describe_exception(exc)}"


def _wire_batch(batch: Batch) -> tuple[list[tuple[int, Any]], Batch]:
    """A batch as sent to a worker: steps as bare (index, action) pairs. Pickling a dataclass per step
    cost 10-15 µs per message each way, as much as the cheap games' steps it carries (issue 23)."""
    steps = [(i, call.action) for i, call in batch if type(call) is Step]
    others = [(i, call) for i, call in batch if type(call) is not Step]
    return steps, others


class Spinner:
    """Waits a little by polling before sleeping: for envs whose steps take microseconds, the wake-up of a
    process that slept costs more than the steps (a pipe round trip took 43 µs sleeping against 12 µs
    polling on this project's 2-core VM, where a sleeping core is woken through the hypervisor), so the
    parent polls for its workers' answers, and a worker for its next batch, for up to ``seconds``,
    yielding the core between polls.

    Polling only pays while the other side runs on a core of its own. When the machine is busy it does
    the opposite (a yield hands the core to another job for a whole time slice, where a sleeper woken by
    the answer would have been scheduled at once), so three waits in a row that polling did not end
    within twice its time switch it off for a second; it then tries again.
    """

    MISSES_BEFORE_PAUSE = 3
    PAUSE_SECONDS = 1.0

    def __init__(self, seconds: float):
        self.seconds = seconds
        self._misses = 0
        self._paused_until = 0.0

    def wait(self, ready: Callable[[], Any]) -> Any:
        """``ready()``'s first truthy value while polling, or a falsy one: then sleep in the caller's own wait."""
        if self.seconds <= 0:
            return None
        now = time.perf_counter()
        if now < self._paused_until:
            return None
        deadline = now + self.seconds
        while True:
            found = ready()
            now = time.perf_counter()
            if found or now > deadline:
                break
            os.sched_yield()
        if found and now <= deadline + self.seconds:
            self._misses = 0
        else:  # nothing came, or a yield gave the core away for a time slice: the machine is busy
            self._misses += 1
            if self._misses >= self.MISSES_BEFORE_PAUSE:
                self._misses = 0
                self._paused_until = now + self.PAUSE_SECONDS
        return found


def _worker_main(conn: mp.connection.Connection, builders: dict[int, EnvBuilder], step_timeout: float | None, spin_seconds: float = 0.0) -> None:
    # Ctrl-C reaches the whole process group; the parent decides when workers stop (close()).
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if step_timeout is not None:
        signal.signal(signal.SIGALRM, _on_alarm)
    hosted = HostedEnvs(builders)
    error = hosted.start()  # on failure, closes the envs it built
    if error is not None:
        conn.send(("error", error))
        conn.close()
        return
    conn.send(("ok", None))
    spinner = Spinner(spin_seconds)
    try:
        while True:
            try:
                spinner.wait(lambda: conn.poll(0))
                batch = conn.recv()
            except EOFError:  # parent went away
                break
            if batch is None:
                break
            steps, others = batch
            replies = [(i, *hosted.run(i, Step(action), step_timeout)) for i, action in steps]
            replies += hosted.run_batch(others, step_timeout)
            try:
                conn.send(replies)
            except Exception:  # noqa: BLE001 - find the answers that cannot be pickled
                conn.send([_sendable(reply) for reply in replies])
    finally:
        hosted.close()
        conn.close()


# --------------------------------------------------------------------------------------------------
# The parent side.


@dataclass
class _Worker:
    process: mp.process.BaseProcess
    conn: mp.connection.Connection
    steps: int = 0


def _stop_workers(workers: list[_Worker | None], timeout: float = 1.0) -> None:
    """Ask every worker to stop, then terminate/kill stragglers and reap them all (no zombies)."""
    for w in workers:
        if w is not None:
            try:
                w.conn.send(None)
            except (OSError, ValueError):
                pass
    deadline = time.monotonic() + timeout
    for w in workers:
        if w is None:
            continue
        w.process.join(max(0.0, deadline - time.monotonic()))
        if w.process.is_alive():
            w.process.kill()
            w.process.join()
        w.conn.close()
    workers[:] = [None] * len(workers)


def default_start_method() -> str:
    """``fork`` on Linux (fast, and the builders need not be picklable), else ``spawn``."""
    return "fork" if sys.platform == "linux" and "fork" in mp.get_all_start_methods() else "spawn"


def _resident_mb(pid: int) -> float | None:
    try:
        with open(f"/proc/{pid}/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20
    except (OSError, ValueError, IndexError):
        return None


class ProcessBackend(HostedBackend):
    """Envs in worker processes (see the module docstring for faults, timeouts and recycling).

    Args:
        env_fns: one builder per env.
        context: a multiprocessing start method (default ``fork`` on Linux, else ``spawn``).
        start_timeout: seconds a worker may take to build its envs.
        num_workers: worker processes (default: one per env).
        step_timeout: seconds a step or reset may run.
        recycle_after_steps: replace a worker after it has run this many steps (summed over its envs).
        max_worker_memory_mb: replace a worker whose resident memory exceeds this (Linux ``/proc``).
        spin_seconds: poll this long for an answer (parent) or the next batch (worker) before sleeping
            (see :class:`Spinner`); 0 sleeps at once. :func:`~gem_core.vector.make_vec` sets 200 µs for
            envs that declare ``blocking = False``.

    Raises:
        InvalidArgument: if ``num_workers`` is not a whole number between 1 and the number of envs,
            ``recycle_after_steps`` not a whole number from 1, ``context`` not a start method of this platform,
            a timeout or the memory cap not a number above 0, or ``spin_seconds`` negative (each may be None
            where its default is None).
    """

    def __init__(
        self,
        env_fns: Sequence[EnvBuilder],
        context: str | None = None,
        start_timeout: float = 120.0,
        num_workers: int | None = None,
        step_timeout: float | None = None,
        recycle_after_steps: int | None = None,
        max_worker_memory_mb: float | None = None,
        spin_seconds: float = 0.0,
    ):
        self._builders = list(env_fns)
        self.num_envs = len(self._builders)
        count = self.num_envs if num_workers is None else check_count("num_workers", num_workers, most=self.num_envs, none_means="one per env")
        self._recycle_after_steps = (
            None if recycle_after_steps is None else check_count("recycle_after_steps", recycle_after_steps, none_means="no recycling by steps")
        )
        self._max_memory_mb = (
            None if max_worker_memory_mb is None else check_amount("max_worker_memory_mb", max_worker_memory_mb, "MB", none_means="no cap")
        )
        self.step_timeout = check_step_timeout(step_timeout)
        self._start_timeout = check_amount("start_timeout", start_timeout, "seconds")
        self._spin_seconds = check_amount("spin_seconds", spin_seconds, "seconds", zero_allowed=True)
        if context is not None and context not in mp.get_all_start_methods():
            raise InvalidArgument(
                f"context={context!r:.80} is not a multiprocessing start method here; use one of "
                f"{mp.get_all_start_methods()}, or None for {default_start_method()!r}."
            )
        self._ctx = mp.get_context(context or default_start_method())
        self._spinner = Spinner(self._spin_seconds)
        self._place([i % count for i in range(self.num_envs)])
        self._lock = threading.Lock()  # one batch at a time: the pipes carry one message each way
        self._closed = False
        self._wake_reader, self._wake_writer = self._ctx.Pipe(duplex=False)  # close() interrupts a batch
        self.workers: list[_Worker | None] = [None] * count
        # At exit, stop workers even if the VectorEnv was never closed (the finalizer holds no self).
        self._finalizer = weakref.finalize(self, _stop_workers, self.workers)
        try:
            for w in range(count):
                self.workers[w] = self._start(w)
            for w in range(count):
                self._await_ready(w)
        except BaseException:
            self.close()
            raise

    # --- workers ------------------------------------------------------------------------------------

    def _start(self, w: int) -> _Worker:
        parent_conn, child_conn = self._ctx.Pipe(duplex=True)
        builders = {i: self._builders[i] for i in self._hosted[w]}
        process = self._ctx.Process(  # type: ignore[attr-defined]  # typeshed's BaseContext (get_context(str)) lacks it; every real context has it
            target=_worker_main, args=(child_conn, builders, self.step_timeout, self._spin_seconds), name=f"gem-vector-worker-{w}", daemon=True
        )
        process.start()
        child_conn.close()
        return _Worker(process, parent_conn)

    def _await_ready(self, w: int) -> None:
        worker = self.workers[w]
        assert worker is not None
        ready = mp.connection.wait([worker.conn, worker.process.sentinel], timeout=self._start_timeout)
        if not ready:
            raise StartFailed(
                f"The worker process for envs {self._hosted[w]} did not build them within start_timeout="
                f"{self._start_timeout:g} s; raise start_timeout in backend_kwargs if building them is slow."
            )
        received, answer = self._receive(worker)
        if received != "ok":
            raise StartFailed(f"The worker process for envs {self._hosted[w]} died while building them ({answer}).")
        status, payload = answer
        if status != "ok":  # a builder raised: its own exception, closed envs and all
            raise_portable_error(payload, f"in the worker process for envs {self._hosted[w]}")

    @staticmethod
    def _receive(worker: _Worker) -> tuple[str, Any]:
        try:
            return "ok", worker.conn.recv()
        except (EOFError, OSError):
            worker.process.join(1.0)
            return "died", f"exit code {worker.process.exitcode}"

    def _replace(self, w: int) -> None:
        old = self.workers[w]
        if old is not None:
            if old.process.is_alive():
                old.process.kill()
            old.process.join()  # reap: no zombie
            old.conn.close()
        self.workers[w] = self._start(w)
        self._await_ready(w)

    def _stop(self, w: int) -> None:
        """Kill worker ``w`` now: it ignores SIGINT, so a step the user interrupted would run on to its end."""
        worker = self.workers[w]
        if worker is not None and worker.process.is_alive():
            worker.process.kill()
            worker.process.join()  # reap: no zombie

    # --- batches ------------------------------------------------------------------------------------

    def _exchange(self, per_worker: dict[int, Batch], results: dict[int, Any]) -> tuple[dict[int, Batch], dict[int, str]]:
        sent: dict[int, Batch] = {}
        lost_workers: dict[int, str] = {}  # worker -> error for its envs in this batch
        for w, batch in per_worker.items():
            worker = self.workers[w]
            assert worker is not None
            try:
                worker.conn.send(_wire_batch(batch))
                sent[w] = batch
            except (BrokenPipeError, ConnectionResetError, EOFError, OSError) as exc:
                sent[w] = batch
                lost_workers[w] = self._died(w, describe_exception(exc))
            except Exception:  # noqa: BLE001 - a call that cannot be pickled (an odd action object)
                sendable = []
                for i, call in batch:
                    try:
                        pickle.dumps(call)
                        sendable.append((i, call))
                    except Exception as exc:  # noqa: BLE001
                        results[i] = Failure(f"the call cannot be sent to the worker process: {describe_exception(exc)}")
                if sendable:
                    worker.conn.send(_wire_batch(sendable))
                    sent[w] = sendable
        self._collect(sent, lost_workers, results)
        return sent, lost_workers

    def _died(self, w: int, reason: str) -> str:
        return f"WorkerDied: the worker process of envs {self._hosted[w]} died ({reason}); it was replaced by a fresh one."

    def _collect(self, sent: Mapping[int, Batch], lost_workers: dict[int, str], results: dict[int, Any]) -> None:
        """Wait for the answers of the workers in ``sent`` (or their death, their deadline, or close())."""
        pending = {w for w in sent if w not in lost_workers}
        deadlines: dict[int, float] = {}
        if self.step_timeout is not None:
            now = time.monotonic()
            for w in pending:
                timed = sum(1 for _, call in sent[w] if not isinstance(call, Call))
                deadlines[w] = now + self.step_timeout * max(timed, 1) + _KILL_GRACE
        # A select.poll built once per batch (mp.connection.wait builds a selector on every call).
        poller = select.poll()
        owner_of: dict[int, int] = {self._wake_reader.fileno(): -1}
        for w in pending:
            worker = self.workers[w]
            assert worker is not None
            for fd in (worker.conn.fileno(), worker.process.sentinel):
                owner_of[fd] = w
                poller.register(fd, select.POLLIN)
        poller.register(self._wake_reader.fileno(), select.POLLIN)
        while pending:
            timeout = None if not deadlines else max(0.0, min(deadlines[w] for w in pending) - time.monotonic())
            events = self._spinner.wait(lambda: poller.poll(0)) or poller.poll(None if timeout is None else timeout * 1000)
            ready = {owner_of[fd] for fd, _ in events}
            if -1 in ready:  # close() gave up waiting
                for w in pending:
                    for i, _ in sent[w]:
                        results[i] = Failure(CLOSED)
                return
            for w in [w for w in pending if deadlines and deadlines[w] <= time.monotonic()]:
                if not self.workers[w].conn.poll():  # type: ignore[union-attr]
                    ready.discard(w)
                    self._forget(poller, w, pending)
                    lost_workers[w] = TIMEOUT  # stuck where SIGALRM could not interrupt it: killed
            for w in ready & pending:
                worker = self.workers[w]
                assert worker is not None
                if not worker.conn.poll() and worker.process.is_alive():
                    continue
                status, payload = self._receive(worker)
                self._forget(poller, w, pending)
                if status != "ok":
                    lost_workers[w] = self._died(w, payload)
                    continue
                self._replies(payload, results)

    def _forget(self, poller: select.poll, w: int, pending: set[int]) -> None:
        pending.discard(w)
        worker = self.workers[w]
        assert worker is not None
        for fd in (worker.conn.fileno(), worker.process.sentinel):
            poller.unregister(fd)

    def _after_batch(self, w: int, batch: Batch) -> None:
        """Recycle worker ``w`` if it has run its steps or grown over its memory cap."""
        if self._recycle_after_steps is None and self._max_memory_mb is None:
            return
        worker = self.workers[w]
        assert worker is not None
        worker.steps += sum(1 for _, call in batch if isinstance(call, Step))
        reason = None
        if self._recycle_after_steps is not None and worker.steps >= self._recycle_after_steps:
            reason = f"after {worker.steps} steps (recycle_after_steps={self._recycle_after_steps})"
        elif self._max_memory_mb is not None:
            resident = _resident_mb(worker.process.pid)  # type: ignore[arg-type]
            if resident is not None and resident > self._max_memory_mb:
                reason = f"its resident memory {resident:.0f} MB is over max_worker_memory_mb={self._max_memory_mb:g}"
        if reason is not None:
            self._lose(w, f"WorkerRecycled: the worker process of envs {self._hosted[w]} was recycled {reason}; the episode in progress ended.")

    # --- inspection and closing ---------------------------------------------------------------------

    def worker_pids(self) -> list[int | None]:
        """The id of the worker process hosting each env, by env index (for monitoring, or tests)."""
        return [self._pid(self._owner[i]) for i in range(self.num_envs)]

    def _pid(self, w: int) -> int | None:
        worker = self.workers[w]
        return worker.process.pid if worker is not None else None

    def worker_memory_mb(self) -> list[float | None]:
        """Resident memory of the worker hosting each env, by env index (None where unknown)."""
        return [None if (pid := self._pid(self._owner[i])) is None else _resident_mb(pid) for i in range(self.num_envs)]

    def close(self, timeout: float | None = None) -> None:
        """Stop the workers; a batch in flight gets ``timeout`` seconds (default :data:`CLOSE_TIMEOUT`)."""
        if self._closed:
            return
        self._closed = True
        if not self._lock.acquire(timeout=CLOSE_TIMEOUT if timeout is None else timeout):
            self._wake_writer.send_bytes(b"close")
            self._lock.acquire()
        try:
            self._finalizer()
            self._wake_reader.close()
            self._wake_writer.close()
        finally:
            self._lock.release()
