"""A reward too large for a float (``10**400``, a valid ``numbers.Real``) is one env's malformed answer: that
env's episode is truncated with ``info["error"]``, and the other envs' results come back, on every backend."""

from __future__ import annotations

from fractions import Fraction
from typing import Any

import pytest

from gem_core.env import Env
from gem_core.vector import make_vec

BACKENDS = ["sync", "thread", "process", "async"]

#: The last has more digits than Python will turn into a string, so the error cannot quote it either.
HUGE_REWARDS = {"int": 10**400, "negative int": -(10**400), "Fraction": Fraction(10**400, 3), "5000-digit int": 10**5000}


class RewardEcho(Env):
    """Counts steps; a step's reward is the one named by its action in :data:`HUGE_REWARDS`, else 1.0."""

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        super().reset(seed=seed)
        self.count = 0
        return "start", {}

    def step(self, action: str):
        self.count += 1
        return f"count {self.count}", HUGE_REWARDS.get(action, 1.0), False, False, {}

    def sample_random_action(self) -> str:
        return "a"


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("action", sorted(HUGE_REWARDS))
def test_a_reward_too_large_for_a_float_truncates_only_that_env(backend, action):
    vec = make_vec(RewardEcho, num_envs=2, backend=backend)
    vec.reset()
    obs, rewards, terminated, truncated, infos = vec.step([action, "a"])
    assert truncated.tolist() == [True, False] and not terminated.any() and rewards.tolist() == [0.0, 1.0]
    assert obs == ("start", "count 1")  # env 1's step is kept
    assert "reward" in infos["error"][0] and "finite" in infos["error"][0]
    obs, rewards, _, truncated, _ = vec.step(["a", "a"])  # env 0 autoresets; env 1 goes on
    assert obs == ("start", "count 2") and rewards.tolist() == [0.0, 1.0] and not truncated.any()
    vec.close()
