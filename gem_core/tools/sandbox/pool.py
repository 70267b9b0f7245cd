"""Warm sandboxes: a pool per mode (a zygote in bwrap mode, else workers started ahead of time) so a
snippet never waits for start-up, and :class:`SandboxPools`, the owner of the process-wide pools behind
:func:`run_python`.

Nothing here runs at import: the first :func:`run_python` creates the default :class:`SandboxPools`
(and registers its ``close`` to run at exit); a pool starts its refill threads on first use. After a
fork the child notices (its pid changed) the next time it uses a pool and starts workers of its own; the
parent's belong to the parent.
"""

from __future__ import annotations

import asyncio
import atexit
import concurrent.futures
import functools
import logging
import math
import numbers
import os
import queue
import sys
import threading
import time
from typing import Any

from gem_core.cpus import usable_cpus
from gem_core.errors import InvalidArgument, UsageError
from gem_core.tools.sandbox.config import FunctionCall, SandboxConfig, SandboxResult, SandboxUnavailableError, pool_size_from_environment, resolve_backend
from gem_core.tools.sandbox.isolation import resolve_mode
from gem_core.tools.sandbox.worker import Worker
from gem_core.tools.sandbox.zygote import Zygote

__all__ = ["MIN_MEMORY_MB", "SandboxPool", "SandboxPools", "check_memory_mb", "default_pools", "run_python", "arun_python"]

logger = logging.getLogger("gem.tools.sandbox")

MIN_MEMORY_MB = 16
"""The smallest memory limit of a sandboxed program, in MiB: below it the interpreter cannot even start."""


def check_memory_mb(name: str, value: Any) -> int:
    """A sandbox memory limit ``name`` in MiB, checked by the sandbox's own rule; envs and tools call it when they
    are made, so a bad limit fails there, not every program of every episode.

    Raises:
        InvalidArgument: if it is not a whole number of at least :data:`MIN_MEMORY_MB`.
    """
    if isinstance(value, numbers.Integral) and not isinstance(value, bool) and int(value) >= MIN_MEMORY_MB:
        return int(value)
    raise InvalidArgument(f"{name}={value!r:.80} must be a whole number of MiB, at least {MIN_MEMORY_MB} (the sandbox's smallest memory limit).")


