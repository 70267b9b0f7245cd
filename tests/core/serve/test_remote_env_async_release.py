"""A RemoteEnv used only through ``areset``/``astep`` and dropped without ``close()`` lets its server session go,
as one used through ``reset``/``step`` does: it held the session until the process exited."""

from __future__ import annotations

import asyncio
import gc
import subprocess
import sys
import textwrap

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


def test_an_async_remote_env_left_in_the_coroutine_asyncio_run_ran_ends_its_session(start_server):
    # The most ordinary async use: the env is a local of main(), collected as main() returns, on the loop that
    # asyncio.run then shuts down, cancelling the task that was to end the session before it sent its DELETE.
    server = start_server("game:GuessTheNumber-v0")
    script = textwrap.dedent(f"""
        import asyncio
        from gem_core.serve.remote import RemoteEnv

        async def main():
            env = RemoteEnv({server.url!r}, "game:GuessTheNumber-v0", timeout=10)
            await env.areset(seed=0)
            await env.astep("\\\\boxed{{3}}")

        asyncio.run(main())
        print("ran", flush=True)
    """)
    done = subprocess.run([sys.executable, "-W", "always::ResourceWarning", "-c", script], capture_output=True, text=True,
                          timeout=60)
    assert "ran" in done.stdout, done.stderr
    assert wait_for(lambda: sessions(server.url) == 0, 5), "the session is still held after the process exited"
    assert "ResourceWarning" not in done.stderr, done.stderr


def test_an_async_remote_env_left_in_the_coroutine_asyncio_run_ran_ends_its_session_before_exit(start_server):
    # A program that calls asyncio.run again and again must not pile up sessions until it exits.
    server = start_server("game:GuessTheNumber-v0")

    async def main() -> None:
        env = RemoteEnv(server.url, "game:GuessTheNumber-v0", timeout=10)
        await env.areset(seed=0)
        await env.astep("\\boxed{3}")

    for _ in range(3):
        asyncio.run(main())
    gc.collect()
    assert wait_for(lambda: sessions(server.url) == 0, 5), "the sessions are held until the process exits"


def test_an_async_remote_env_left_in_a_finished_coroutine_ends_its_session_while_the_loop_runs_on(start_server):
    server = start_server("game:GuessTheNumber-v0")

    async def play() -> None:
        env = RemoteEnv(server.url, "game:GuessTheNumber-v0", timeout=10)
        await env.areset(seed=0)
        await env.astep("\\boxed{3}")

    async def main() -> bool:
        await play()  # its env is dropped here, on this loop, which goes on running
        return await asyncio.to_thread(wait_for, lambda: sessions(server.url) == 0, 5)

    assert asyncio.run(main()), "the dropped env's session is still held while its loop runs on"
