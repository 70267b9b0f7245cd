"""Environment variables out of range are refused naming the variable, not clamped or passed on to fail later."""

from __future__ import annotations

import pytest

from gem_core.errors import InvalidArgument
from gem_core.tools.sandbox import resolve_mode
from gem_core.tools.sandbox.config import pool_size_from_environment
from gem_core.vector.ray_env import pool_options_from_environment


def test_an_unknown_gem_sandbox_mode_names_the_variable(monkeypatch):
    monkeypatch.setenv("GEM_SANDBOX", "bwarp")
    with pytest.raises(InvalidArgument, match=r"Unknown sandbox mode 'bwarp' \(from \$GEM_SANDBOX\)"):
        resolve_mode()
    with pytest.raises(InvalidArgument) as refused:
        resolve_mode("bwarp")  # given as an argument: the variable is not blamed
    assert "GEM_SANDBOX" not in str(refused.value)


def test_a_negative_sandbox_pool_size_is_refused_naming_the_variable(monkeypatch):
    monkeypatch.setenv("GEM_SANDBOX_POOL", "-3")
    with pytest.raises(InvalidArgument, match="GEM_SANDBOX_POOL"):
        pool_size_from_environment()
    monkeypatch.setenv("GEM_SANDBOX_POOL", "0")
    assert pool_size_from_environment() == 0


@pytest.mark.parametrize(("variable", "value"), [
    ("GEM_RAY_ENV_ACTORS", "0"),
    ("GEM_RAY_ENV_ACTORS", "-2"),
    ("GEM_RAY_ENV_CPUS", "-1"),
    ("GEM_RAY_ENV_CPUS", "nan"),
    ("GEM_RAY_ENV_CPUS", "inf"),
    ("GEM_RAY_ENV_RESOURCES", '{"gem_env": -1}'),
    ("GEM_RAY_ENV_RESOURCES", '{"gem_env": "one"}'),
    ("GEM_RAY_ENV_RESOURCES", '{"gem_env": Infinity}'),
])
def test_ray_env_pool_variables_out_of_range_are_refused_naming_the_variable(monkeypatch, variable, value):
    monkeypatch.setenv(variable, value)
    with pytest.raises(InvalidArgument, match=variable):
        pool_options_from_environment()


def test_ray_env_pool_variables_in_range_are_read(monkeypatch):
    monkeypatch.setenv("GEM_RAY_ENV_ACTORS", "3")
    monkeypatch.setenv("GEM_RAY_ENV_CPUS", "0")
    monkeypatch.setenv("GEM_RAY_ENV_RESOURCES", '{"gem_env": 0.5}')
    assert pool_options_from_environment() == {"num_actors": 3, "num_cpus": 0.0, "resources": {"gem_env": 0.5}}
