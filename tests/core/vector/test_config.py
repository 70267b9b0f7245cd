"""A vector env's configuration is checked when it is made, not at its first step: a bad value or a
misspelled backend option raises a :class:`~gem_core.errors.GemError` naming the key, and a value of
another numeric type that means the same (numpy's integers) is taken as it is meant."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from gem_core.env import Env
from gem_core.errors import GemError, InvalidArgument, InvalidArgumentType, UnknownKey
from gem_core.vector import make_vec


class Counter(Env):
    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        super().reset(seed=seed)
        self.count = 0
        return "start", {}

    def step(self, action: str):
        self.count += 1
        return f"{action} {self.count}", 1.0, False, False, {}


def test_a_numpy_integer_seed_is_taken_as_the_int_it_is():
    vec = make_vec(Counter, num_envs=2, seed=np.int64(3))
    assert vec.reset() == (("start", "start"), {})
    vec.close()


@pytest.mark.parametrize("backend, options, key", [
    ("process", {"num_workers": 0}, "num_workers"),
    ("process", {"num_workers": 1.5}, "num_workers"),
    ("process", {"num_workers": "1"}, "num_workers"),
    ("process", {"num_workers": True}, "num_workers"),
    ("process", {"context": "bogus"}, "context"),
    ("process", {"start_timeout": "x"}, "start_timeout"),
    ("process", {"start_timeout": 0}, "start_timeout"),
    ("process", {"recycle_after_steps": "3"}, "recycle_after_steps"),
    ("process", {"recycle_after_steps": 0.5}, "recycle_after_steps"),
    ("process", {"max_worker_memory_mb": -1}, "max_worker_memory_mb"),
    ("process", {"max_worker_memory_mb": "big"}, "max_worker_memory_mb"),
    ("process", {"spin_seconds": "x"}, "spin_seconds"),
    ("thread", {"max_workers": 0}, "max_workers"),
    ("thread", {"max_workers": -1}, "max_workers"),
    ("thread", {"max_workers": 2.5}, "max_workers"),
])
def test_a_bad_backend_option_is_refused_when_the_vector_env_is_made(backend, options, key):
    with pytest.raises(GemError, match=key) as caught:
        make_vec(Counter, num_envs=2, backend=backend, backend_kwargs=options)
    assert isinstance(caught.value, (InvalidArgument, InvalidArgumentType))


@pytest.mark.parametrize("backend", ["sync", "thread", "process", "async"])
def test_a_misspelled_backend_option_is_named_with_the_options_the_backend_takes(backend):
    with pytest.raises(InvalidArgumentType, match="num_wrkers") as caught:
        make_vec(Counter, num_envs=1, backend=backend, backend_kwargs={"num_wrkers": 1})
    assert "step_timeout" in str(caught.value)  # every backend takes it


@pytest.mark.parametrize("step_timeout", ["1", True, float("inf")])
def test_step_timeout_must_be_a_positive_finite_number_of_seconds(step_timeout):
    with pytest.raises(InvalidArgument, match="step_timeout"):
        make_vec(Counter, num_envs=1, step_timeout=step_timeout)


@pytest.mark.parametrize("backend", [["x"], None, 3])
def test_a_backend_that_is_not_a_backend_name_is_refused(backend):
    with pytest.raises(InvalidArgument, match="backend"):
        make_vec(Counter, num_envs=1, backend=backend)


def test_a_bool_is_not_an_env_index():
    vec = make_vec(Counter, num_envs=2)
    vec.reset()
    with pytest.raises(UnknownKey, match="True"):
        vec.step({True: "a"})
    vec.close()
