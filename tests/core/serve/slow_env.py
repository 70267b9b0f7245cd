"""``test:Slow-v0`` for the serve tests (imported by ``gem serve --import``): steps that sleep, raise or hang.

The server's env thread pool is shrunk to ``GEM_TEST_ENV_THREADS`` threads (when set) so that a few
hung steps fill it.
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

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        Slow.resets += 1
        if options and options.get("refuse"):
            raise ValueError("option 'refuse' is not supported")
        return "ready", {"resets": Slow.resets}

    def step(self, action):
        if action.startswith("sleep"):
            time.sleep(float(action[5:]))
        if action == "raise":
            raise RuntimeError("the env broke")
        return "ok", 1.0, False, False, {}

    def sample_random_action(self):
        return "a"


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
