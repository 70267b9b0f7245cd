"""Vector env defects found in the field: a cancelled ``astep`` or a Ctrl-C inside an env's step that lost the step's
results without ending the episodes, envs the ``async`` backend dropped and never closed, and a malformed
``backend_kwargs`` that escaped as a bare ``ValueError``."""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

import pytest

from gem_core.env import Env
from gem_core.errors import InvalidArgumentType
from gem_core.vector import make_vec

#: Names of the envs closed so far, in this process.
CLOSED: list[str] = []
_NAMES = iter(range(1_000_000))
_NAMES_LOCK = threading.Lock()


class Counter(Env):
    """Ends after ``length`` steps, reward 1 per step; each step waits ``sleep`` seconds; ``ctrl-c`` raises the
    KeyboardInterrupt a Ctrl-C raises in the caller's thread; ``close`` records the env's name in :data:`CLOSED`."""

    def __init__(self, length: int = 5, sleep: float = 0.0, blocking: bool = True):
        self.length, self.sleep, self.blocking, self.t = length, sleep, blocking, 0
        with _NAMES_LOCK:
            self.name = f"env{next(_NAMES)}"

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        super().reset(seed=seed)
        self.t = 0
        return "start", {}

    def step(self, action: str):
        if action == "ctrl-c":
            raise KeyboardInterrupt
        if self.sleep:
            time.sleep(self.sleep)
        self.t += 1
        return f"obs{self.t}", 1.0, self.t >= self.length, False, {}

    def sample_random_action(self) -> str:
        return "a"

    def close(self) -> None:
        CLOSED.append(self.name)


def _wait_until(condition: Any, seconds: float = 5.0) -> bool:
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True


# --------------------------------------------------------------------------------------------------
# 1. a cancelled astep


@pytest.mark.parametrize("backend", ["sync", "thread", "process", "async"])
async def test_a_cancelled_astep_ends_its_envs_episodes_instead_of_losing_the_step(backend):
    """Before: on sync, thread and process a cancelled ``astep`` ran on in its thread and its results were thrown
    away unrecorded: the step that terminated the episode (reward 1) was lost and the next astep answered "The
    episode is over" with reward 0 and terminated=True, where the async backend truncates with an Interrupted error."""
    vec = make_vec(Counter, num_envs=1, backend=backend, length=1, sleep=0.5)
    try:
        await vec.areset()
        with pytest.raises(asyncio.TimeoutError):
            await asyncio.wait_for(vec.astep(["a"]), 0.1)
        obs, rewards, terminated, truncated, infos = await asyncio.wait_for(vec.astep(["a"]), 10)
        assert truncated.tolist() == [True] and terminated.tolist() == [False], (obs, infos)
        assert str(infos["error"][0]).startswith("Interrupted"), infos
        obs, _, _, truncated, _ = await asyncio.wait_for(vec.astep(["a"]), 10)  # autoreset
        assert obs == ("start",) and not truncated.any()
    finally:
        vec.close()


# --------------------------------------------------------------------------------------------------
# 2. KeyboardInterrupt inside an env's step


@pytest.mark.parametrize("backend, blocking", [("sync", True), ("sync", False), ("thread", False), ("async", False)])
def test_a_ctrl_c_inside_a_step_ends_the_episodes_of_the_interrupted_batch(backend, blocking):
    """Before: the KeyboardInterrupt propagated and no env was marked: env 0's finished step (obs1, reward 1) was
    lost and the next step went on from obs1 to obs2 with no truncation and no error."""
    vec = make_vec(Counter, num_envs=2, backend=backend, blocking=blocking)
    try:
        vec.reset()
        with pytest.raises(KeyboardInterrupt):
            vec.step(["a", "ctrl-c"])
        obs, _, _, truncated, infos = vec.step(["a", "a"])
        assert truncated.tolist() == [True, True], (obs, infos)
        assert all("interrupted" in error for error in infos["error"]), infos
        obs, _, _, truncated, _ = vec.step(["a", "a"])  # autoreset
        assert obs == ("start", "start") and not truncated.any()
    finally:
        vec.close()


