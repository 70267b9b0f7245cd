"""TRL's GRPOTrainer on ``swe:Sample-v0`` through the rollout_func route, with a scripted policy in place
of sampling (a random tiny model never writes a tool call): the dataset row names the SWE env, the
episode's tool calls and the grader's reward reach the trainer's reward function."""

from __future__ import annotations

import json

import pytest

import gem_adapters.trl.rollout as rollout_module
from gem_adapters.trl import GemRolloutFunc, env_return_reward, make_dataset
from gem_core.testing import ScriptedPolicy
from gem_core.tools.sandbox import available_modes
from ci_guard import module_needs

_bubblewrap = module_needs("bwrap" in available_modes(), "the SWE grader runs in the bubblewrap sandbox")

FIX = {"path": "gemstats/__init__.py", "old": "    return (ordered[middle] + ordered[middle + 1]) / 2",
       "new": "    return (ordered[middle - 1] + ordered[middle]) / 2"}


def tool_call(name: str, **arguments) -> str:
    return f"<tool_call>{json.dumps({'name': name, 'arguments': arguments})}</tool_call>"


def test_grpo_trains_on_scripted_swe_episodes_rewarded_by_the_grader(grpo_config, fresh_model, tiny_tokenizer, monkeypatch):
    from trl import GRPOTrainer

    actions = [tool_call("view", path=FIX["path"]), tool_call("replace", **FIX), tool_call("submit")]
    monkeypatch.setattr(rollout_module, "trainer_policy", lambda trainer, n, **kwargs: ScriptedPolicy(tiny_tokenizer, actions))
    received: list[list[float]] = []

    def reward(completions, env_return, **kwargs):
        received.append(list(env_return))
        return env_return_reward(completions, env_return)

    rollout = GemRolloutFunc(max_new_tokens=256)
    trainer = GRPOTrainer(
        model=fresh_model, reward_funcs=reward, args=grpo_config(max_steps=1, max_completion_length=4096),
        processing_class=tiny_tokenizer, train_dataset=make_dataset("swe:Sample-v0", n=2, seed_start=0), rollout_func=rollout,
    )
    trainer.train()
    assert received and received[-1] == [1.0] * 4
    assert all(t.rewards == [0.0, 0.0, 1.0] for t in rollout.last_trajectories)
