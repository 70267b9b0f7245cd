"""Vector env faults (issue 14 items 5-6) on every backend: an env that raises ``SystemExit`` or
another ``BaseException``, an env whose step hangs (``step_timeout``), ``close()`` while a step is in
flight, and worker recycling on the process backend. In every case the batch comes back: the faulty
env's episode is truncated with ``info["error"]`` and the other envs' results are intact."""

from __future__ import annotations

import contextlib
import math
import os
import signal
import threading
import time
from typing import Any

import numpy as np
import pytest

from gem_core.env import Env
from gem_core.vector import make_vec

BACKENDS = ["sync", "thread", "process", "async"]

#: Released at the end of every test, so a step left hanging in a thread of this process returns.
RELEASE = threading.Event()
#: The test process: an env's ``interrupt`` step sends it SIGINT from a forked worker or a thread alike.
TEST_PID = os.getpid()


@pytest.fixture(autouse=True)
def release_hanging_steps():
    RELEASE.clear()
    yield
    RELEASE.set()


class CustomAbort(BaseException):
    """A BaseException that is neither SystemExit nor KeyboardInterrupt."""


class FaultyEnv(Env):
    """A counter whose action chooses a fault: ``exit`` (SystemExit), ``abort`` (a BaseException),
    ``hang`` (blocks until the test ends, at most 30 s), ``leak`` (keeps 40 MB more per step),
    ``interrupt`` (after 0.2 s Ctrl-C reaches the test process, then 0.5 s pass), ``slow`` (1 s passes);
    anything else counts a step."""

    def __init__(self):
        self.count = 0
        self.kept: list[bytearray] = []

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        super().reset(seed=seed)
        self.count = 0
        return "start", {}

    def step(self, action: str):
        if action == "exit":
            raise SystemExit(3)
        if action == "abort":
            raise CustomAbort("abort from the env")
        if action == "hang":
            RELEASE.wait(30)
        if action == "deaf":  # a hang no signal reaches, as inside a C extension
            signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGALRM})
            RELEASE.wait(30)
        if action == "leak":
            self.kept.append(bytearray(40 * 2**20))
        if action == "interrupt":  # Ctrl-C at the terminal while this step runs (and the batch's others)
            RELEASE.wait(0.2)
            os.kill(TEST_PID, signal.SIGINT)
            RELEASE.wait(0.5)
        if action == "slow":
            RELEASE.wait(1.0)
        self.count += 1
        return f"count {self.count}", 1.0, False, False, {}

    def sample_random_action(self) -> str:
        return "a"


def faulty_vec(backend: str, num_envs: int = 3, **kwargs: Any):
    if backend == "process":
        # One worker per env, so a fault in one worker touches one env only.
        kwargs.setdefault("backend_kwargs", {"num_workers": num_envs})
    return make_vec(FaultyEnv, num_envs=num_envs, backend=backend, **kwargs)


# --------------------------------------------------------------------------------------------------
# BaseException from an env


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("action, name", [("exit", "SystemExit"), ("abort", "CustomAbort")])
def test_a_base_exception_in_a_step_truncates_only_that_env(backend, action, name):
    vec = faulty_vec(backend)
    vec.reset()
    obs, rewards, terminated, truncated, infos = vec.step(["a", action, "a"])
    assert truncated.tolist() == [False, True, False]
    assert infos["_error"].tolist() == [False, True, False] and name in infos["error"][1]
    assert obs == ("count 1", "start", "count 1") and rewards.tolist() == [1.0, 0.0, 1.0]
    # The next step autoresets the faulty env and the others go on.
    obs, *_ = vec.step(["a", "a", "a"])
    assert obs == ("count 2", "start", "count 2")
    vec.close()  # no exception either


# --------------------------------------------------------------------------------------------------
# step_timeout


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_step_past_step_timeout_is_truncated_with_error_timeout_and_the_env_is_replaced(backend):
    vec = faulty_vec(backend, step_timeout=0.5)
    vec.reset()
    started = time.monotonic()
    obs, _, _, truncated, infos = vec.step(["a", "hang", "a"])
    assert time.monotonic() - started < 15  # the hang lasts 30 s: the batch did not wait for it
    assert truncated.tolist() == [False, True, False]
    assert infos["error"][1] == "timeout"
    assert obs[0] == obs[2] == "count 1"
    # The slow env was replaced: the next step resets it (NEXT_STEP) and the one after steps it.
    obs, _, _, truncated, _ = vec.step(["a", "a", "a"])
    assert obs == ("count 2", "start", "count 2") and not truncated.any()
    obs, _, _, truncated, _ = vec.step(["a", "a", "a"])
    assert obs == ("count 3", "count 1", "count 3") and not truncated.any()
    vec.close()


