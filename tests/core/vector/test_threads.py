"""Who runs an env's step: the env thread pool (created on first use, shut down explicitly) for
blocking envs, the caller's thread for envs that declare ``blocking = False`` (issue 13 item 6, issue
23 item 2)."""

from __future__ import annotations

import subprocess
import sys
import threading
from typing import Any

import pytest

from gem_core.env import ENV_THREADS, Env, EnvThreadPool
from gem_core.vector import make_vec


class ThreadRecorder(Env):
    """Records the name of the thread each step runs in."""

    blocking = True

    def __init__(self):
        self.threads: list[str] = []

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        super().reset(seed=seed)
        return "start", {}

    def step(self, action: str):
        self.threads.append(threading.current_thread().name)
        return "ok", 0.0, False, False, {}

    def sample_random_action(self) -> str:
        return "a"


class QuickRecorder(ThreadRecorder):
    blocking = False


def test_importing_gem_core_starts_no_pool_and_shutdown_stops_its_threads():
    script = """
import asyncio, threading
import gem_core, gem_core.env
from gem_core.env import ENV_THREADS
from gem_core.envs.game.guess_the_number import GuessTheNumber
assert not ENV_THREADS.started, "a pool was created at import"
env = GuessTheNumber()
env.reset(seed=0)
asyncio.run(env.astep("\\\\boxed{3}"))
assert not ENV_THREADS.started, "a non-blocking game's astep used the pool"
asyncio.run(ENV_THREADS.run(sum, [1, 2]))
assert ENV_THREADS.started and any(t.name.startswith("gem-env") for t in threading.enumerate())
ENV_THREADS.shutdown()
assert not any(t.name.startswith("gem-env") for t in threading.enumerate())
assert asyncio.run(ENV_THREADS.run(sum, [1, 2])) == 3  # a later use starts a fresh pool
ENV_THREADS.shutdown()
print("ok")
"""
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok"


async def test_astep_hops_to_the_pool_only_for_blocking_envs():
    blocking, quick = ThreadRecorder(), QuickRecorder()
    await blocking.astep("a")
    await quick.astep("a")
    assert blocking.threads[0].startswith("gem-env")
    assert quick.threads == [threading.current_thread().name]


def test_a_private_pool_can_be_shut_down_and_reused():
    pool = EnvThreadPool(max_workers=2, thread_name_prefix="gem-test-pool")
    assert not pool.started
    import asyncio

    assert asyncio.run(pool.run(max, 1, 5)) == 5
    pool.shutdown()
    assert not pool.started and asyncio.run(pool.run(min, 1, 5)) == 1
    pool.shutdown()
    assert ENV_THREADS.max_workers == 256  # the reason it is large: see bench/concurrency.py


@pytest.mark.parametrize("backend", ["thread", "async"])
def test_backends_call_non_blocking_envs_inline_and_blocking_envs_in_threads(backend):
    vec = make_vec([QuickRecorder, QuickRecorder, ThreadRecorder, ThreadRecorder], backend=backend)
    vec.reset()
    vec.step(["a"] * 4)
    envs = vec.backend.envs
    caller = threading.current_thread().name
    assert envs[0].threads == envs[1].threads == [caller]
    assert all(env.threads[0] != caller for env in envs[2:])
    vec.close()


def test_process_backend_with_one_worker_still_runs_every_env():
    vec = make_vec(QuickRecorder, num_envs=5, backend="process", backend_kwargs={"num_workers": 1})
    assert len(set(vec.backend.worker_pids())) == 1
    vec.reset()
    obs, *_ = vec.step(["a"] * 5)
    assert obs == ("ok",) * 5
    vec.close()


def test_make_vec_groups_never_blocking_games_per_cpu_and_gives_other_envs_a_worker_each():
    """Games: one worker per CPU but one (the parent polls on the CPU left), polling briefly; other envs:
    a worker each, sleeping while they wait."""
    import os

    games = make_vec("game:GuessTheNumber-v0", num_envs=6, backend="process")
    assert len(set(games.backend.worker_pids())) == min(6, max(1, len(os.sched_getaffinity(0)) - 1))
    assert games.backend._spin_seconds > 0
    games.close()
    others = make_vec(ThreadRecorder, num_envs=3, backend="process")
    assert len(set(others.backend.worker_pids())) == 3
    assert others.backend._spin_seconds == 0
    others.close()
    chosen = make_vec("game:GuessTheNumber-v0", num_envs=4, backend="process", backend_kwargs={"num_workers": 4, "spin_seconds": 0})
    assert len(set(chosen.backend.worker_pids())) == 4 and chosen.backend._spin_seconds == 0
    chosen.close()


def test_a_spinner_returns_what_polling_found_and_pauses_after_three_misses(monkeypatch):
    from gem_core.vector import process

    answers = iter([[], [], [(5, 1)]])
    assert process.Spinner(60.0).wait(lambda: next(answers)) == [(5, 1)]  # a window no load can close first
    spinner = process.Spinner(0.001)
    polls = []
    for _ in range(process.Spinner.MISSES_BEFORE_PAUSE):
        assert not spinner.wait(lambda: polls.append(1))
    before = len(polls)
    assert not spinner.wait(lambda: polls.append(1)) and len(polls) == before, "paused: no polling for a while"
    monkeypatch.setattr(process.Spinner, "PAUSE_SECONDS", 0.0)
    spinner = process.Spinner(0.001)
    for _ in range(process.Spinner.MISSES_BEFORE_PAUSE):
        spinner.wait(lambda: None)
    assert spinner.wait(lambda: "ready") == "ready", "polls again once the pause is over"
    assert process.Spinner(0).wait(lambda: "ready") is None, "0 s: sleep at once, never poll"
