"""An eval backend that plays no model, for tests of what ``evaluate`` checks and writes around the episodes."""

from __future__ import annotations


class OneStepBackend:
    """Each episode is one reset and one recorded reward (enough for a record); counts the episodes it played."""

    kind = "scripted"
    model_name = "scripted"
    settings: dict = {}

    def __init__(self):
        self.episodes = 0

    async def run_episode(self, env, env_id, seed, config, record):
        self.episodes += 1
        observation, _ = await env.areset(seed=seed)
        record.transcript = [{"role": "user", "content": observation}]
        record.rewards.append(0.0)

    async def aclose(self):
        pass