@pytest.mark.parametrize("backend", BACKENDS)
def test_step_timeout_must_be_positive(backend):
    with pytest.raises(ValueError, match="step_timeout"):
        faulty_vec(backend, step_timeout=0)


# --------------------------------------------------------------------------------------------------
# close() at any time


@pytest.mark.parametrize("backend", BACKENDS)
def test_close_during_an_in_flight_step_returns_the_batch_and_closes(backend):
    vec = faulty_vec(backend)
    vec.reset()
    result: dict[str, Any] = {}

    def step() -> None:
        try:
            result["step"] = vec.step(["a", "a", "hang"])
        except BaseException as exc:  # noqa: BLE001 - the test reports whatever escaped
            result["raised"] = exc

    stepper = threading.Thread(target=step)
    stepper.start()
    time.sleep(0.5)  # the step is in flight: env 2 hangs
    started = time.monotonic()
    vec.close(timeout=0.5)
    assert time.monotonic() - started < 10  # close() did not wait for the hanging step (30 s)
    assert vec.closed
    RELEASE.set()  # on sync the hanging call runs in the stepping thread: let it return
    stepper.join(15)
    assert not stepper.is_alive()
    assert "raised" not in result, f"step raised {result.get('raised')!r}"
    obs, _, _, truncated, infos = result["step"]
    assert obs[:2] == ("count 1", "count 1")  # the healthy envs' results are not lost
    if backend == "sync":  # the call in the caller's thread cannot be cut off: it finished
        assert not truncated.any()
    else:
        assert truncated.tolist() == [False, False, True] and infos["error"][2].startswith("closed")
    with pytest.raises(RuntimeError, match="closed"):
        vec.step(["a", "a", "a"])


@pytest.mark.parametrize("backend", BACKENDS)
def test_close_is_idempotent_and_works_before_reset(backend):
    vec = faulty_vec(backend)
    vec.close()
    vec.close()


async def test_async_backend_closes_from_inside_a_running_loop_after_a_base_exception():
    vec = faulty_vec("async")
    await vec.areset()
    _, _, _, truncated, infos = await vec.astep(["exit", "a", "a"])
    assert truncated.tolist() == [True, False, False] and "SystemExit" in infos["error"][0]
    vec.close()
    assert vec.closed


# --------------------------------------------------------------------------------------------------
# process backend: worker recycling


def test_process_workers_are_recycled_after_a_number_of_steps():
    vec = faulty_vec("process", num_envs=2, backend_kwargs={"num_workers": 2, "recycle_after_steps": 2})
    vec.reset()
    pids = vec.backend.worker_pids()
    vec.step(["a", "a"])
    assert vec.backend.worker_pids() == pids
    vec.step(["a", "a"])  # each worker has run 2 steps: recycled after this batch
    assert all(new != old for new, old in zip(vec.backend.worker_pids(), pids))
    obs, _, _, truncated, infos = vec.step(["a", "a"])  # the episodes in progress were cut
    assert truncated.tolist() == [True, True] and all("recycled" in e for e in infos["error"])
    obs, _, _, truncated, _ = vec.step(["a", "a"])  # autoreset on the fresh workers
    assert obs == ("start", "start") and not truncated.any()
    vec.close()


def test_a_process_worker_over_its_memory_cap_is_recycled():
    probe = faulty_vec("process", num_envs=1, backend_kwargs={"num_workers": 1})
    probe.reset()
    baseline = probe.backend.worker_memory_mb()[0]
    probe.close()
    assert baseline is not None and baseline > 0
    vec = faulty_vec("process", num_envs=2, backend_kwargs={"num_workers": 2, "max_worker_memory_mb": baseline + 100})
    vec.reset()
    pids = vec.backend.worker_pids()
    for _ in range(2):
        _, _, _, truncated, _ = vec.step(["leak", "a"])  # +80 MB: under the cap
        assert not truncated.any()
    vec.step(["leak", "a"])  # +120 MB: worker 0 is over its cap and is recycled
    new_pids = vec.backend.worker_pids()
    assert new_pids[0] != pids[0] and new_pids[1] == pids[1]
    _, _, _, truncated, infos = vec.step(["a", "a"])
    assert truncated.tolist() == [True, False] and "memory" in infos["error"][0]
    vec.close()


