"""gem_core.interop (skyrl, verifiers): defects found in the field, each an argument or value that got through
unchecked and failed later, raw, or poisoned a batch."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from gem_core.env import Env
from gem_core.errors import GemError, InvalidArgument

_ATTACK_DIR = Path(__file__).parent


class _NanReward(Env):
    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        return "say something", {}

    def step(self, action):
        return "", float("nan"), True, False, {}


# --- SkyRL export / import --------------------------------------------------------------------------------------


@pytest.fixture
def skyrl_gym():
    return pytest.importorskip("skyrl_gym")


def test_skyrl_export_ends_an_episode_whose_reward_is_not_finite(skyrl_gym):
    """GemSkyRLEnv.step passed a NaN reward straight into SkyRL (the batch's advantages became NaN)."""
    from gem_core.interop.skyrl import register_gem_envs
    from gem_core.registry import register

    register("fieldbug:NanReward-v0", _NanReward)
    register_gem_envs("fieldbug:NanReward-v0")
    env = skyrl_gym.make("fieldbug:NanReward-v0", env_config={}, extras={})
    env.init([{"role": "user", "content": "x"}])
    out = env.step("hello")
    assert out["reward"] == 0.0 and out["done"] is True
    assert out["metadata"]["truncated"] is True and "nan" in out["metadata"]["error"], out["metadata"]
    assert math.isfinite(env.get_metrics()["return"])


def test_skyrl_export_takes_max_turns_from_make_kwargs(skyrl_gym):
    """env_config={"make_kwargs": {"max_turns": 3}} raised a raw TypeError (multiple values for max_turns)."""
    from gem_core.interop.skyrl import register_gem_envs

    register_gem_envs("game:GuessTheNumber-v0")
    env = skyrl_gym.make("game:GuessTheNumber-v0", env_config={"make_kwargs": {"max_turns": 3}}, extras={"seed": 1})
    assert env.max_turns == 3
    # the row's max_turns (one task's limit) overrides the config's
    env = skyrl_gym.make("game:GuessTheNumber-v0", env_config={"make_kwargs": {"max_turns": 3}}, extras={"seed": 1, "max_turns": 2})
    assert env.max_turns == 2


@pytest.mark.parametrize("limit", [2.9, "3", 0, -1, True])
def test_skyrl_export_refuses_a_row_max_turns_that_is_not_a_whole_number(skyrl_gym, limit):
    """A row's max_turns 2.9 became 2 through int(); "3" was read as 3, 0 and -1 passed on to make()."""
    from gem_core.interop.skyrl import SkyRLTaskError, register_gem_envs

    register_gem_envs("game:GuessTheNumber-v0")
    with pytest.raises(SkyRLTaskError, match="max_turns"):
        skyrl_gym.make("game:GuessTheNumber-v0", env_config={}, extras={"max_turns": limit})


def test_skyrl_export_reads_a_whole_float_row_max_turns(skyrl_gym):
    """A parquet column of floats holds 3.0 for 3: that is a whole number."""
    from gem_core.interop.skyrl import register_gem_envs

    register_gem_envs("game:GuessTheNumber-v0")
    assert skyrl_gym.make("game:GuessTheNumber-v0", env_config={}, extras={"max_turns": 3.0}).max_turns == 3


_ROW = {"prompt": [{"role": "user", "content": "hi"}], "reward_spec": {"method": "rule", "ground_truth": "4"}}


@pytest.mark.parametrize("row", ["What is 2+2?", 5])
def test_skyrl_import_refuses_a_row_that_is_not_a_mapping(skyrl_gym, row):
    """make("skyrl:gsm8k", row="text") raised a raw ValueError from dict(), row=5 a raw TypeError."""
    from gem_core import make
    from gem_core.interop.skyrl import SkyRLTaskError

    with pytest.raises(SkyRLTaskError, match="row"):
        make("skyrl:gsm8k", row=row)


@pytest.mark.parametrize("env_config", ["x", 3])
def test_skyrl_import_refuses_an_env_config_that_is_not_a_mapping(skyrl_gym, env_config):
    """env_config="x" raised a raw ValueError from dict(), env_config=3 a raw TypeError."""
    from gem_core import make

    with pytest.raises(GemError, match="env_config"):
        make("skyrl:gsm8k", row=_ROW, env_config=env_config)


# --- verifiers --------------------------------------------------------------------------------------------------

def test_verifiers_harness_relay_checks_its_settings_before_starting_its_server():
    """HarnessRelay started its server (and verifiers' env) before any setting was read."""
    pytest.importorskip("verifiers.v1")
    from gem_core.interop.verifiers_relay import HarnessRelay

    with pytest.raises(InvalidArgument, match="call_format"):
        HarnessRelay("gem_fieldbug_sum", {}, "h", call_format="bogus")
    with pytest.raises(InvalidArgument, match="timeout"):
        HarnessRelay("gem_fieldbug_sum", {}, "h", timeout=0)


@pytest.mark.parametrize("num_tasks", [-3, 0, 2.5, "4"])
def test_verifiers_load_environment_num_tasks_is_checked(num_tasks):
    """load_environment(num_tasks=-3) made a silently empty taskset (range(-3) is empty)."""
    pytest.importorskip("verifiers.v1")
    from gem_core.interop.verifiers import load_environment

    with pytest.raises(GemError, match="num_tasks"):
        load_environment("game:GuessTheNumber-v0", num_tasks=num_tasks)