class SandboxPool:
    """Keeps ``config.pool_size`` workers of one mode started, so a snippet never waits for start-up.

    Each worker runs one snippet and is discarded; background threads start replacements. Safe to use
    from many threads. Call :meth:`close` when done (it kills the waiting workers).
    """

    def __init__(self, mode: str, config: SandboxConfig | None = None):
        self.mode = mode
        self.config = config or SandboxConfig()
        self._ready: queue.Queue[Worker] = queue.Queue()
        self._lock = threading.Lock()
        self._wanted = threading.Event()
        self._closed = False
        self._pid = os.getpid()
        self._refillers: list[threading.Thread] = []
        # Start workers in parallel where there are cores for it (one at a time on a small machine). Counted once:
        # usable_cpus reads the cgroup's files (~0.1 ms), and a call without a zygote comes through acquire each time.
        self._refillers_wanted = max(1, min(self.config.pool_size, usable_cpus() // 2))
        self._starting = 0  # workers being started by the refill threads
        self._zygote: Zygote | None = None
        self._zygote_failure: str | None = None

    @property
    def uses_zygote(self) -> bool:
        # A zygote cannot bind a host working directory it does not see: those calls get a sandbox each.
        """Whether calls fork from a zygote: bwrap mode with ``zygote`` and a pool on, and no host working directory to
        bind.
        """
        return self.mode == "bwrap" and self.config.zygote and self.config.pool_size > 0 and self.config.work_dir is None

    def _after_fork(self) -> None:
        if self._zygote is not None:
            self._zygote.forget()
            self._zygote = None
        while True:
            try:
                self._ready.get_nowait().forget()
            except queue.Empty:
                break
        self._pid = os.getpid()
        self._refillers = []
        self._starting = 0
        self._lock = threading.Lock()
        self._wanted = threading.Event()

    def _ensure_refillers(self) -> None:
        if self._pid != os.getpid():
            self._after_fork()
        if self.config.pool_size <= 0:
            return
        with self._lock:
            self._refillers = [t for t in self._refillers if t.is_alive()]
            while len(self._refillers) < self._refillers_wanted:
                thread = threading.Thread(target=self._refill_loop, name="gem-sandbox-pool", daemon=True)
                thread.start()
                self._refillers.append(thread)
        self._wanted.set()

    def _claim_start(self) -> bool:
        """Reserve the start of one more worker if the pool is short of ``pool_size``."""
        with self._lock:
            if self._closed or self._ready.qsize() + self._starting >= self.config.pool_size:
                return False
            self._starting += 1
            return True

    def _refill_loop(self) -> None:
        while not self._closed:
            self._wanted.wait(timeout=1.0)
            while self._claim_start():
                try:
                    worker = Worker(self.mode, self.config, self.config.preload)
                    worker.wait_ready()
                except Exception:
                    worker = None
                    time.sleep(1.0)  # a failing sandbox is reported by acquire(); do not spin
                finally:
                    with self._lock:
                        self._starting -= 1
                if worker is None:
                    break
                if self._closed:
                    worker.close()
                    return
                self._ready.put(worker)
            with self._lock:
                if self._ready.qsize() + self._starting >= self.config.pool_size:
                    self._wanted.clear()

    def zygote(self) -> Zygote:
        """The pool's zygote, started on first use and again if it died.

        Raises:
            UsageError: if the pool is closed.
        """
        if self._pid != os.getpid():
            self._after_fork()
        with self._lock:
            if self._closed:
                raise UsageError("This sandbox pool is closed.")
            if self._zygote is None or not self._zygote.alive():
                if self._zygote is not None:
                    self._zygote.close()
                    self._zygote = None
                zygote = Zygote(self.config, self.config.preload)
                zygote.wait_ready()
                self._zygote = zygote
            return self._zygote

    def acquire(self) -> Worker:
        """A started worker: a waiting one if there is one, else one started now.

        A worker started on demand skips the preloads: the caller is waiting, and most snippets do not
        need them.
        """
        self._ensure_refillers()
        while True:
            try:
                worker = self._ready.get_nowait()
            except queue.Empty:
                break
            if worker.alive():
                self._wanted.set()
                return worker
            worker.close()
        worker = Worker(self.mode, self.config)
        worker.wait_ready()
        return worker

    def run(
        self, code: str, *, stdin: str = "", timeout: float = 5.0, memory_mb: int = 512, call: FunctionCall | None = None
    ) -> SandboxResult:
        """Run ``code`` in a fresh worker of this pool (see :func:`run_python`).

        Raises:
            InvalidArgument: if ``memory_mb`` is not a whole number of at least :data:`MIN_MEMORY_MB`, or ``timeout``
                is not a finite number of seconds above 0.
        """
        from gem_core.vector.calls import check_amount  # the shared rule; imported when first needed

        timeout = check_amount("timeout", timeout, "seconds")
        memory_mb = check_memory_mb("memory_mb", memory_mb)
        request = {
            "code": code,
            "stdin": stdin,
            "memory_mb": memory_mb,
            "cpu_seconds": math.ceil(timeout) + 1,
            "file_mb": self.config.max_file_mb,
            "processes": self._process_limit(),
            # Unprivileged, every process of a bwrap sandbox has one uid: the call adds what it has when the
            # snippet starts (as root each call runs as a uid of its own).
            "shared_uid": self.mode == "bwrap" and os.geteuid() != 0,
            "open_files": self.config.max_open_files,
            "call": None if call is None else {"fn_name": call.fn_name, "args": call.args},
        }
        if self.uses_zygote and self._zygote_failure is None:
            # A zygote that died between two calls, or while this one ran (the call is run again: a snippet
            # has no effect outside its sandbox), is replaced once.
            for attempt in range(2):
                try:
                    return self.zygote().run(request, timeout)
                except SandboxUnavailableError as error:
                    if attempt or (self._zygote is None and not self._closed):
                        self._give_up_on_zygote(error)
                        break
        return self.acquire().run(request, timeout)

    def _give_up_on_zygote(self, error: Exception) -> None:
        """A zygote cannot run here (its namespaces need more than a sandbox per call): isolate each
        call in a sandbox of its own instead, with the same guarantees, and say so once."""
        self._zygote_failure = str(error)
        logger.warning("The sandbox zygote cannot run here (%s); starting a sandbox per call instead.", error)

    def _process_limit(self) -> int:
        if os.geteuid() == 0:
            return self.config.max_processes
        if self.mode == "process":
            # Without a user namespace the limit counts every process of this user, not just the snippet's.
            return _processes_of_current_user() + self.config.max_processes
        # bwrap: the call adds the sandbox's processes when its snippet starts (in_sandbox._apply_limits); a
        # zygote forks the pool's waiting calls (an init and a process each, and a short-lived helper that
        # makes a network namespace) while the snippet runs, so room for a full pool is kept on top.
        return self.config.max_processes + (2 * self.config.pool_size + 1 if self.uses_zygote else 0)

    def close(self) -> None:
        """Stop refilling and kill the waiting workers (and the zygote)."""
        self._closed = True
        self._wanted.set()
        if self._pid != os.getpid():
            self._after_fork()
            return
        with self._lock:
            zygote, self._zygote = self._zygote, None
        if zygote is not None:
            zygote.close()
        while True:
            try:
                self._ready.get_nowait().close()
            except queue.Empty:
                break


def _processes_of_current_user() -> int:
    uid, count = os.getuid(), 0
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                count += len(os.listdir(f"/proc/{entry.name}/task")) if entry.stat().st_uid == uid else 0
            except OSError:
                continue
    return count


class SandboxPools:
    """One :class:`SandboxPool` per mode and interpreter, created when first asked for, and the thread
    executor async callers wait in; :meth:`close` shuts all of it down.

    Args:
        pool_size: warm workers per pool (default: ``$GEM_SANDBOX_POOL``, else 4).
    """

    def __init__(self, pool_size: int | None = None):
        self.pool_size = pool_size_from_environment() if pool_size is None else pool_size
        self._pools: dict[tuple[str, str], SandboxPool] = {}
        self._lock = threading.Lock()
        self._pid = os.getpid()
        self._executor: concurrent.futures.ThreadPoolExecutor | None = None

    def _check_fork(self) -> None:
        if self._pid != os.getpid():  # a forked child: the lock may have been held by a parent's thread
            self._lock = threading.Lock()
            self._executor = None
            self._pid = os.getpid()

    def pool(self, mode: str | None = None) -> SandboxPool:
        """The pool for ``mode`` (resolved by :func:`~gem_core.tools.sandbox.resolve_mode`)."""
        resolved = resolve_mode(mode)
        self._check_fork()
        key = (resolved, sys.executable)
        with self._lock:
            pool = self._pools.get(key)
            if pool is None:
                pool = self._pools[key] = SandboxPool(resolved, SandboxConfig(pool_size=self.pool_size))
            return pool

    def executor(self) -> concurrent.futures.ThreadPoolExecutor:
        # A dedicated executor: the loop's default one has few threads and other work may fill it.
        """The thread pool that runs blocking sandbox calls for async callers (64 threads, started on first use)."""
        self._check_fork()
        with self._lock:
            if self._executor is None:
                self._executor = concurrent.futures.ThreadPoolExecutor(max_workers=64, thread_name_prefix="gem-sandbox")
            return self._executor

    def close(self) -> None:
        """Kill every waiting worker and stop the executor (running snippets finish first)."""
        self._check_fork()
        with self._lock:
            pools, self._pools = list(self._pools.values()), {}
            executor, self._executor = self._executor, None
        for pool in pools:
            pool.close()
        if executor is not None:
            executor.shutdown(wait=False, cancel_futures=True)


_default: SandboxPools | None = None
_default_lock = threading.Lock()


def default_pools() -> SandboxPools:
    """The process-wide :class:`SandboxPools` behind :func:`run_python`, created on first use."""
    global _default
    if _default is None:
        with _default_lock:
            if _default is None:
                _default = SandboxPools()
                atexit.register(_default.close)
    return _default


def run_python(
    code: str,
    *,
    stdin: str = "",
    timeout: float = 5.0,
    memory_mb: int = 512,
    mode: str | None = None,
    call: FunctionCall | None = None,
    backend: str | None = None,
) -> SandboxResult:
    """Run a Python snippet in the sandbox and return what it did. Never raises for the snippet's sake.

    Args:
        code: the program, run as ``__main__``.
        stdin: text the program reads on standard input.
        timeout: wall-clock seconds before the sandbox is killed (``timed_out=True``, ``limit="time"``).
        memory_mb: memory limit in MiB, for each process (the address space it maps beyond the
            interpreter's own, preloads included) and for all of the snippet's processes together
            (resident memory, sampled by the host).
        mode: ``"bwrap"`` (default) or ``"process"``; None reads ``$GEM_SANDBOX``.
        call: a function to call after the program ran; its return value comes back in
            :attr:`SandboxResult.returned`.
        backend: ``"local"`` or ``"ray"`` (a labelled Ray node runs it, :mod:`.ray_pool`); None reads
            ``$GEM_SANDBOX_BACKEND`` (default local).

    Raises:
        SandboxUnavailableError: the mode cannot run on this machine (see :func:`resolve_mode`).
        InvalidArgument: ``timeout`` is not a finite number of seconds above 0, or ``memory_mb`` is not a whole
            number of at least :data:`MIN_MEMORY_MB`.
    """
    if resolve_backend(backend) == "ray":
        from gem_core.tools.sandbox.ray_pool import default_ray_pool

        return default_ray_pool().run_python(code, stdin=stdin, timeout=timeout, memory_mb=memory_mb, mode=mode, call=call)
    return run_python_here(code, stdin=stdin, timeout=timeout, memory_mb=memory_mb, mode=mode, call=call)


def run_python_here(
    code: str, *, stdin: str = "", timeout: float = 5.0, memory_mb: int = 512, mode: str | None = None, call: FunctionCall | None = None
) -> SandboxResult:
    """:func:`run_python` in this machine's pools whatever ``$GEM_SANDBOX_BACKEND`` says: what a Ray sandbox
    node runs for a snippet sent to it (never routed back to Ray)."""
    return default_pools().pool(mode).run(code, stdin=stdin, timeout=timeout, memory_mb=memory_mb, call=call)


async def arun_python(
    code: str,
    *,
    stdin: str = "",
    timeout: float = 5.0,
    memory_mb: int = 512,
    mode: str | None = None,
    call: FunctionCall | None = None,
    backend: str | None = None,
) -> SandboxResult:
    """:func:`run_python` for async callers: waits in a thread (or on the Ray actor), never blocks the event loop.

    Raises:
        SandboxUnavailableError: as :func:`run_python`.
        InvalidArgument: as :func:`run_python` (a bad ``timeout`` or ``memory_mb``).
    """
    if resolve_backend(backend) == "ray":
        from gem_core.tools.sandbox.ray_pool import default_ray_pool

        pool = await asyncio.to_thread(default_ray_pool)  # the first call finds the nodes
        return await pool.arun_python(code, stdin=stdin, timeout=timeout, memory_mb=memory_mb, mode=mode, call=call)
    loop = asyncio.get_running_loop()
    run = functools.partial(run_python, code, stdin=stdin, timeout=timeout, memory_mb=memory_mb, mode=mode, call=call)
    return await loop.run_in_executor(default_pools().executor(), run)
