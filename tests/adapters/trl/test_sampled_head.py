"""The env's observation tokens stay out of TRL's LM head, and the loss does not change.

Real ``trl.GRPOTrainer`` on CPU with its own fused LM head; the only spy is on TRL's chunked log-prob
function, to count the positions its head projects.
"""

from __future__ import annotations

import pytest
import torch
import trl.trainer.utils as trl_utils
from trl import GRPOTrainer

from gem_adapters.trl import GemRolloutFunc, env_return_reward, make_dataset
from gem_adapters.trl.sampled_head import SampledTokensHead

ENV_ID = "game:GuessTheNumber-v0-easy"


@pytest.fixture
def projected(monkeypatch):
    """The number of positions each call of TRL's fused head projects through the LM head."""
    rows: list[int] = []
    real = trl_utils._ChunkedLogProbFunction

    class Counting(real):
        @staticmethod
        def forward(ctx, hidden, *args):
            rows.append(hidden.shape[0])
            return real.forward(ctx, hidden, *args)

    monkeypatch.setattr(trl_utils, "_ChunkedLogProbFunction", Counting)
    return rows


def spread(completion_ids, **kwargs):
    """A reward that differs between a group's copies (they sample different tokens).

    The random model plays every episode of the game equally badly, so the env's returns are equal within
    each group: the advantages, the loss and every gradient would be exactly zero with any LM head (the
    KL term too: the policy is its reference). With this reward the loss's value is still about zero (a
    group's advantages sum to zero), so the gradients are what shows a wrong head.
    """
    return [float(sum(ids)) for ids in completion_ids]


def build(grpo_config, model, tokenizer, *, score_env_tokens: bool, **config):
    return GRPOTrainer(
        model=model, reward_funcs=[env_return_reward, spread], args=grpo_config(**config), processing_class=tokenizer,
        train_dataset=make_dataset(ENV_ID, n=8, seed_start=0),
        rollout_func=GemRolloutFunc(max_new_tokens=12, score_env_tokens=score_env_tokens),
    )


def loss_and_grads(trainer, inputs):
    trainer.model.train()  # TRL logs its loss metrics under "train" only in training mode
    trainer.current_gradient_accumulation_steps = 1  # set by Trainer.train() otherwise
    trainer.model.zero_grad()
    loss = trainer.compute_loss(trainer.model, inputs)
    loss.backward()
    grads = {name: p.grad.clone() for name, p in trainer.model.named_parameters() if p.grad is not None}
    return loss.detach(), grads


def test_observations_skip_the_head_and_the_loss_and_gradient_are_unchanged(grpo_config, fresh_model, tiny_tokenizer, projected, tmp_path):
    fresh_model.save_pretrained(tmp_path / "model")  # with beta > 0, TRL loads its reference model from the path
    skipping = build(grpo_config, str(tmp_path / "model"), tiny_tokenizer, score_env_tokens=False, beta=0.04)
    scoring = build(grpo_config, str(tmp_path / "model"), tiny_tokenizer, score_env_tokens=True, beta=0.04)
    rows = [skipping.train_dataset[i] for i in range(4)]

    inputs = skipping._generate_and_score_completions(rows)  # the reference model's log-probs go through the head too
    sampled = int((inputs["completion_mask"] * inputs["tool_mask"]).sum())
    observed = int((inputs["completion_mask"] * (1 - inputs["tool_mask"])).sum())
    assert observed > 0, "the episodes had no env tokens: nothing to test"
    groups = inputs["advantages"].view(-1, skipping.num_generations)
    assert bool((groups.abs().amax(dim=1) > 0).all()), "a group's copies got equal rewards: its loss and gradient are zero"
    assert projected == [sampled], "the reference model's head projected more than the sampled positions"

    projected.clear()
    loss, grads = loss_and_grads(skipping, inputs)
    assert projected == [sampled]
    projected.clear()
    reference_loss, reference_grads = loss_and_grads(scoring, inputs)
    batch, length = inputs["prompt_ids"].shape[0], inputs["prompt_ids"].shape[1] + inputs["completion_ids"].shape[1]
    assert projected == [batch * (length - 1)], "TRL on CPU projects every position"

    assert torch.allclose(loss, reference_loss, rtol=1e-5, atol=1e-6)
    assert grads.keys() == reference_grads.keys()
    for name, grad in grads.items():
        assert bool(reference_grads[name].any()), f"{name}: a zero gradient compares nothing"
        assert torch.allclose(grad, reference_grads[name], rtol=1e-4, atol=1e-6), name
    for metric in ("entropy", "kl"):  # TRL's metrics over the sampled tokens, the reference model's included
        assert skipping._metrics["train"][metric][-1] == pytest.approx(scoring._metrics["train"][metric][-1], rel=1e-5, abs=1e-7)
    assert skipping._gem_sampled_head.positions_skipped >= 2 * observed  # reference pass and loss pass
    assert skipping._gem_sampled_head.rows_unmatched == 0


def test_training_steps_and_generation_run_with_the_head_wrapped(grpo_config, fresh_model, tiny_tokenizer):
    trainer = build(grpo_config, fresh_model, tiny_tokenizer, score_env_tokens=False, max_steps=2)
    trainer.train()  # the second rollout samples through the wrapped forward
    assert trainer._gem_sampled_head.positions_skipped > 0
    assert all(torch.isfinite(torch.tensor(e["loss"])) for e in trainer.state.log_history if "loss" in e)


def test_unknown_or_ambiguous_completions_are_scored_in_full():
    head = SampledTokensHead()
    head.register([[5, 6, 7], [5, 6, 7], [8, 9]], [[1, 0, 1], [1, 1, 0], [1, 0]])
    labels = torch.tensor([[-100, 5, 6, 7], [-100, -100, 8, 9], [-100, 1, 2, 3]])
    masked = head.mask_labels(labels)
    assert masked[0].tolist() == [-100, 5, 6, 7]  # two masks for the same tokens: left as TRL labels them
    assert masked[1].tolist() == [-100, -100, 8, -100]
    assert masked[2].tolist() == [-100, 1, 2, 3] and head.rows_unmatched == 1
    head.register([[1, 2, 3]], [[0, 1, 1]])
    head.register([[4]], [[1]])
    assert head.mask_labels(labels)[2].tolist() == [-100, -100, 2, 3], "the rollout before the latest is kept"
    head.register([[4]], [[1]])
    assert head.mask_labels(labels)[2].tolist() == [-100, 1, 2, 3], "older rollouts are dropped"
