"""Write a GEM env, register it under an id, check it, and play it through `make` (locally or served).

    python examples/register_new_env.py                    # check and play the env below
    gem check custom:CountDown-v0 --import examples/register_new_env.py
    gem serve custom:CountDown-v0 --import examples/register_new_env.py   # then make("remote:http://127.0.0.1:8765/custom:CountDown-v0")

Three things make an env a good GEM env, and `gem check` tests each:
1. All randomness comes from `self.np_random`, seeded by `super().reset(seed=seed)`: the same seed
   gives the same episode (determinism).
2. A malformed action is an observation (`self.invalid_action(message)`), never an exception, and
   every step is quick and bounded whatever the model writes (hostile actions).
3. `reset`/`step` follow gymnasium's signatures and spaces (gymnasium's own checker).
"""

from __future__ import annotations

import re

from gem_core import Env, make, register
from gem_core.check import check_env

_ANSWER = re.compile(r"\\boxed\{\s*(-?\d{1,6})\s*\}")  # bounded: no nested or huge numbers reach int()


class CountDown(Env):
    """Reach the target by adding one of the offered numbers per turn; overshooting loses."""

    max_return = 1.0
    blocking = False  # a quick pure-Python step: run it inline, no thread hop

    def __init__(self, max_turns: int = 6, max_target: int = 30):
        self.max_turns = max_turns
        self.max_target = max_target

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple[str, dict]:
        super().reset(seed=seed)  # seeds self.np_random
        self.target = int(self.np_random.integers(10, self.max_target + 1))
        self.offers = sorted(int(n) for n in self.np_random.choice(range(1, 10), size=3, replace=False))
        self.total, self.turn = 0, 0
        return self._prompt(f"Reach exactly {self.target}."), {}

    def _prompt(self, head: str) -> str:
        return f"{head} Total so far: {self.total}. Add one of {self.offers}: answer like \\boxed{{{self.offers[0]}}}."

    def step(self, action: str) -> tuple[str, float, bool, bool, dict]:
        self.turn += 1
        match = _ANSWER.search(action[-1000:])  # look at the end only: the cost of a step stays bounded
        if match is None or int(match.group(1)) not in self.offers:
            return self.invalid_action(self._prompt("That is not one of the offered numbers."), truncated=self.turn >= self.max_turns)
        self.total += int(match.group(1))
        if self.total == self.target:
            return f"Exactly {self.target}. You win.", 1.0, True, False, {"success": True}
        if self.total > self.target:
            return f"{self.total} overshoots {self.target}. You lose.", 0.0, True, False, {"success": False}
        return self._prompt("Go on."), 0.0, False, self.turn >= self.max_turns, {}

    def sample_random_action(self) -> str:
        return f"\\boxed{{{int(self.np_random.choice(self.offers))}}}"


# An entry point may be the class itself or a "module:Class" string (imported on first use).
register("custom:CountDown-v0", CountDown)
register("custom:CountDown-v0-hard", CountDown, max_turns=4, max_target=60)


if __name__ == "__main__":
    for result in check_env(lambda: make("custom:CountDown-v0")):
        print(f"{'PASS' if result.ok else 'FAIL'}  {result.name}: {result.message}")

    env = make("custom:CountDown-v0")
    observation, _ = env.reset(seed=0)
    print("\n" + observation)
    done = False
    while not done:
        action = env.sample_random_action()
        observation, reward, terminated, truncated, _ = env.step(action)
        print(f"> {action}\n{observation} (reward {reward})")
        done = terminated or truncated
    # Served: `gem serve custom:CountDown-v0 --import examples/register_new_env.py`, then anywhere:
    # make("remote:http://127.0.0.1:8765/custom:CountDown-v0").
