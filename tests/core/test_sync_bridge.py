"""gem_core.transport.sync_bridge: sync code driving async code, on a fresh loop or on a long-lived private one."""

from __future__ import annotations

import asyncio
import threading

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