def test_process_backend_groups_envs_per_worker():
    vec = make_vec(FaultyEnv, num_envs=6, backend="process", backend_kwargs={"num_workers": 2})
    assert len({pid for pid in vec.backend.worker_pids()}) == 2
    vec.reset()
    obs, _, _, truncated, infos = vec.step(["a", "exit", "a", "a", "a", "a"])
    assert truncated.tolist() == [False, True, False, False, False, False]
    assert obs == ("count 1", "start", "count 1", "count 1", "count 1", "count 1")
    vec.close()


def test_step_timeout_on_a_grouped_process_worker_truncates_only_the_slow_env():
    vec = make_vec(FaultyEnv, num_envs=4, backend="process", step_timeout=0.5, backend_kwargs={"num_workers": 2})
    vec.reset()
    obs, _, _, truncated, infos = vec.step(["a", "hang", "a", "a"])
    assert truncated.tolist() == [False, True, False, False] and infos["error"][1] == "timeout"
    obs, _, _, truncated, _ = vec.step(["a", "a", "a", "a"])
    assert obs == ("count 2", "start", "count 2", "count 2") and not truncated.any()
    vec.close()


def test_a_killed_grouped_worker_ends_the_episodes_of_every_env_it_hosted_and_no_other():
    import os
    import signal as signals

    vec = make_vec(FaultyEnv, num_envs=4, backend="process", backend_kwargs={"num_workers": 2})
    vec.reset()
    vec.step(["a"] * 4)
    victim = vec.backend.worker_pids()[1]  # hosts envs 1 and 3
    os.kill(victim, signals.SIGKILL)
    obs, _, _, truncated, infos = vec.step({0: "a", 1: "a", 2: "a"})  # env 3 is not stepped now
    assert truncated.tolist() == [False, True, False, False] and infos["error"][1].startswith("WorkerDied")
    assert obs[0] == obs[2] == "count 2"
    # Env 3 lived in the dead worker too: its next step reports the lost episode instead of pretending.
    obs, _, _, truncated, infos = vec.step(["a"] * 4)
    assert truncated.tolist() == [False, False, False, True] and infos["error"][3].startswith("WorkerDied")
    assert obs[1] == "start" and obs[0] == "count 3"
    vec.close()


class UnpicklableInfoEnv(FaultyEnv):
    def step(self, action: str):
        obs, reward, terminated, truncated, info = super().step(action)
        return obs, reward, terminated, truncated, ({"callback": lambda: None} if action == "odd" else info)


def test_an_unsendable_answer_in_a_grouped_worker_fails_only_that_env():
    vec = make_vec(UnpicklableInfoEnv, num_envs=3, backend="process", backend_kwargs={"num_workers": 1})
    vec.reset()
    obs, _, _, truncated, infos = vec.step(["a", "odd", "a"])
    assert truncated.tolist() == [False, True, False] and "cannot be sent" in infos["error"][1]
    assert obs[0] == obs[2] == "count 1"
    vec.close()


def test_a_step_that_signals_cannot_interrupt_is_ended_by_killing_its_worker():
    vec = make_vec(FaultyEnv, num_envs=2, backend="process", step_timeout=0.3, backend_kwargs={"num_workers": 2})
    vec.reset()
    pids = vec.backend.worker_pids()
    obs, _, _, truncated, infos = vec.step(["deaf", "a"])
    assert truncated.tolist() == [True, False] and infos["error"][0] == "timeout" and obs[1] == "count 1"
    assert vec.backend.worker_pids()[0] != pids[0] and vec.backend.worker_pids()[1] == pids[1]
    obs, _, _, truncated, _ = vec.step(["a", "a"])
    assert obs == ("start", "count 2") and not truncated.any()
    vec.close()


# --------------------------------------------------------------------------------------------------
# Ctrl-C during a step (a KeyboardInterrupt the user catches, as in a notebook)


