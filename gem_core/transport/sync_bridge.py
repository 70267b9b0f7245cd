"""Running a coroutine to completion from synchronous code.

Sync entry points (a tool's ``execute``, TRL's ``rollout_func``, a remote env's ``close``) drive async
code; when their caller already runs an event loop in this thread (a notebook, an async trainer),
``asyncio.run`` refuses, so the coroutine runs on a fresh loop in a helper thread instead.

Objects whose async resources belong to one loop (a remote env's connections, an MCP session, a judge's
connection pool) keep a :class:`LoopThread` instead: one private loop that sync callers on any thread
wait on and async callers on any loop await.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, TypeVar

__all__ = ["run_sync", "LoopThread"]

T = TypeVar("T")

#: Seconds an interrupted :meth:`LoopThread.run` waits for its cancelled coroutine's cleanup.
CANCEL_GRACE = 5.0


def run_sync(make_coroutine: Callable[[], Coroutine[Any, Any, T] | Awaitable[T]]) -> T:
    """Run the coroutine ``make_coroutine()`` to completion, also when this thread already runs an event loop."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(make_coroutine())  # type: ignore[arg-type]
    with concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="gem-sync") as pool:
        return pool.submit(lambda: asyncio.run(make_coroutine())).result()  # type: ignore[arg-type]


class LoopThread:
    """An event loop running forever on a daemon thread of its own, started at construction.

    Args:
        name: the thread's name (shows in thread dumps and leak checks).
    """

    def __init__(self, name: str) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name=name, daemon=True)
        self.thread.start()

    def submit(self, coroutine: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:
        """Schedule ``coroutine`` on the loop; wait on the future (or ``asyncio.wrap_future`` it)."""
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop)

    def run(self, make_coroutine: Callable[[], Awaitable[T]], timeout: float | None = None) -> T:
        """Run ``make_coroutine()`` on the loop and wait for its result (at most ``timeout`` seconds).

        A wait ended early (Ctrl-C, the timeout) cancels the coroutine: left running, it would finish unseen
        (a remote step applied after the caller gave up on it). Its cleanup gets :data:`CANCEL_GRACE`
        seconds to finish before the interruption reaches the caller.
        """
        started, finished = threading.Event(), threading.Event()

        async def call() -> T:
            started.set()
            try:
                return await make_coroutine()
            finally:
                finished.set()

        future = self.submit(call())
        try:
            return future.result(timeout)
        except BaseException:
            if future.cancel() and started.is_set():  # a coroutine cancelled before it started has nothing to clean up
                finished.wait(CANCEL_GRACE)
            raise

    def stop(self, timeout: float = 10.0) -> None:
        """Stop the loop and close it once its thread has ended; safe to call twice. A thread still busy
        after ``timeout`` seconds keeps its loop open (closing a running loop raises)."""
        if not self.loop.is_closed():
            self.loop.call_soon_threadsafe(self.loop.stop)
        if threading.current_thread() is not self.thread:
            self.thread.join(timeout)
        if not self.loop.is_closed() and not self.thread.is_alive():
            self.loop.close()
