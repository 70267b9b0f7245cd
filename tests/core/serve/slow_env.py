"""``test:Slow-v0`` for the serve tests (imported by ``gem serve --import``): steps that sleep, raise or hang.

The server's env thread pool is shrunk to ``GEM_TEST_ENV_THREADS`` threads (when set) so that a few
hung steps fill it. While the file named by ``GEM_TEST_SLOW_INIT`` exists, building an env takes 6 s.
Every reset's info counts what the server did to this process's envs (closes, calls on closed envs).
"""

import asyncio
import os
import time

import gem_core.env
from gem_core.env import Env
from gem_core.registry import register

if os.environ.get("GEM_TEST_ENV_THREADS"):
    gem_core.env.ENV_THREADS.max_workers = int(os.environ["GEM_TEST_ENV_THREADS"])


class Slow(Env):
    resets = 0  # reset calls in this server process, refused ones included
    closes = 0  # close calls in this server process
    closed_while_stepping = 0  # close calls that came while a step of the same env was running
    used_after_close = 0  # steps started on an env already closed

    def __init__(self):
        super().__init__()
        if os.environ.get("GEM_TEST_SLOW_INIT") and os.path.exists(os.environ["GEM_TEST_SLOW_INIT"]):
            time.sleep(6)
        self.stepping = self.closed = False
        self.sample_sleep = self.close_sleep = 0.0

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        Slow.resets += 1
        if options and options.get("refuse"):
            raise ValueError("option 'refuse' is not supported")
        options = options or {}
        self.sample_sleep, self.close_sleep = options.get("sample_sleep", 0.0), options.get("close_sleep", 0.0)
        counts = {"closes": Slow.closes, "closed_while_stepping": Slow.closed_while_stepping, "used_after_close": Slow.used_after_close}
        return "ready", {"resets": Slow.resets, **counts}

    def step(self, action):
        if self.closed:
            Slow.used_after_close += 1
        self.stepping = True
        try:
            if action.startswith("sleep"):
                time.sleep(float(action[5:]))
        finally:
            self.stepping = False
        if action == "raise":
            raise RuntimeError("the env broke")
        if action == "circular":
            info = {}
            info["self"] = info
            return "ok", 1.0, False, False, info
        if action == "deep":
            info = nested = {}
            for _ in range(5000):
                nested["a"] = {}
                nested = nested["a"]
            return "ok", 1.0, False, False, info
        if action == "nan":
            return "ok", float("nan"), False, False, {"x": float("inf"), "y": [float("-inf"), 1.5]}
        return "ok", 1.0, False, False, {}

    def sample_random_action(self):
        time.sleep(self.sample_sleep)
        return "a"

    def close(self):
        if self.stepping:
            Slow.closed_while_stepping += 1
        Slow.closes += 1
        self.closed = True
        time.sleep(self.close_sleep)


class HangsAsync(Slow):
    """A native async step that never returns: the server's timeout cancels it (no thread to hold)."""

    cancelled = 0

    def reset(self, *, seed=None, options=None):
        observation, info = super().reset(seed=seed, options=options)
        return observation, {**info, "cancelled": HangsAsync.cancelled}

    async def astep(self, action):
        try:
            await asyncio.sleep(3600)
        except asyncio.CancelledError:
            HangsAsync.cancelled += 1
            raise


register("test:Slow-v0", Slow)
register("test:HangsAsync-v0", HangsAsync)
