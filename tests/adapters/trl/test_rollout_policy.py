"""How GemRolloutFunc samples with the trainer's model: full rounds, log-probs only where TRL uses them."""

from __future__ import annotations

import itertools
import threading
import time
from types import SimpleNamespace

import pytest

from gem_adapters.trl import GemRolloutFunc, make_dataset
from gem_adapters.trl.policy import trainer_policy
from gem_core.envs.game.guess_the_number import GuessTheNumber
from gem_core.rollout.policy import TransformersPolicy

ENV_ID = "game:GuessTheNumber-v0-easy"


def fake_trainer(model, tokenizer, **args):
    """The attributes of a GRPOTrainer that GemRolloutFunc reads (no vLLM)."""
    fields = dict(temperature=1.0, top_p=1.0, top_k=0, max_completion_length=512, chat_template_kwargs=None,
                  off_policy_mask_threshold=None)
    fields.update(args)
    return SimpleNamespace(
        processing_class=tokenizer, args=SimpleNamespace(**fields), model=model, use_vllm=False,
        accelerator=SimpleNamespace(unwrap_model=lambda m: m),
    )


@pytest.fixture
def batch_sizes(monkeypatch):
    sizes: list[int] = []
    real = TransformersPolicy.sample_batch

    def spy(self, prompts, *args, **kwargs):
        sizes.append(len(prompts))
        return real(self, prompts, *args, **kwargs)

    monkeypatch.setattr(TransformersPolicy, "sample_batch", spy)
    return sizes


def test_every_round_holds_every_live_episode_when_envs_step_in_threads(monkeypatch, tiny_tokenizer, tiny_model, batch_sizes):
    """Envs stepped in worker threads come back at different times; a round still waits for all of them."""
    monkeypatch.setattr(GuessTheNumber, "blocking", True)  # astep through the env thread pool
    real_step, calls = GuessTheNumber.step, itertools.count()

    def uneven_step(self, action):
        time.sleep(0.02 * (next(calls) % 3))  # a grader or tool call of uneven length
        return real_step(self, action)

    monkeypatch.setattr(GuessTheNumber, "step", uneven_step)
    prompts = [row["prompt"] for row in make_dataset(ENV_ID, 3)] * 2
    rollout = GemRolloutFunc(max_turns=3, max_new_tokens=4)
    out = rollout(prompts, fake_trainer(tiny_model, tiny_tokenizer))
    turns = [t.num_turns for t in rollout.last_trajectories]
    live = [sum(n > k for n in turns) for k in range(max(turns))]
    assert batch_sizes == live, f"rounds {batch_sizes} for live episodes per turn {live}"
    assert len(out["completion_ids"]) == len(prompts)


def test_generation_runs_on_the_trainers_thread(monkeypatch, tiny_tokenizer, tiny_model):
    """As TRL's own generate does: on a GPU, generating in a worker thread under accelerate's autocast
    wrapper made each turn 2.3x slower (bench/results/h100/generate_thread_diagnosis.txt)."""
    threads: list[int] = []
    real = TransformersPolicy.sample_batch

    def spy(self, prompts, *args, **kwargs):
        threads.append(threading.get_ident())
        return real(self, prompts, *args, **kwargs)

    monkeypatch.setattr(TransformersPolicy, "sample_batch", spy)
    prompts = [row["prompt"] for row in make_dataset(ENV_ID, 2)] * 2
    GemRolloutFunc(max_turns=2, max_new_tokens=4)(prompts, fake_trainer(tiny_model, tiny_tokenizer))
    assert threads and set(threads) == {threading.get_ident()}


def test_trainer_policy_waits_for_the_rollouts_episodes_in_one_call(tiny_tokenizer, tiny_model):
    policy = trainer_policy(fake_trainer(tiny_model, tiny_tokenizer), 40)
    assert policy.live == 40 and policy.max_batch_size == 40


@pytest.mark.parametrize(
    ("switch", "threshold", "recorded"),
    [(None, None, False), (None, 0.5, True), (True, None, True), (False, 0.5, False)],
)
def test_logprobs_are_recorded_where_trl_uses_them_or_when_asked(tiny_tokenizer, tiny_model, switch, threshold, recorded):
    prompts = [row["prompt"] for row in make_dataset(ENV_ID, 2)]
    rollout = GemRolloutFunc(max_turns=2, max_new_tokens=3, logprobs=switch)
    out = rollout(prompts, fake_trainer(tiny_model, tiny_tokenizer, off_policy_mask_threshold=threshold))
    if not recorded:
        assert out["logprobs"] is None
        assert not any(t.metrics["has_logprobs"] for t in rollout.last_trajectories)
        return
    for logprobs, completion, mask in zip(out["logprobs"], out["completion_ids"], out["env_mask"]):
        assert len(logprobs) == len(completion) == len(mask)
        assert all(lp < 0.0 for lp, m in zip(logprobs, mask) if m == 1)  # a sampled token's log-prob
        assert all(lp == 0.0 for lp, m in zip(logprobs, mask) if m == 0)


@pytest.mark.parametrize("top_k", [None, 0, -1])
def test_max_new_tokens_none_samples_up_to_the_completion_budget_and_vllm_s_top_k_is_off(monkeypatch, tiny_tokenizer, tiny_model, top_k):
    """The config takes max_new_tokens=None and TRL's top_k=-1 (vLLM's "off"); SamplingParams now refuses None and a
    negative top_k, so the rollout maps them: the first turn may sample what the completion budget allows."""
    seen: list[tuple[int, int]] = []
    real = TransformersPolicy.sample_batch

    def spy(self, prompts, sampling, max_new_tokens, *args, **kwargs):
        seen.append((max_new_tokens, sampling.top_k))
        return real(self, prompts, sampling, max_new_tokens, *args, **kwargs)

    monkeypatch.setattr(TransformersPolicy, "sample_batch", spy)
    prompts = [row["prompt"] for row in make_dataset(ENV_ID, 1)]
    GemRolloutFunc(max_turns=1, max_new_tokens=None)(prompts, fake_trainer(tiny_model, tiny_tokenizer, max_completion_length=6, top_k=top_k))
    assert seen and seen[0][1] == 0 and 0 < seen[0][0] <= 6
