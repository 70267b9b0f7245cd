"""gem_rebn and verl's token-level rollout rejection sampling (``algorithm.rollout_correction.rollout_rs``)."""

from __future__ import annotations

import pytest
import torch

pytest.importorskip("verl.experimental.agent_loop", reason='the verl adapter tests need `pip install -e ".[verl]"`')

from verl.protocol import DataProto
from verl.trainer.config import AlgoConfig
from verl.trainer.config.algorithm import RolloutCorrectionConfig

from gem_adapters.verl.advantage import ESTIMATOR_NAME, compute_rebn_advantage
from gem_core.errors import InvalidArgument

# Two episodes: episode 0 has turn A on tokens 0..3, env tokens 4..5, turn B on 6..9 (reward 1 on token 9).
MASK = torch.tensor([[1, 1, 1, 1, 0, 0, 1, 1, 1, 1], [1, 1, 1, 1, 0, 0, 1, 1, 1, 1]], dtype=torch.float32)
REWARDS = torch.zeros(2, 10)
REWARDS[0, 9] = 1.0
REWARDS[1, 3] = 0.5


def _algorithm(rollout_rs: str | None, *, bypass_mode: bool = False) -> AlgoConfig:
    correction = RolloutCorrectionConfig(rollout_rs=rollout_rs, rollout_rs_threshold="0.5_2.0", bypass_mode=bypass_mode)
    return AlgoConfig(adv_estimator=ESTIMATOR_NAME, gamma=0.9, rollout_correction=correction)


@pytest.mark.parametrize("rollout_rs", ["token_k1", "token_k2", "seq_mean_k3, token_k3"])
def test_token_level_rejection_is_refused_before_it_splits_a_turn(rollout_rs):
    """Before the fix, a token that verl's token-level rejection zeroed in ``response_mask`` split its turn in two:
    tokens 0 and 2 of one turn got returns 0.81 and 0.9 (gamma 0.9), and ReBN normalized over three transitions
    instead of two. gem_rebn now refuses the config, naming the key and what to set instead."""
    rejected = MASK.clone()
    rejected[0, 1] = 0  # what verl's token_k1 rejection leaves in response_mask before compute_advantage
    with pytest.raises(InvalidArgument, match=r"algorithm\.rollout_correction\.rollout_rs") as caught:
        compute_rebn_advantage(REWARDS, rejected, _algorithm(rollout_rs))
    assert "seq_" in str(caught.value) and "bypass_mode" in str(caught.value)


def test_refused_through_verls_compute_advantage_with_its_composed_config():
    """Before the fix, verl's trainer config with ``rollout_rs=token_k1`` ran gem_rebn on the rejected mask and
    trained on the split turns without a word."""
    from conftest import compose_trainer_config
    from verl.trainer.ppo.ray_trainer import compute_advantage

    config = compose_trainer_config([
        f"algorithm.adv_estimator={ESTIMATOR_NAME}",
        "+algorithm.rollout_correction.rollout_rs=token_k1",
        "+algorithm.rollout_correction.rollout_rs_threshold=0.5_2.0",
    ]).algorithm
    data = DataProto.from_dict(tensors={"token_level_rewards": REWARDS, "response_mask": MASK.long()})
    with pytest.raises(InvalidArgument, match="token_k1"):
        compute_advantage(data, adv_estimator=ESTIMATOR_NAME, gamma=0.9, config=config)


@pytest.mark.parametrize(("rollout_rs", "bypass_mode"), [(None, False), ("seq_mean_k3", False), ("token_k1", True)])
def test_rejection_that_keeps_turns_whole_still_runs(rollout_rs, bypass_mode):
    """Sequence-level rejection zeroes whole rows, and bypass mode rejects tokens only in the loss (after the
    advantages), so neither changes a turn's tokens here: those configs must keep working."""
    advantages, returns = compute_rebn_advantage(REWARDS, MASK, _algorithm(rollout_rs, bypass_mode=bypass_mode))
    assert returns[0, :4].tolist() == pytest.approx([0.9] * 4)
    assert returns[0, 6:].tolist() == pytest.approx([1.0] * 4)
    assert torch.all(advantages[MASK == 0] == 0)
