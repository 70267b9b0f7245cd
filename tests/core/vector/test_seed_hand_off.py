"""Which seed each env's reset gets: make_vec's ``seed + i`` goes to the env's first reset that succeeds,
an explicit ``reset(seed=s)`` replaces it, and every later reset (autoresets included) passes ``seed=None``
so each env continues its own RNG."""

from __future__ import annotations

import functools
import threading
import time
from typing import Any

import numpy as np
import pytest
from gymnasium.vector import AutoresetMode

from gem_core.env import Env
from gem_core.vector import make_vec


class SeedEcho(Env):
    """One-step episodes whose first obs is a draw from the env's RNG; the reset info names the seed the
    reset was given. Its first ``fail_resets`` resets raise; the action ``"slow"`` takes 1 s."""

    def __init__(self, fail_resets: int = 0):
        self.fail_resets = fail_resets

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        if self.fail_resets:
            self.fail_resets -= 1
            raise OSError("transient reset failure")
        super().reset(seed=seed)
        return f"start {int(self.np_random.integers(10**6))}", {"seed": seed}

    def step(self, action: str):
        if action == "slow":
            time.sleep(1.0)
        return "end", 1.0, True, False, {}

    def sample_random_action(self) -> str:
        return "a"


def first_obs(seed: int, episodes: int) -> list[str]:
    """The first obs of each episode of a standalone SeedEcho: reset with ``seed``, then RNG continuation."""
    env = SeedEcho()
    return [env.reset(seed=seed)[0]] + [env.reset()[0] for _ in range(episodes - 1)]


@pytest.mark.parametrize("mode", [AutoresetMode.NEXT_STEP, AutoresetMode.SAME_STEP])
def test_autoresets_after_an_explicit_reset_seed_continue_each_envs_rng_instead_of_reusing_make_vec_seeds(mode):
    vec = make_vec(SeedEcho, num_envs=2, autoreset_mode=mode, seed=0)
    obs, infos = vec.reset(seed=100)
    assert infos["seed"].tolist() == [100, 101]
    obs, *_, infos = vec.step(["a", "a"])  # every episode ends; SAME_STEP resets now, NEXT_STEP on the next step
    if mode == AutoresetMode.NEXT_STEP:
        obs, *_, infos = vec.step(["a", "a"])
    assert infos["seed"].tolist() == [None, None]
    assert obs == (first_obs(100, 2)[1], first_obs(101, 2)[1])  # a new episode, not env.reset(seed=0/1) again
    vec.close()


def test_a_reset_that_fails_leaves_its_make_vec_seed_for_the_envs_first_reset_that_succeeds():
    vec = make_vec([SeedEcho, functools.partial(SeedEcho, fail_resets=1)], seed=7)
    with pytest.raises(RuntimeError, match="env 1: OSError: transient reset failure"):
        vec.reset()
    obs, infos = vec.reset()
    assert infos["seed"].tolist() == [None, 8]  # env 0 continues from seed 7; env 1 is seeded now
    assert obs == (first_obs(7, 2)[1], first_obs(8, 1)[0])
    vec.close()


def test_an_autoreset_that_fails_keeps_its_seed_for_the_retry():
    # Env 1's slow step times out: its env is rebuilt and its next reset gets a seed derived from make_vec's.
    # The rebuilt env's first reset fails, so the retry on the following step must get that seed again.
    builds: list[int] = []
    lock = threading.Lock()

    def build_second() -> SeedEcho:
        with lock:
            builds.append(1)
            return SeedEcho(fail_resets=0 if len(builds) == 1 else 1)

    vec = make_vec([SeedEcho, build_second], backend="thread", seed=7, step_timeout=0.2)
    vec.reset()
    _, _, _, truncated, infos = vec.step({1: "slow"})
    assert truncated.tolist() == [False, True] and infos["error"][1] == "timeout"
    _, _, _, truncated, infos = vec.step({1: "a"})  # the autoreset of the rebuilt env fails
    assert truncated.tolist() == [False, True] and "transient reset failure" in infos["error"][1]
    _, _, _, truncated, infos = vec.step({1: "a"})  # the retry succeeds
    derived = int(np.random.SeedSequence([7, 1, 1]).generate_state(1)[0])
    assert not truncated.any() and infos["seed"][1] == derived
    vec.close()
