"""A RemoteEnv used only through ``areset``/``astep`` and dropped without ``close()`` lets its server session go,
as one used through ``reset``/``step`` does: it held the session until the process exited."""

from __future__ import annotations

import asyncio
import gc

import pytest

pytest.importorskip("httpx")
pytest.importorskip("uvicorn")

from serve_waits import sessions, wait_for

from gem_core.serve.remote import RemoteEnv


def test_an_async_remote_env_dropped_after_its_loop_ended_ends_its_session(start_server):
    server = start_server("game:GuessTheNumber-v0")

    async def play() -> RemoteEnv:
        env = RemoteEnv(server.url, "game:GuessTheNumber-v0", timeout=10)
        await env.areset(seed=0)
        await env.astep("\\boxed{3}")
        return env

    env = asyncio.run(play())
    assert sessions(server.url) == 1
    del env
    gc.collect()
    assert wait_for(lambda: sessions(server.url) == 0, 5), "the dropped async env's session is still held"


def test_an_async_remote_env_dropped_on_its_running_loop_ends_its_session_without_blocking_it(start_server):
    server = start_server("game:GuessTheNumber-v0")

    async def play() -> bool:
        for seed in range(3):
            env = RemoteEnv(server.url, "game:GuessTheNumber-v0", timeout=10)
            await env.areset(seed=seed)
            await env.astep("\\boxed{3}")
            del env
        gc.collect()
        # The sessions end on this loop, so it must keep running while the server is asked.
        return await asyncio.to_thread(wait_for, lambda: sessions(server.url) == 0, 5)

    assert asyncio.run(play()), "the dropped async envs' sessions are still held"


def test_an_async_remote_env_closed_with_aclose_and_reopened_is_still_released(start_server):
    server = start_server("game:GuessTheNumber-v0")

    async def play() -> RemoteEnv:
        env = RemoteEnv(server.url, "game:GuessTheNumber-v0", timeout=10)
        await env.areset(seed=0)
        await env.aclose()
        await env.areset(seed=1)  # a new session after aclose(): dropping the env must end this one too
        return env

    env = asyncio.run(play())
    assert sessions(server.url) == 1
    del env
    gc.collect()
    assert wait_for(lambda: sessions(server.url) == 0, 5)
