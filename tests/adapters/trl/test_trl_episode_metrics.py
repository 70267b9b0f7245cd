"""The episode statistics GemRolloutFunc logs beside TRL's metrics are those of every episode in TRL's logging
window: a rate is successes over episodes, a count the episodes played, however the batches of the window
split them (TRL averages a metric logged once per batch over the batches, unweighted)."""

from __future__ import annotations

import json

import pytest
from datasets import Dataset
from trl import GRPOTrainer

from gem_adapters.trl import GemRolloutFunc, env_return_reward
from gem_core import registry
from gem_core.env import Env

WINS, LOSES = "test:TrlEvenSeedWins-v0", "test:TrlAlwaysLoses-v0"


class EvenSeedWins(Env):
    """One turn; the episode succeeds when its seed is even."""

    blocking = False

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.seed_ = seed
        return f"Seed {seed}: say anything.", {}

    def step(self, action):
        win = self.seed_ % 2 == 0
        return "done", float(win), True, False, {"success": win}

    def sample_random_action(self):
        return "x"


class AlwaysLoses(EvenSeedWins):
    def step(self, action):
        return "done", 0.0, True, False, {"success": False}


@pytest.fixture
def two_tasks(monkeypatch):
    monkeypatch.setattr(registry, "_REGISTRY", dict(registry._REGISTRY))
    registry.register(WINS, EvenSeedWins)
    registry.register(LOSES, AlwaysLoses)


def row(env_id: str, seed: int) -> dict:
    return {"prompt": [{"role": "user", "content": "go", "gem": json.dumps({"env_id": env_id, "seed": seed, "env_kwargs": {}})}]}


def test_task_rates_and_counts_are_those_of_the_episodes_in_the_logging_window(two_tasks, grpo_config, fresh_model, tiny_tokenizer):
    # Two batches of two prompts (x2 generations) in one logging window: the first holds 2 episodes of WINS (both
    # won), the second 4 (all lost). The window's rate is 2/6; the mean of the two batches' rates would be 0.5.
    dataset = Dataset.from_list([row(WINS, 0), row(LOSES, 0), row(WINS, 1), row(WINS, 3)])
    rollout, played = GemRolloutFunc(max_new_tokens=4), []

    def rollout_func(prompts, trainer):
        out = rollout(prompts, trainer)
        played.append(list(rollout.last_trajectories))
        return out

    trainer = GRPOTrainer(
        model=fresh_model, reward_funcs=env_return_reward, processing_class=tiny_tokenizer, train_dataset=dataset,
        args=grpo_config(shuffle_dataset=False, max_steps=2, logging_steps=2), rollout_func=rollout_func,
    )
    trainer.train()

    episodes = [t for batch in played for t in batch]
    wins = [t for t in episodes if t.env_id == WINS]
    per_batch = [[t.metrics["success"] for t in batch if t.env_id == WINS] for batch in played]
    assert len(played) == 2 and len({len(b) for b in per_batch}) == 2, "the batches must hold different numbers of the task's episodes"
    assert len({sum(b) / len(b) for b in per_batch}) == 2, "and different rates, or the unweighted mean would be right too"
    logged = next(entry for entry in trainer.state.log_history if f"gem/task/{WINS}/success" in entry)
    assert logged[f"gem/task/{WINS}/success"] == pytest.approx(sum(t.metrics["success"] for t in wins) / len(wins))
    assert logged[f"gem/task/{WINS}/return"] == pytest.approx(sum(t.episode_return for t in wins) / len(wins))
    assert logged[f"gem/task/{WINS}/episodes"] == len(wins) == 6
    assert logged[f"gem/task/{LOSES}/episodes"] == 2
    assert logged["gem/episodes"] == len(episodes) == 8
    assert logged["gem/success"] == pytest.approx(sum(t.metrics["success"] for t in episodes) / len(episodes))
