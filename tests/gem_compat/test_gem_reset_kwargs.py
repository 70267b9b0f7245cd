"""GEM's per-env reset kwargs (GEM after 0.1.0): ``vec.reset(env0_kwargs={"idx": 3}, ...)`` resets env 0
with ``idx=3`` (GEM's oat example picks eval questions so); ``env.reset(idx=i)`` picks row ``i`` of a
dataset env; a GEM-style env whose ``reset`` declares the kwarg receives it."""

from __future__ import annotations

import gem
from gem.core import Env
from gem.envs.registration import register, spec

SAMPLE = spec("math:GSM8K").sample_kwargs


def _question(index: int, seed: int = 0) -> str:
    # GEM's MathEnv shuffles its rows with the env's seed, so a row index means a row of that shuffle
    env = gem.make("math:GSM8K", seed=seed, **SAMPLE)
    return env.reset(options={"index": index})[0]


def test_reset_idx_picks_the_row() -> None:
    env = gem.make("math:GSM8K", **SAMPLE)
    assert env.reset(idx=3)[0] == _question(3) != _question(4)


def test_per_env_reset_kwargs_reach_each_env() -> None:
    vec = gem.make_vec(["math:GSM8K"] * 3, **SAMPLE)
    observations, infos = vec.reset(env0_kwargs={"idx": 3}, env2_kwargs={"idx": 5})
    assert observations[0] == _question(3, seed=0) and observations[2] == _question(5, seed=2)  # make_vec seeds env i with i
    assert len(infos) == 3 and isinstance(observations[1], str)
    vec.close()


class Pick(Env):
    def reset(self, seed=None, idx=None):
        super().reset(seed)
        return f"picked {idx}", {}

    def step(self, action):
        return "", 0.0, True, False, {}


def test_a_gem_style_env_gets_the_kwarg_it_declares() -> None:
    register("test:Pick-v0", Pick)
    vec = gem.make_vec(["test:Pick-v0"] * 2)
    observations, _ = vec.reset(env1_kwargs={"idx": 7})
    assert observations == ["picked None", "picked 7"]
    vec.close()


def test_a_dataset_env_shows_its_rows_as_gems_dataset() -> None:
    # GEM's oat example sizes its evaluation by the env's ``dataset``; without it, it plays one question
    env = gem.make("math:GSM8K", **SAMPLE)
    assert len(env.dataset) == len(env.rows) > 1
    assert env.reset(idx=len(env.dataset) - 1)[0] == _question(len(env.rows) - 1)
