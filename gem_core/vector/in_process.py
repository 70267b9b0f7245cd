"""Backends whose envs live in this process: ``sync``, ``thread`` and ``async``.

Envs that declare ``blocking = False`` (the games) are stepped inline in the caller's thread on every
one of these backends: a hop to a pool thread or an event-loop task costs far more than such a step.

``step_timeout``: a step or reset that has not returned after that many seconds comes back as a
:class:`~gem_core.vector.calls.Failure` with error :data:`~gem_core.vector.calls.TIMEOUT`; the env is
dropped (a Python thread cannot be stopped, so the call is left to finish on its own and the env is
closed when it does) and rebuilt from its builder before its next call. To be timed, a call runs in a
thread even on the ``sync`` backend and for non-blocking envs.

``close()`` is safe at any time, from any thread: calls in flight get ``timeout`` seconds to finish
(default :data:`CLOSE_TIMEOUT`), then the batch returns with :data:`~gem_core.vector.calls.CLOSED`
failures for the rest. On the ``sync`` backend the call running in the caller's thread cannot be cut
off; the envs after it in the batch are not called.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import gymnasium as gym

from gem_core.env import ENV_THREADS
from gem_core.errors import UsageError
from gem_core.vector.calls import (
    CLOSED,
    TIMEOUT,
    Call,
    EnvBuilder,
    EnvCall,
    Failure,
    Step,
    arun_call,
    build_envs,
    check_count,
    check_step_timeout,
    describe_exception,
    never_blocks,
    run_call,
)

__all__ = ["SyncBackend", "ThreadBackend", "AsyncBackend", "CLOSE_TIMEOUT"]

CLOSE_TIMEOUT = 5.0
"""Seconds ``close()`` lets calls in flight finish before cutting them off."""


def _as_failure(exc: BaseException) -> Failure:
    """An env's exception as a result. ``KeyboardInterrupt`` is the user's, not the env's: it propagates.
    ``SystemExit`` and other ``BaseException``s from an env are env errors like any other."""
    if isinstance(exc, KeyboardInterrupt):
        raise exc
    return Failure(describe_exception(exc))


class _BatchWaiter:
    """Counts the calls of one batch still running; wakes the waiting thread when all are done or
    when ``close()`` aborts the batch."""

    def __init__(self, count: int):
        self._left = count
        self._done = threading.Event()
        self._lock = threading.Lock()
        self.aborted = False
        if count == 0:
            self._done.set()

    def one_done(self, _: Any = None) -> None:
        with self._lock:
            self._left -= 1
            if self._left == 0:
                self._done.set()

    def abort(self) -> None:
        self.aborted = True
        self._done.set()

    def wait(self, timeout: float | None) -> None:
        self._done.wait(timeout)


class _InProcessBackend:
    """Envs built in this process; subclasses choose how calls are scheduled."""

    def __init__(self, env_fns: Sequence[EnvBuilder], step_timeout: float | None = None):
        self.step_timeout = check_step_timeout(step_timeout)
        self._builders = list(env_fns)
        self._batch_lock = threading.Lock()  # one batch at a time; close() waits on it
        self._closing = False
        self._closed = False
        self._in_use: set[int] = set()  # envs with a call running (maybe abandoned after a timeout)
        self._env_lock = threading.Lock()
        self._waiter: _BatchWaiter | None = None
        self._interrupted: dict[int, str] = {}  # env index -> why its episode ended with a cut-off call
        # The previous env objects whose timed-out calls are still running, closed when they return.
        self._pool: ThreadPoolExecutor | None = None
        # A builder's exception propagates as itself, the envs built before it closed.
        self.envs: list[gym.Env | None] = list(build_envs(dict(enumerate(self._builders))).values())
        self.num_envs = len(self.envs)
        self._inline = [never_blocks(env) for env in self.envs]

    # --- env lifecycle ------------------------------------------------------------------------------

    def _env(self, index: int) -> gym.Env:
        env = self.envs[index]
        if env is None:  # dropped after a timeout: build a fresh one
            env = self.envs[index] = self._builders[index]()
        return env

    def _drop_env(self, index: int, running: Sequence[Future | asyncio.Future] = ()) -> None:
        """Forget env ``index`` (its call timed out or was cut off): it is rebuilt before its next call, and closed
        once ``running`` (the call's thread futures, its task) are all done, never under its call."""
        with self._env_lock:
            old, self.envs[index] = self.envs[index], None
        if old is not None:
            _close_when_done(old, running)

    def _release(self, index: int) -> None:
        """Env ``index``'s call has returned. ``close()`` leaves a busy env to its call: close it if that ran meanwhile."""
        with self._env_lock:
            self._in_use.discard(index)
            orphan = None
            if self._closed:
                orphan, self.envs[index] = self.envs[index], None
        if orphan is not None:
            _close_quietly(orphan)

    def _close_envs(self) -> None:
        for i in range(len(self.envs)):
            with self._env_lock:
                if i in self._in_use:
                    continue  # its call closes it when it returns (see _release)
                env, self.envs[i] = self.envs[i], None
            if env is not None:
                _close_quietly(env)

    def _end_episodes(self, calls: Mapping[int, EnvCall], cause: BaseException) -> None:
        """The batch ``calls`` was cut short by ``cause`` (Ctrl-C, a cancelled ``astep``): the results of the calls
        that had returned are lost with it, so each env's next step ends its episode (``truncated``,
        ``info["error"]`` starting with ``Interrupted``) instead of going on from a state the caller never saw.
        A more precise reason set already (the env was rebuilt) is kept."""
        for i in calls:
            self._interrupted.setdefault(
                i, f"Interrupted: the batch calling this env was interrupted ({type(cause).__name__}); its result was lost and the episode in progress ended."
            )

    # --- running calls ------------------------------------------------------------------------------

    def _timed(self, call: EnvCall) -> bool:
        return self.step_timeout is not None and not isinstance(call, Call)

    def _claim(self, index: int) -> bool:
        """Mark env ``index`` busy (``close`` leaves a busy env to its call); False once closing began."""
        with self._env_lock:
            if self._closing:
                return False
            self._in_use.add(index)
            return True

    def _run_one(self, index: int, call: EnvCall) -> Any:
        lost = self._interrupted.pop(index, None)
        if lost is not None and isinstance(call, Step):
            return Failure(lost, env_replaced=True)
        if not self._claim(index):
            return Failure(CLOSED)
        try:
            env = self._env(index)
            return run_call(env, call)
        except BaseException as exc:  # an env's bug must not take the other envs down
            return _as_failure(exc)
        finally:
            self._release(index)

    def _executor(self) -> ThreadPoolExecutor:
        if self._pool is None:
            self._pool = ThreadPoolExecutor(max_workers=self._max_threads(), thread_name_prefix="gem-vector")
        return self._pool

    def _max_threads(self) -> int:
        return self.num_envs

    def _run_in_threads(self, calls: Mapping[int, EnvCall]) -> dict[int, Any]:
        """Run ``calls`` concurrently in the pool; timed calls not done by the deadline are abandoned."""
        waiter = self._waiter = _BatchWaiter(len(calls))
        pool = self._executor()
        futures: dict[int, Future] = {}
        for i, call in calls.items():
            futures[i] = pool.submit(self._run_one, i, call)
            futures[i].add_done_callback(waiter.one_done)
        timed = any(self._timed(call) for call in calls.values())
        deadline = time.monotonic() + self.step_timeout if timed and self.step_timeout else None
        try:
            waiter.wait(None if deadline is None else max(0.0, deadline - time.monotonic()))
        except BaseException:  # Ctrl-C while the calls run
            self._waiter = None
            self._cut_off(futures, pool)
            raise
        self._waiter = None
        results: dict[int, Any] = {}
        abandoned = False
        for i, future in futures.items():
            if future.done() and not future.cancelled():
                results[i] = future.result()
            elif waiter.aborted:
                future.cancel()
                results[i] = Failure(CLOSED)
            else:
                results[i] = Failure(TIMEOUT, env_replaced=True)
                self._drop_env(i, [future])
                abandoned = True
        if abandoned:
            # The timed-out calls hold pool threads; later batches get a fresh pool of full size.
            self._pool = None
            pool.shutdown(wait=False)
        return results

    def _cut_off(self, futures: Mapping[int, Future], pool: ThreadPoolExecutor) -> None:
        """End the episodes of a batch the caller gave up on (Ctrl-C). A call running in a thread cannot be stopped:
        its env is dropped, closed when the call returns and rebuilt before its next call, so no env ever runs two
        calls at once (the next batch's call for it was started beside the running one). The batch's results are
        lost with it, so each of its envs' next step ends the episode (``truncated``, ``info["error"]`` starting
        with ``Interrupted``), as the async backend's do."""
        abandoned = False
        for i, future in futures.items():
            if not future.cancel() and not future.done():
                self._drop_env(i, [future])
                abandoned = True
            self._interrupted[i] = (
                "Interrupted: the env's call was interrupted (KeyboardInterrupt); the env was rebuilt and the episode in progress ended."
            )
        if abandoned:  # the running calls hold pool threads: later batches get a fresh pool of full size
            self._pool = None
            pool.shutdown(wait=False)

    def run(self, calls: Mapping[int, EnvCall]) -> dict[int, Any]:
        with self._batch_lock:
            self._check_open()
            try:
                return self._run(calls)
            except KeyboardInterrupt as exc:  # from an env called in this thread, or while the batch's threads ran
                self._end_episodes(calls, exc)
                raise

    def _run(self, calls: Mapping[int, EnvCall]) -> dict[int, Any]:
        raise NotImplementedError

    async def arun(self, calls: Mapping[int, EnvCall]) -> dict[int, Any]:
        return await asyncio.to_thread(self.run, calls)

    def _check_open(self) -> None:
        if self._closed or self._closing:
            raise UsageError("This vector env is closed; make a new one with make_vec(...).")

    # --- closing ------------------------------------------------------------------------------------

    def close(self, timeout: float | None = None) -> None:
        """Close the envs; calls in flight get ``timeout`` seconds (default :data:`CLOSE_TIMEOUT`)."""
        if self._closed:
            return
        with self._env_lock:
            self._closing = True
        grace = CLOSE_TIMEOUT if timeout is None else timeout
        got_lock = self._batch_lock.acquire(timeout=grace)
        if not got_lock:
            self._abort_batch()
            # A batch running inline in another thread (sync) cannot be cut off: do not wait for it.
            got_lock = self._batch_lock.acquire(timeout=1.0)
        try:
            with self._env_lock:
                self._closed = True
            self._shutdown()
            self._close_envs()
        finally:
            if got_lock:
                self._batch_lock.release()

    def _abort_batch(self) -> None:
        waiter = self._waiter
        if waiter is not None:
            waiter.abort()

    def _shutdown(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)
            self._pool = None


def _close_quietly(env: gym.Env) -> None:
    try:
        env.close()
    except Exception:  # noqa: BLE001 - closing is best effort; the env is being dropped
        pass


def _close_when_done(env: gym.Env, running: Sequence[Future | asyncio.Future]) -> None:
    """Close ``env`` once every one of ``running`` is done (at once if none runs), in whichever thread ends last."""
    pending = [part for part in running if not part.done()]
    if not pending:
        _close_quietly(env)
        return
    left = len(pending)
    lock = threading.Lock()

    def one_done(_: Any) -> None:
        nonlocal left
        with lock:
            left -= 1
            last = left == 0
        if last:
            _close_quietly(env)

    for part in pending:
        part.add_done_callback(one_done)


class SyncBackend(_InProcessBackend):
    """Calls the envs one after another in the caller's thread (with ``step_timeout``: one at a time
    in a helper thread, so a call can be given up on)."""

    def _max_threads(self) -> int:
        return 1

    def _run(self, calls: Mapping[int, EnvCall]) -> dict[int, Any]:
        results: dict[int, Any] = {}
        for i, call in calls.items():
            if self._timed(call):
                results.update(self._run_in_threads({i: call}))
            else:
                results[i] = self._run_one(i, call)
        return results


class ThreadBackend(_InProcessBackend):
    """Calls the envs concurrently from a thread pool (``max_workers`` threads, default one per env);
    envs declaring ``blocking = False`` are called inline instead.

    A batch cut short by Ctrl-C ends its envs' episodes, and an env whose call runs on in its thread is rebuilt
    before its next call rather than called twice at once (as :class:`AsyncBackend` does).

    Args:
        env_fns: one function per env that builds it.
        max_workers: threads in the pool (default one per env).
        step_timeout: seconds a call may take before its result is a timeout error (None: no limit).

    Raises:
        InvalidArgument: if ``max_workers`` is not a whole number from 1, or None.
    """

    def __init__(self, env_fns: Sequence[EnvBuilder], max_workers: int | None = None, step_timeout: float | None = None):
        # Checked before the envs are built: the pool, made at the first step, would refuse it only then.
        self._max_workers = None if max_workers is None else check_count("max_workers", max_workers, none_means="one thread per env")
        super().__init__(env_fns, step_timeout=step_timeout)

    def _max_threads(self) -> int:
        return self.num_envs if self._max_workers is None else self._max_workers

    def _run(self, calls: Mapping[int, EnvCall]) -> dict[int, Any]:
        inline = {i: c for i, c in calls.items() if not self._timed(c) and (self._inline[i] or isinstance(c, Call))}
        pooled = {i: c for i, c in calls.items() if i not in inline}
        if len(pooled) == 1 and not self._timed(next(iter(pooled.values()))):
            inline.update(pooled)  # one blocking call: nothing to overlap it with
            pooled = {}
        results = {i: self._run_one(i, c) for i, c in inline.items()}
        if pooled:
            results.update(self._run_in_threads(pooled))
        return {i: results[i] for i in calls}


class AsyncBackend(_InProcessBackend):
    """Drives the envs with ``asyncio.gather`` over ``astep``/``areset`` (envs declaring
    ``blocking = False`` are called inline).

    :meth:`run` (used by ``VectorEnv.step``) runs the batch on a private event loop that lives as long
    as the backend; from inside a running loop use ``await vec.astep(...)`` instead.

    A batch cut short (Ctrl-C in :meth:`run`, a cancelled ``astep``) drops the envs whose calls had not
    returned: a call running in a thread cannot be stopped, so the env is rebuilt before its next call
    rather than called twice at once, and its next step ends the episode (``truncated``, ``info["error"]``
    starting with ``Interrupted``).

    Args:
        env_fns: one function per env that builds it.
        step_timeout: seconds a call may take before its result is a timeout error (None: no limit).
    """

    def __init__(self, env_fns: Sequence[EnvBuilder], step_timeout: float | None = None):
        super().__init__(env_fns, step_timeout=step_timeout)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._tasks: list[asyncio.Task] = []

    async def _arun_one(self, index: int, call: EnvCall) -> Any:
        lost = self._interrupted.pop(index, None)
        if lost is not None and isinstance(call, Step):
            return Failure(lost, env_replaced=True)
        if not self._claim(index):
            return Failure(CLOSED)
        task: asyncio.Future | None = None
        # The env's calls in pool threads: a cancel leaves them running, and the env is closed only after them.
        with ENV_THREADS.watching() as threads:
            try:
                env = self._env(index)
                if not self._timed(call):
                    return await arun_call(env, call)
                task = asyncio.ensure_future(arun_call(env, call))
                done, _ = await asyncio.wait({task}, timeout=self.step_timeout)
                if task in done:
                    return task.result()
                task.cancel()  # a native astep stops here; a step in a thread finishes on its own
                self._drop_env(index, [task, *threads])  # rebuilt before its next call
                return Failure(TIMEOUT, env_replaced=True)
            except (asyncio.CancelledError, KeyboardInterrupt) as exc:
                if task is not None:
                    task.cancel()
                # Its call may run on in a thread: the next one goes to a fresh env.
                self._drop_env(index, [*([task] if task is not None else []), *threads])
                if self._closing and isinstance(exc, asyncio.CancelledError):
                    return Failure(CLOSED)
                self._interrupted[index] = (
                    f"Interrupted: the env's call was interrupted ({type(exc).__name__}); the env was rebuilt and the episode in progress ended."
                )
                raise
            except BaseException as exc:
                return _as_failure(exc)
            finally:
                self._release(index)  # close() during the call left the env to it

    def _inline_calls(self, calls: Mapping[int, EnvCall]) -> dict[int, EnvCall]:
        return {i: c for i, c in calls.items() if isinstance(c, Call) or (self._inline[i] and not self._timed(c))}

    async def _arun(self, calls: Mapping[int, EnvCall]) -> dict[int, Any]:
        inline = self._inline_calls(calls)
        results = {i: self._run_one(i, c) for i, c in inline.items()}
        rest = [i for i in calls if i not in inline]
        if rest:
            self._tasks = [asyncio.ensure_future(self._arun_one(i, calls[i])) for i in rest]
            try:
                results.update(zip(rest, await asyncio.gather(*self._tasks), strict=True))
            finally:
                self._tasks = []
        return {i: results[i] for i in calls}

    async def arun(self, calls: Mapping[int, EnvCall]) -> dict[int, Any]:
        """Run the calls on the caller's event loop (blocking envs in threads).

        Raises:
            UsageError: if the vector env is closed.
        """
        self._check_open()
        try:
            return await self._arun(calls)
        except (asyncio.CancelledError, KeyboardInterrupt) as exc:  # the inline calls' results are lost too
            self._end_episodes(calls, exc)
            raise

    def _run(self, calls: Mapping[int, EnvCall]) -> dict[int, Any]:
        if len(self._inline_calls(calls)) == len(calls):
            return {i: self._run_one(i, c) for i, c in calls.items()}  # no event loop needed
        if _loop_is_running():
            raise UsageError(
                "VectorEnv.step()/reset() with backend='async' was called from a running event loop; "
                "use `await vec.astep(actions)` / `await vec.areset()` there instead."
            )
        if self._loop is None:
            self._loop = asyncio.new_event_loop()
        batch = self._loop.create_task(self._arun(calls))
        try:
            return self._loop.run_until_complete(batch)
        except BaseException:  # Ctrl-C: the batch's tasks would resume at the next run, beside its calls
            self._cancel(self._loop, [batch, *self._tasks])
            raise

    @staticmethod
    def _cancel(loop: asyncio.AbstractEventLoop, tasks: list[asyncio.Task]) -> None:
        """Cancel ``tasks`` and run ``loop`` until they have ended (each drops its env, see ``_arun_one``)."""
        for task in tasks:
            task.cancel()
        loop.run_until_complete(asyncio.gather(*tasks, return_exceptions=True))

    def _abort_batch(self) -> None:
        loop = self._loop
        if loop is not None and loop.is_running():
            loop.call_soon_threadsafe(lambda: [task.cancel() for task in self._tasks])

    def _shutdown(self) -> None:
        loop, self._loop = self._loop, None
        if loop is not None and not loop.is_running() and not loop.is_closed():
            # The calls a step timeout gave up on wait for the loop to end them; then their envs can be closed.
            leftover = list(asyncio.all_tasks(loop))
            if leftover:
                _off_this_loop(lambda: self._cancel(loop, leftover))
            loop.close()
        super()._shutdown()


def _loop_is_running() -> bool:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


def _off_this_loop(work: Any) -> None:
    """Run ``work`` (which runs an event loop of its own) here, or in a helper thread when this thread is inside a
    running event loop, where another loop cannot run."""
    if not _loop_is_running():
        work()
        return
    helper = threading.Thread(target=work, name="gem-vector-close")
    helper.start()
    helper.join()