def test_a_ctrl_c_inside_an_inline_astep_on_the_async_backend_ends_the_batchs_episodes():
    """Before: ``await vec.astep`` on the async backend let the inline env's KeyboardInterrupt through unrecorded, as
    ``step`` did."""
    vec = make_vec(Counter, num_envs=2, backend="async", blocking=False)
    try:
        vec.reset()

        async def interrupted() -> None:
            await vec.astep(["a", "ctrl-c"])

        with pytest.raises(KeyboardInterrupt):
            asyncio.run(interrupted())
        _, _, _, truncated, infos = vec.step(["a", "a"])
        assert truncated.tolist() == [True, True] and all("interrupted" in error for error in infos["error"]), infos
    finally:
        vec.close()


# --------------------------------------------------------------------------------------------------
# 3. async backend: a dropped env is closed once its call returns


def test_an_env_dropped_after_a_step_timeout_on_the_async_backend_is_closed():
    """Before: the env whose step timed out was forgotten (``envs[i] = None``) and never closed, even after its call
    returned and after ``vec.close()``: its subprocesses and sockets leaked."""
    vec = make_vec(Counter, num_envs=1, backend="async", sleep=0.6, step_timeout=0.2)
    first = vec.backend.envs[0].name
    vec.reset()
    _, _, _, truncated, infos = vec.step(["a"])
    assert truncated.tolist() == [True] and infos["error"][0] == "timeout"
    time.sleep(0.8)  # the timed-out call has returned
    vec.close()
    assert _wait_until(lambda: first in CLOSED, 3), f"{first} was never closed"


async def test_an_env_dropped_by_a_cancelled_astep_on_the_async_backend_is_closed_once_its_call_returns():
    """Before: a cancelled astep dropped the env whose call ran on in a thread and never closed it."""
    vec = make_vec(Counter, num_envs=1, backend="async", sleep=0.8)
    first = vec.backend.envs[0].name
    try:
        await vec.areset()
        with pytest.raises(asyncio.TimeoutError):
            await asyncio.wait_for(vec.astep(["a"]), 0.1)
        assert first not in CLOSED  # never under its running call
        deadline = time.monotonic() + 3
        while first not in CLOSED and time.monotonic() < deadline:
            await asyncio.sleep(0.02)
        assert first in CLOSED, f"{first} was never closed"
    finally:
        vec.close()


# --------------------------------------------------------------------------------------------------
# 4. async backend: close() during an astep


async def test_close_during_an_astep_on_the_async_backend_closes_the_busy_envs_when_their_calls_return():
    """Before: ``close()`` skipped the envs busy in the astep and the astep never closed them afterwards (only the
    sync path did): a closed vector env left its envs open for ever."""
    vec = make_vec(Counter, num_envs=2, backend="async", sleep=0.5)
    names = [env.name for env in vec.backend.envs]
    await vec.areset()
    step = asyncio.ensure_future(vec.astep(["a", "a"]))
    await asyncio.sleep(0.15)
    await asyncio.to_thread(vec.close, timeout=0.1)
    await asyncio.wait_for(step, 5)
    assert vec.closed
    deadline = time.monotonic() + 3
    while not set(names) <= set(CLOSED) and time.monotonic() < deadline:
        await asyncio.sleep(0.02)
    assert set(names) <= set(CLOSED), f"not closed: {set(names) - set(CLOSED)}"


# --------------------------------------------------------------------------------------------------
# 5. backend_kwargs that is not a mapping


@pytest.mark.parametrize("backend_kwargs", ["max_workers=2", [("max_workers", 2)]])
def test_backend_kwargs_that_is_not_a_mapping_is_refused_by_name(backend_kwargs):
    """Before: ``dict(backend_kwargs)`` raised a bare ValueError ("dictionary update sequence element #0 has length
    1") naming no argument (and a list of pairs passed as if it were a dict)."""
    with pytest.raises(InvalidArgumentType, match="backend_kwargs"):
        make_vec(Counter, num_envs=1, backend="thread", backend_kwargs=backend_kwargs)
