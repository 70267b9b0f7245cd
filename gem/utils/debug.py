"""``gem.utils.debug``: GEM's episode printers: play one episode with a policy and print every step, the
quickest look at what an env (or a vector env) says and pays."""

from __future__ import annotations

import time
from collections.abc import Callable
from pprint import pprint
from typing import Any

import numpy as np

__all__ = ["ppprint", "run_and_print_episode", "run_and_print_episode_async", "run_and_print_episode_with_selective_step"]


def ppprint(value: Any) -> None:
    """Pretty-print ``value``; a list or tuple item by item, numbered (one item per env of a vector env)."""
    if isinstance(value, (list, tuple)):
        for i, item in enumerate(value):
            print("-" * 5, f"{i + 1}/{len(value)}:")
            pprint(item)
            print("")
    else:
        pprint(value)


def _show(title: str, value: Any) -> None:
    print("-" * 10, title, "-" * 10)
    ppprint(value)


def _print_step(step: int, shown: list[tuple[str, Any]], terminated: Any, truncated: Any) -> bool:
    """Print one step; True when every env is done."""
    print("=" * 30)
    print(f"Step {step}")
    for title, value in shown:
        _show(title, value)
    print("terminated: ", terminated, "truncated: ", truncated)
    print("=" * 30)
    return bool(np.all(np.logical_or(terminated, truncated)))


def run_and_print_episode(env: Any, policy: Callable[[Any], Any], ignore_done: bool = False, max_steps: int = 1_000_000) -> None:
    """Reset ``env``, then step it with ``policy(observation)`` until the episode ends (every env of a
    vector env, unless ``ignore_done``) or ``max_steps`` steps, printing each step."""
    start = time.time()
    observation, _ = env.reset()
    for step in range(1, int(max_steps) + 1):
        action = policy(observation)
        next_observation, reward, terminated, truncated, _ = env.step(action)
        done = _print_step(step, [("observation", observation), ("action", action), ("reward", reward)], terminated, truncated)
        observation = next_observation
        if not ignore_done and done:
            break
    print(f"----TIME: {time.time() - start:.2f} seconds")


def run_and_print_episode_with_selective_step(
    env: Any, policy: Callable[[Any], Any], ignore_done: bool = False, max_steps: int = 1_000_000
) -> None:
    """Like :func:`run_and_print_episode` for a vector env, but each step acts in a random half of the envs
    (``{index: action}``, drawn from numpy's global generator as GEM does), so the others wait."""
    start = time.time()
    observation, _ = env.reset()
    for step in range(1, int(max_steps) + 1):
        actions = policy(observation)
        active: dict[int, Any] = {}
        while not active:
            active = {i: a for i, a in enumerate(actions) if np.random.rand() > 0.5}
        next_observation, reward, terminated, truncated, _ = env.step(active)
        done = _print_step(step, [("action", active), ("next_observation", next_observation), ("reward", reward)], terminated, truncated)
        observation = next_observation
        if not ignore_done and done:
            break
    print(f"----TIME: {time.time() - start:.2f} seconds")


async def run_and_print_episode_async(
    env: Any, policy: Callable[[Any], Any], ignore_done: bool = False, max_steps: int = 1_000_000
) -> None:
    """:func:`run_and_print_episode` for an env whose ``reset`` and ``step`` are coroutines."""
    start = time.time()
    observation, _ = await env.reset()
    for step in range(1, int(max_steps) + 1):
        action = policy(observation)
        next_observation, reward, terminated, truncated, _ = await env.step(action)
        done = _print_step(step, [("observation", observation), ("action", action), ("reward", reward)], terminated, truncated)
        observation = next_observation
        if not ignore_done and done:
            break
    print(f"----TIME: {time.time() - start:.2f} seconds")
