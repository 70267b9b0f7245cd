"""The hosted-worker algorithm written once (:mod:`gem_core.vector.hosted`): a batch goes out as one
message per worker; a lost worker fails its calls, is replaced, and its other envs' episodes end at
their next step. Tested on a backend whose workers are in-memory :class:`HostedEnvs`, so the shared
part is seen alone; tests/core/vector/test_faults.py runs it through the process backend."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from gem_core.env import Env
from gem_core.vector.calls import Failure, Reset, Step
from gem_core.vector.hosted import Batch, HostedBackend, HostedEnvs
from gem_core.vector.process import ProcessBackend
from gem_core.vector.ray_backend import RayBackend


class Counter(Env):
    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        super().reset(seed=seed)
        self.count = 0
        return "0", {}

    def step(self, action: str):
        self.count += 1
        return str(self.count), 0.0, False, False, {}


class InMemoryBackend(HostedBackend):
    """Two envs per worker; ``lose`` names workers whose next batch never comes back."""

    def __init__(self, num_envs: int):
        self.num_envs = num_envs
        self._lock, self._closed = threading.Lock(), False
        self._place([i // 2 for i in range(num_envs)])
        self.workers = [self._start(w) for w in range(len(self._hosted))]
        self.lose: set[int] = set()
        self.replaced: list[int] = []

    def _start(self, w: int) -> HostedEnvs:
        hosted = HostedEnvs({i: Counter for i in self._hosted[w]})
        assert hosted.start() is None
        return hosted

    def _exchange(self, per_worker: dict[int, Batch], results: dict[int, Any]):
        lost = {}
        for w, batch in per_worker.items():
            if w in self.lose:
                lost[w] = f"WorkerLost: worker {w}"
            else:
                self._replies(self.workers[w].run_batch(batch), results)
        self.lose.clear()
        return per_worker, lost

    def _replace(self, w: int) -> None:
        self.replaced.append(w)
        self.workers[w] = self._start(w)


def test_a_lost_worker_fails_its_calls_is_replaced_and_ends_its_other_envs_episodes():
    backend = InMemoryBackend(4)
    backend.run({i: Reset(seed=i) for i in range(4)})
    assert backend.run({i: Step("a") for i in range(4)}) == {i: ("1", 0.0, False, False, {}) for i in range(4)}

    backend.lose.add(0)
    answers = backend.run({0: Step("a"), 2: Step("a")})  # env 1 shares worker 0 but is not in this batch
    assert answers[0] == Failure("WorkerLost: worker 0", env_replaced=True)
    assert answers[2] == ("2", 0.0, False, False, {})
    assert backend.replaced == [0]

    # Env 1's episode ended with its worker: its next step says so, once; a reset starts afresh.
    assert backend.run({1: Step("a")})[1] == Failure("WorkerLost: worker 0", env_replaced=True)
    assert backend.run({1: Reset(seed=1)})[1] == ("0", {})
    assert backend.run({1: Step("a")})[1] == ("1", 0.0, False, False, {})


def test_a_reset_after_a_loss_is_not_refused():
    backend = InMemoryBackend(2)
    backend.run({i: Reset() for i in range(2)})
    backend.lose.add(0)
    backend.run({0: Step("a")})
    assert backend.run({1: Reset(seed=3)})[1] == ("0", {})


def test_an_env_that_raises_answers_an_error_not_a_lost_worker():
    hosted = HostedEnvs({0: Counter})
    assert hosted.start() is None
    status, payload = hosted.run(0, Step("a"))  # stepped before reset: Counter has no count
    assert status == "error" and "AttributeError" in payload


@pytest.mark.parametrize("backend", [ProcessBackend, RayBackend])
def test_the_process_and_ray_backends_specialise_the_one_hosted_base(backend):
    assert issubclass(backend, HostedBackend)
    for shared in ("_run", "_end_episodes", "_replies"):
        assert shared not in vars(backend), f"{backend.__name__} writes {shared} again"
