"""gem_core.transport.sync_bridge: sync code driving async code, on a fresh loop or on a long-lived private one."""

from __future__ import annotations

import asyncio
import os
import signal
import threading

import pytest

from gem_core.transport.sync_bridge import LoopThread, run_sync


def test_run_sync_works_inside_a_running_loop():
    async def inner() -> int:
        return run_sync(lambda: asyncio.sleep(0, result=7))

    assert asyncio.run(inner()) == 7


def test_a_loop_thread_keeps_one_loop_for_every_caller_and_stop_ends_it():
    loops = LoopThread("gem-test-loop")

    async def which_loop() -> asyncio.AbstractEventLoop:
        return asyncio.get_running_loop()

    seen = [loops.run(which_loop)]
    worker = threading.Thread(target=lambda: seen.append(loops.run(which_loop)))
    worker.start()
    worker.join(10)
    seen.append(asyncio.run(_await(loops, which_loop)))  # an async caller on another loop awaits it
    assert len(seen) == 3 and all(loop is loops.loop for loop in seen)
    assert loops.thread.name == "gem-test-loop" and loops.thread.daemon
    loops.stop()
    loops.stop()  # twice is harmless
    assert not loops.thread.is_alive() and loops.loop.is_closed()


async def _await(loops: LoopThread, make):
    return await asyncio.wrap_future(loops.submit(make()))


def test_a_run_interrupted_by_ctrl_c_cancels_its_coroutine_and_lets_its_cleanup_finish():
    loops = LoopThread("gem-test-loop")
    events: list[str] = []

    async def slow() -> None:
        try:
            await asyncio.sleep(5)
            events.append("finished")
        except asyncio.CancelledError:
            await asyncio.sleep(0.2)  # cleanup that awaits, as a remote env ending its session does
            events.append("cleaned up")
            raise

    previous = signal.signal(signal.SIGINT, signal.default_int_handler)  # a shell's `&` job ignores SIGINT
    timer = threading.Timer(0.3, os.kill, (os.getpid(), signal.SIGINT))
    try:
        timer.start()
        with pytest.raises(KeyboardInterrupt):
            loops.run(slow)
    finally:
        timer.join()
        signal.signal(signal.SIGINT, previous)
    assert events == ["cleaned up"]  # not left running on the loop thread, to finish unseen later
    loops.stop()
    assert not loops.thread.is_alive()
