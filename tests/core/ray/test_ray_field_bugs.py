"""Arguments of the Ray backends that Ray itself mishandles are refused with InvalidArgument, naming the argument
or variable, when the pool or backend is made and before Ray is started or joined. Before these checks a negative
``start_timeout`` reached ``ray.get(timeout=...)`` and Ray's C++ core aborted the whole process (no exception),
and non-whole counts, negative or nan CPUs, reserved resource names (``CPU``, ``memory``, ...) and amounts finer
than Ray's 0.0001 failed with Ray's raw TypeError/ValueError naming no variable. No cluster is needed: Ray is
replaced by a stub that fails the test if it is reached."""

from __future__ import annotations

from typing import Any

import pytest

import gem_core.vector.ray_env as ray_env
from gem_core.errors import InvalidArgument
from gem_core.vector import make_vec
from gem_core.vector.ray_backend import RayBackend


@pytest.fixture(autouse=True)
def no_ray(monkeypatch):
    """Reaching Ray means an argument got past the checks (and, for a negative start_timeout, would abort)."""

    def connect_ray(address: str | None = None) -> Any:
        raise AssertionError("Ray was started before the arguments were checked")

    monkeypatch.setattr(ray_env, "connect_ray", connect_ray)


@pytest.mark.parametrize("start_timeout", [-5, -1, float("nan"), float("inf"), 0, "10"])
def test_a_bad_start_timeout_is_refused_before_ray_starts(start_timeout):
    """A negative start_timeout made Ray's core abort the process in ray.get; -1 waited forever, nan raised raw."""
    with pytest.raises(InvalidArgument, match="start_timeout"):
        ray_env.RayEnvPool(1, num_cpus=0, start_timeout=start_timeout)
    with pytest.raises(InvalidArgument, match="start_timeout"):
        RayBackend([lambda: None], envs_per_actor=1, num_cpus=0, start_timeout=start_timeout)


def test_make_vec_refuses_a_negative_start_timeout_before_ray_starts():
    """make_vec(backend="ray", backend_kwargs={"start_timeout": -5}) aborted the whole Python process."""
    with pytest.raises(InvalidArgument, match="start_timeout"):
        make_vec("game:GuessTheNumber-v0", num_envs=1, backend="ray", backend_kwargs={"num_cpus": 0, "start_timeout": -5})


@pytest.mark.parametrize(
    ("kwargs", "named"),
    [
        ({"num_actors": 1.5}, "num_actors"),
        ({"num_actors": "2"}, "num_actors"),
        ({"num_actors": 0}, "num_actors"),
        ({"max_envs_per_actor": 2.5}, "max_envs_per_actor"),
        ({"num_cpus": -1}, "num_cpus"),
        ({"num_cpus": float("nan")}, "num_cpus"),
        ({"num_cpus": 0.00001}, "num_cpus"),
        ({"resources": {"CPU": 1}}, "CPU"),
        ({"resources": {"GPU": 1}}, "GPU"),
        ({"resources": {"memory": 1}}, "memory"),
        ({"resources": {"object_store_memory": 1}}, "object_store_memory"),
        ({"resources": {"gem_env": -1}}, "gem_env"),
        ({"resources": {"gem_env": 0.00001}}, "gem_env"),
        ({"resources": ["gem_env"]}, "resources"),
    ],
)
def test_ray_env_pool_arguments_are_refused_naming_the_argument(kwargs, named):
    """These raised Ray's raw TypeError/ValueError (or Python's, on `num_actors < 1`) once Ray had started."""
    with pytest.raises(InvalidArgument, match=named):
        ray_env.RayEnvPool(**{"num_cpus": 0, **kwargs})


@pytest.mark.parametrize(
    ("backend_kwargs", "named"),
    [
        ({"envs_per_actor": 1.5}, "envs_per_actor"),
        ({"envs_per_actor": 0}, "envs_per_actor"),
        ({"num_cpus": -1}, "num_cpus"),
        ({"num_cpus": float("nan")}, "num_cpus"),
        ({"num_cpus": 0.00001}, "num_cpus"),
        ({"resources": {"CPU": 1}}, "CPU"),
        ({"resources": {"memory": 1}}, "memory"),
    ],
)
def test_make_vec_ray_backend_kwargs_are_refused_naming_the_argument(backend_kwargs, named):
    """make_vec(backend="ray") passed these to Ray, which raised a raw TypeError/ValueError naming no option."""
    with pytest.raises(InvalidArgument, match=named):
        make_vec("game:GuessTheNumber-v0", num_envs=1, backend="ray", backend_kwargs=backend_kwargs)


@pytest.mark.parametrize(
    ("variable", "value"),
    [
        ("GEM_RAY_ENV_RESOURCES", '{"CPU": 1}'),
        ("GEM_RAY_ENV_RESOURCES", '{"GPU": 1}'),
        ("GEM_RAY_ENV_RESOURCES", '{"memory": 1}'),
        ("GEM_RAY_ENV_RESOURCES", '{"object_store_memory": 1}'),
        ("GEM_RAY_ENV_RESOURCES", '{"gem_env": 0.00001}'),
        ("GEM_RAY_ENV_CPUS", "0.00001"),
    ],
)
def test_environment_values_ray_refuses_are_refused_naming_the_variable(monkeypatch, variable, value):
    """These passed pool_options_from_environment and failed only when the pool started, with Ray's raw ValueError."""
    monkeypatch.setenv(variable, value)
    with pytest.raises(InvalidArgument, match=variable):
        ray_env.pool_options_from_environment()


@pytest.mark.parametrize("amount", [0, 0.0001, 0.5, 1, 2.5])
def test_amounts_ray_accepts_still_pass(monkeypatch, amount):
    """The new checks refuse only what Ray refuses: 0 and amounts from Ray's 0.0001 granularity up stay accepted."""
    monkeypatch.setenv("GEM_RAY_ENV_CPUS", str(amount))
    monkeypatch.setenv("GEM_RAY_ENV_RESOURCES", f'{{"gem_env": {amount}}}')
    options = ray_env.pool_options_from_environment()
    assert options["num_cpus"] == amount and options["resources"] == {"gem_env": amount}
