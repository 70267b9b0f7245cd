"""Running a coroutine to completion from synchronous code.

Sync entry points (a tool's ``execute``, TRL's ``rollout_func``, a remote env's ``close``) drive async
code; when their caller already runs an event loop in this thread (a notebook, an async trainer),
``asyncio.run`` refuses, so the coroutine runs on a fresh loop in a helper thread instead.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, TypeVar

__all__ = ["run_sync"]

T = TypeVar("T")


def run_sync(make_coroutine: Callable[[], Coroutine[Any, Any, T] | Awaitable[T]]) -> T:
    """Run the coroutine ``make_coroutine()`` to completion, also when this thread already runs an event loop."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(make_coroutine())  # type: ignore[arg-type]
    with concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="gem-sync") as pool:
        return pool.submit(lambda: asyncio.run(make_coroutine())).result()  # type: ignore[arg-type]