@contextlib.contextmanager
def ctrl_c_at_a_terminal():
    """SIGINT raises KeyboardInterrupt in the test process, as at a terminal (a shell's ``&`` job ignores it);
    one that escapes the test's own ``pytest.raises`` fails the test instead of stopping the whole run."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    except KeyboardInterrupt:
        pytest.fail("the KeyboardInterrupt of the interrupted step surfaced again in a later call")
    finally:
        signal.signal(signal.SIGINT, previous)


@pytest.mark.parametrize("backend", ["process", "async", "thread"])
def test_after_a_step_interrupted_by_ctrl_c_the_next_step_answers_for_itself(backend):
    vec = faulty_vec(backend, num_envs=2)
    try:
        with ctrl_c_at_a_terminal():
            vec.reset()
            with pytest.raises(KeyboardInterrupt):
                vec.step(["interrupt", "slow"])
            # The interrupted steps' episodes ended, and no answer of theirs is taken for this step's.
            obs, _, _, truncated, infos = vec.step(["a", "a"])
            assert truncated.tolist() == [True, True] and all("interrupted" in error for error in infos["error"])
            obs, _, _, truncated, _ = vec.step(["a", "a"])  # autoreset
            assert obs == ("start", "start") and not truncated.any()
            obs, _, _, truncated, _ = vec.step(["a", "a"])
            assert obs == ("count 1", "count 1") and not truncated.any()
    finally:
        vec.close()


class OverlapDetector(FaultyEnv):
    """Fails a step that starts while another step of the same env is running."""

    def __init__(self):
        super().__init__()
        self.running = 0

    def step(self, action: str):
        self.running += 1
        try:
            if self.running > 1:
                raise AssertionError("two steps of one env ran at once")
            return super().step(action)
        finally:
            self.running -= 1


@pytest.mark.parametrize("backend", ["async", "thread"])
def test_a_step_interrupted_by_ctrl_c_leaves_no_env_to_two_calls_at_once(backend):
    vec = make_vec(OverlapDetector, num_envs=2, backend=backend)
    try:
        with ctrl_c_at_a_terminal():
            vec.reset()
            with pytest.raises(KeyboardInterrupt):
                vec.step(["interrupt", "slow"])
            for _ in range(3):  # the interrupted steps run on in their threads meanwhile
                _, _, _, _, infos = vec.step(["a", "a"])
                assert "AssertionError" not in str(infos.get("error"))
    finally:
        vec.close()


# --------------------------------------------------------------------------------------------------
# a worker that cannot be rebuilt

#: Set in the test process: a process worker forked now builds no env.
BUILDS_FAIL = threading.Event()


def env_unless_builds_fail() -> FaultyEnv:
    if BUILDS_FAIL.is_set():
        raise ConnectionError("the tool server's port is busy")
    return FaultyEnv()


def test_a_worker_that_cannot_be_rebuilt_fails_only_its_envs_and_is_rebuilt_at_a_later_batch():
    BUILDS_FAIL.clear()
    vec = make_vec(env_unless_builds_fail, num_envs=2, backend="process", backend_kwargs={"num_workers": 2})
    try:
        vec.reset()
        vec.step(["a", "a"])
        BUILDS_FAIL.set()
        os.kill(vec.backend.worker_pids()[0], signal.SIGKILL)
        obs, _, _, truncated, infos = vec.step(["a", "a"])  # the worker dies; its rebuild fails
        assert truncated.tolist() == [True, False] and infos["error"][0].startswith("WorkerDied")
        assert obs[1] == "count 2"
        obs, _, _, truncated, infos = vec.step(["a", "a"])  # env 0's autoreset: the rebuild fails again
        assert truncated.tolist() == [True, False] and "ConnectionError" in infos["error"][0]
        assert obs[1] == "count 3"
        BUILDS_FAIL.clear()
        obs, _, _, truncated, _ = vec.step(["a", "a"])  # the rebuild succeeds: env 0 resets
        assert obs == ("start", "count 4") and not truncated.any()
        obs, _, _, truncated, _ = vec.step(["a", "a"])
        assert obs == ("count 1", "count 5") and not truncated.any()
    finally:
        BUILDS_FAIL.clear()
        vec.close()


# --------------------------------------------------------------------------------------------------
# a malformed step result


class MalformedEnv(FaultyEnv):
    """Answers an action named in :data:`MALFORMED` with that malformed step result."""

    def step(self, action: str):
        if action in MALFORMED:
            return MALFORMED[action]
        return super().step(action)


MALFORMED: dict[str, Any] = {
    "str reward": ("x", "abc", False, False, {}),
    "None reward": ("x", None, False, False, {}),
    "NaN reward": ("x", math.nan, False, False, {}),
    "inf reward": ("x", math.inf, False, False, {}),
    "list info": ("x", 1.0, False, False, ["not", "a", "dict"]),
}


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("action", sorted(MALFORMED))
def test_a_malformed_step_result_truncates_only_that_env(backend, action):
    vec = make_vec(MalformedEnv, num_envs=2, backend=backend)
    vec.reset()
    obs, rewards, _, truncated, infos = vec.step([action, "a"])
    assert truncated.tolist() == [True, False] and rewards.tolist() == [0.0, 1.0]
    assert obs == ("start", "count 1")
    assert ("reward" if "reward" in action else "info") in infos["error"][0]
    obs, _, _, truncated, _ = vec.step(["a", "a"])  # autoreset; the other env goes on
    assert obs == ("start", "count 2") and not truncated.any()
    vec.close()
