"""``gem.utils.debug.run_and_print_episode``: play one episode with a policy and print every step, the
quickest look at what an env (or a vector env) says and pays."""

from __future__ import annotations

import time
from collections.abc import Callable
from pprint import pprint
from typing import Any

import numpy as np

__all__ = ["run_and_print_episode"]


def _show(title: str, value: Any) -> None:
    print("-" * 10, title, "-" * 10)
    if isinstance(value, (list, tuple)):
        for i, item in enumerate(value):
            print("-" * 5, f"{i + 1}/{len(value)}:")
            pprint(item)
    else:
        pprint(value)


def run_and_print_episode(env: Any, policy: Callable[[Any], Any], ignore_done: bool = False, max_steps: int = 1_000_000) -> None:
    """Reset ``env``, then step it with ``policy(observation)`` until the episode ends (every env of a
    vector env, unless ``ignore_done``) or ``max_steps`` steps, printing each step."""
    start = time.time()
    observation, _ = env.reset()
    for step in range(1, int(max_steps) + 1):
        action = policy(observation)
        next_observation, reward, terminated, truncated, _ = env.step(action)
        print("=" * 30)
        print(f"Step {step}")
        _show("observation", observation)
        _show("action", action)
        _show("reward", reward)
        print("terminated: ", terminated, "truncated: ", truncated)
        print("=" * 30)
        observation = next_observation
        done = np.logical_or(terminated, truncated)
        if not ignore_done and bool(np.all(done)):
            break
    print(f"----TIME: {time.time() - start:.2f} seconds")
