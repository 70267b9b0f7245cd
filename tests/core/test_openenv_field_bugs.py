"""gem_core.serve.openenv_interop: a GEM env served as OpenEnv and read back by OpenEnvEnv loses its truncation and its
reset options (defects found in the field)."""

from __future__ import annotations

import pytest

pytest.importorskip("openenv")

from gem_core.env import Env  # noqa: E402
from gem_core.serve.openenv_interop import GemEnvironment, OpenEnvEnv, TextAction  # noqa: E402


class _Truncating(Env):
    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        return f"options={options}", {}

    def step(self, action):
        return "cut", 0.5, False, True, {}


class _Terminating(_Truncating):
    def step(self, action):
        return "done", 1.0, True, False, {}


def _round_trip(env_class: type[Env]) -> OpenEnvEnv:
    return OpenEnvEnv(lambda: GemEnvironment(env_class), TextAction, observation_field="text")


def test_a_gem_truncation_comes_back_as_a_truncation():
    """GemEnvironment sends TextObservation.truncated, OpenEnvEnv ignored it: a turn limit came back as
    terminated=True, truncated=False (the value was not bootstrapped)."""
    env = _round_trip(_Truncating)
    try:
        env.reset(seed=0)
        assert env.step("x")[1:4] == (0.5, False, True)
    finally:
        env.close()
    env = _round_trip(_Terminating)
    try:
        env.reset(seed=0)
        assert env.step("x")[1:4] == (1.0, True, False)
    finally:
        env.close()


def test_reset_options_reach_the_gem_env():
    """OpenEnvEnv.reset spread options into top-level reset kwargs, GemEnvironment read only kwargs['options']:
    every option was silently dropped (the env saw options=None)."""
    env = _round_trip(_Truncating)
    try:
        observation, _ = env.reset(seed=0, options={"index": 3})
        assert observation == "options={'index': 3}"
        assert env.reset(seed=0)[0] == "options=None"
    finally:
        env.close()


def test_gem_environment_reads_options_both_ways():
    """OpenEnv's own clients send custom reset fields top-level; a caller may also nest them under ``options``."""
    served = GemEnvironment(_Truncating)
    assert served.reset(seed=0, index=3).text == "options={'index': 3}"
    assert served.reset(seed=0, options={"index": 4}).text == "options={'index': 4}"
    assert served.reset(seed=0).text == "options=None"
