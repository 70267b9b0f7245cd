"""REINFORCE with Return Batch Normalization (ReBN) over turns, as a verl advantage estimator.

Registered in verl's own registry (``verl.trainer.ppo.core_algos.register_adv_est``) under
:data:`ESTIMATOR_NAME`; select it with ``algorithm.adv_estimator=gem_rebn`` and set the discount with
``algorithm.gamma``. verl calls it with the batch's ``token_level_rewards`` and ``response_mask``:

1. turns are the runs of 1s in ``response_mask`` (GEM's loop masks every env token between two
   turns with 0, so each run is one turn's sampled tokens);
2. a turn's reward is the sum of ``token_level_rewards`` from its first token up to the next turn
   (with ``reward_placement: turn`` in the agent loop config that is exactly the turn's reward; KL
   penalties in the reward, if enabled, are summed in too);
3. ``G_t = r_t + gamma * G_{t+1}`` per episode, then ReBN over every transition of the batch, then each
   turn's advantage on its tokens, all with :mod:`gem_core.rollout.advantages`.

A turn that sampled no token (the engine returned an empty completion) has no tokens to train and no run of
1s, so it is no transition here, as it is none for verl's token-level estimators: the agent loop puts its
reward on the last sampled token before it (:attr:`gem_core.rollout.TokenTrajectory.token_rewards`), and that
reward counts for the previous sampled turn, undiscounted (GAE and REINFORCE++ also discount per sampled
token, and an empty turn adds none). With ``gamma < 1`` the returns then differ from those of GEM's own
``TokenTrajectory.returns(gamma)`` over ``turn_scores``, which counts the empty turn as a step.

verl gives an estimator no per-row record of the loop's turns (``extras["turn_spans"]`` stays in
``non_tensor_batch``), only ``response_mask``. Its decoupled token-level rollout rejection
(``algorithm.rollout_correction.rollout_rs=token_k*``) zeroes single tokens of that mask first, which would split a
turn in two, so the estimator refuses that config; sequence-level rejection and ``bypass_mode`` keep turns whole.

verl's registry lives in the process that imports this module, and verl computes advantages in its
trainer process (a Ray actor), so the module must be imported there: ``gem`` declares it as a
``verl.plugins`` entry point, which ``import verl`` loads in every process; with an install that lacks
the entry point, set ``VERL_USE_EXTERNAL_MODULES=gem_adapters.verl.advantage``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from gem_adapters.framework_version import check_verl_version
from gem_core.errors import InvalidArgument
from gem_core.rollout.advantages import discounted_returns, turn_returns_to_token_advantages

check_verl_version()  # before verl is imported: a wrong install fails with the install line first

import torch  # noqa: E402
from verl.trainer.ppo.core_algos import ADV_ESTIMATOR_REGISTRY, register_adv_est  # noqa: E402

__all__ = ["ESTIMATOR_NAME", "compute_rebn_advantage", "turns_from_mask"]

ESTIMATOR_NAME = "gem_rebn"
"""The name to put in ``algorithm.adv_estimator``."""


def turns_from_mask(response_mask: np.ndarray) -> list[tuple[int, int]]:
    """``[start, end)`` of each run of 1s in a 1-D response mask: one per turn."""
    mask = np.asarray(response_mask).astype(bool).astype(np.int8)
    edges = np.diff(np.concatenate([[0], mask, [0]]))
    starts = np.flatnonzero(edges == 1)
    ends = np.flatnonzero(edges == -1)
    return [(int(s), int(e)) for s, e in zip(starts, ends, strict=True)]


def turn_rewards_from_tokens(token_rewards: np.ndarray, spans: list[tuple[int, int]]) -> np.ndarray:
    """Each turn's reward: the token rewards from its start up to the next turn's start.

    Rewards before the first turn count for the first turn, so the turn rewards always sum to the row. An empty
    turn's reward, on the previous turn's last sampled token (module docstring), counts for that turn.
    """
    bounds = [0] + [start for start, _ in spans[1:]] + [len(token_rewards)]
    return np.array([token_rewards[bounds[i] : bounds[i + 1]].sum() for i in range(len(spans))], dtype=np.float64)


def _field(config: Any, key: str) -> Any:
    if config is None:
        return None
    return config.get(key, None) if hasattr(config, "get") else getattr(config, key, None)


def _gamma(config: Any) -> float:
    gamma = _field(config, "gamma")
    return float(1.0 if gamma is None else gamma)


_TOKEN_LEVEL_REJECTION = ("token_k1", "token_k2", "token_k3")  # verl's rollout_corr_helper.TOKEN_LEVEL_ROLLOUT_RS_OPTIONS


def _refuse_token_level_rejection(config: Any) -> None:
    """verl's decoupled rollout correction zeroes rejected tokens of ``response_mask`` before the advantages, and
    the estimator only gets that mask (verl passes it no per-row turn record), so a rejected token would split its
    turn into two transitions with different returns. Sequence-level options zero whole rows, and bypass mode
    rejects in the loss only: neither changes a turn here."""
    correction = _field(config, "rollout_correction")
    if correction is None or _field(correction, "bypass_mode"):
        return
    options = [part.strip() for part in str(_field(correction, "rollout_rs") or "").split(",")]
    token_level = [option for option in options if option in _TOKEN_LEVEL_REJECTION]
    if token_level:
        raise InvalidArgument(
            f"algorithm.adv_estimator={ESTIMATOR_NAME} cannot take algorithm.rollout_correction.rollout_rs="
            f"{_field(correction, 'rollout_rs')!r}: token-level rejection ({', '.join(token_level)}) zeroes single "
            "tokens of response_mask before the advantages, and gem_rebn reads turns as its runs of 1s, so one "
            "rejected token would split a turn in two. Use a sequence-level option (seq_mean_k1, seq_mean_k3, "
            "seq_max_k2, ...), or set algorithm.rollout_correction.bypass_mode=true (rejection then applies in the "
            "loss only), or drop rollout_rs."
        )


def compute_rebn_advantage(
    token_level_rewards: torch.Tensor,
    response_mask: torch.Tensor,
    config: Any = None,
    **kwargs: Any,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-turn ReBN advantages and per-turn discounted returns, both spread over each turn's tokens.

    Args:
        token_level_rewards: ``(batch, response_length)``.
        response_mask: ``(batch, response_length)``, 1 on sampled tokens.
        config: verl's ``algorithm`` config; ``gamma`` is read from it (default 1.0).
        kwargs: the other arguments verl passes to estimators (``index``, ...); unused, since ReBN
            normalizes over the whole batch, not per prompt group.

    Returns:
        ``(advantages, returns)``, each ``(batch, response_length)`` and 0 outside sampled tokens.

    Raises:
        InvalidArgument: ``config.rollout_correction.rollout_rs`` holds a token-level option (``token_k1``,
            ``token_k2``, ``token_k3``) outside bypass mode: verl would have zeroed single tokens of
            ``response_mask``, which this estimator would read as turn boundaries.
    """
    _refuse_token_level_rejection(config)
    gamma = _gamma(config)
    rewards = token_level_rewards.detach().to(torch.float64).cpu().numpy()
    masks = response_mask.detach().cpu().numpy()
    length = rewards.shape[1]
    spans = [turns_from_mask(m) for m in masks]
    returns = [discounted_returns(turn_rewards_from_tokens(r, s), gamma) for r, s in zip(rewards, spans, strict=True)]
    advantages = turn_returns_to_token_advantages(returns, spans, length)
    token_returns = turn_returns_to_token_advantages(returns, spans, length, normalize=False)
    dtype, device = token_level_rewards.dtype, token_level_rewards.device
    return (
        torch.as_tensor(advantages, dtype=dtype, device=device),
        torch.as_tensor(token_returns, dtype=dtype, device=device),
    )


# Importing the module twice (the verl plugin, then by path) must not register a second function object.
if ESTIMATOR_NAME not in ADV_ESTIMATOR_REGISTRY:
    register_adv_est(ESTIMATOR_NAME)(compute_rebn_advantage)
