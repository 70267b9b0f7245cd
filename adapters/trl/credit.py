"""Per-turn credit inside TRL: REINFORCE over turns, with or without Return Batch Normalization.

GRPO gives every token of a completion the same advantage, the group-normalized episode return. In a
multi-turn episode that blames the good early move for the late blunder. ``GRPOTrainer`` accepts
advantages of shape ``(batch, tokens)`` from subclasses (``_compute_loss`` unsqueezes only 1-D
advantages), so :class:`TurnCreditGRPOTrainer` overrides one method: after the stock
``_generate_and_score_completions`` it replaces the advantages with per-token ones computed by the core,
and leaves TRL's loss, clipping, logging and optimizer untouched.

With ``turn_credit="rebn"`` each turn's discounted return ``G_t = r_t + gamma * G_{t+1}`` is normalized
over all turns of the batch (across processes), and every sampled token of turn ``t`` gets that value;
environment tokens are masked out of the loss anyway. ``turn_credit="reinforce"`` puts the raw ``G_t``
there (vanilla REINFORCE: no baseline, no normalization), the reference ReBN is measured against
(``bench/learning/compare.py``); ``turn_credit="baseline"`` subtracts the batch mean but does not divide
by the std (ReBN without its scaling, an ablation). ``turn_credit="episode"`` keeps stock GRPO.
"""

from __future__ import annotations

from typing import Any, Literal

import numpy as np
import torch
from accelerate.utils import gather_object
from trl import GRPOTrainer

from gem_core.errors import InvalidArgument
from gem_core.rollout.advantages import discounted_returns, turn_returns_to_token_advantages
from gem_core.rollout.options import check_episode_options

__all__ = ["TurnCreditGRPOTrainer"]

TurnCredit = Literal["episode", "rebn", "reinforce", "baseline"]


class TurnCreditGRPOTrainer(GRPOTrainer):
    """``trl.GRPOTrainer`` whose advantages are per turn (see the module docstring).

    The per-turn credits come from the env's turn rewards alone, so with a per-turn ``turn_credit`` the trainer takes
    one reward function (:func:`~gem_adapters.trl.env_return_reward`, whose episode return TRL logs as ``reward``) and
    no ``reward_weights`` other than 1: another reward function or a weight would have no effect on what is trained.
    To add a reward to the env's, make it part of the env's turn rewards (a wrapper), or use ``turn_credit="episode"``,
    which is stock GRPO over all reward functions and weights.

    Args:
        turn_credit: ``"rebn"`` (per-turn ReBN), ``"reinforce"`` (per-turn returns, no baseline),
            ``"baseline"`` (per-turn returns minus the batch mean) or ``"episode"`` (stock GRPO on the
            episode return).
        gamma: discount over turns for the per-turn credits.
        *args: ``GRPOTrainer``'s.
        **kwargs: ``GRPOTrainer``'s; ``rollout_func`` must be a
            :class:`~gem_adapters.trl.GemRolloutFunc` (it provides ``turn_rewards`` and ``turn_spans``).

    Raises:
        InvalidArgument: ``turn_credit`` is not one of the four, or ``gamma`` is outside ``[0, 1]``; a per-turn
            ``turn_credit`` with more than one reward function or a reward weight other than 1; in training, a
            per-turn ``turn_credit`` without ``GemRolloutFunc``'s ``turn_rewards`` and ``turn_spans``.
    """

    def __init__(self, *args: Any, turn_credit: TurnCredit = "rebn", gamma: float = 1.0, **kwargs: Any):
        if turn_credit not in ("episode", "rebn", "reinforce", "baseline"):
            raise InvalidArgument(
                f"turn_credit={turn_credit!r}: expected 'rebn' (per-turn ReBN), 'reinforce' (per-turn returns, "
                "no baseline), 'baseline' (per-turn returns minus the batch mean) or 'episode' (stock GRPO)."
            )
        check_episode_options("TurnCreditGRPOTrainer", gamma=gamma)
        super().__init__(*args, **kwargs)
        self.turn_credit = turn_credit
        self.gamma = gamma
        if turn_credit != "episode":
            self._refuse_ignored_rewards()

    def _refuse_ignored_rewards(self) -> None:
        """Refuse reward functions and weights the per-turn credits would ignore (TRL has normalized both by now)."""
        where = f"TurnCreditGRPOTrainer(turn_credit={self.turn_credit!r})"
        fix = ("pass reward_funcs=env_return_reward alone and no reward_weights (a reward of your own goes in the env's turn "
               "rewards), or use turn_credit='episode' (stock GRPO over every reward function and weight)")
        if len(self.reward_funcs) > 1:
            raise InvalidArgument(
                f"{where} trains on the env's turn rewards alone, but got {len(self.reward_funcs)} reward functions "
                f"({', '.join(self.reward_func_names)}), whose rewards would have no effect; {fix}."
            )
        weights = self.reward_weights.tolist()
        if any(weight != 1.0 for weight in weights):
            raise InvalidArgument(
                f"{where} trains on the env's turn rewards alone, but got reward_weights={weights}, which would have no "
                f"effect; {fix}."
            )

    def _generate_and_score_completions(self, inputs: list[dict[str, Any]]) -> dict[str, Any]:
        output = super()._generate_and_score_completions(inputs)
        if self.turn_credit == "episode":
            return output
        # TRL merged the rollout's extra fields into each input row before scoring.
        if any("turn_rewards" not in row or "turn_spans" not in row for row in inputs):
            raise InvalidArgument(
                f"turn_credit={self.turn_credit!r} needs per-turn rewards and spans from the rollout: pass "
                "rollout_func=gem_adapters.trl.GemRolloutFunc(...) to the trainer, or use turn_credit='episode'."
            )
        turn_returns = [discounted_returns(row["turn_rewards"], self.gamma) for row in inputs]
        # The batch is split across processes: normalize over every process's turns, in process order.
        parts = gather_object([np.concatenate(turn_returns).tolist()])
        advantages = torch.tensor(turn_returns_to_token_advantages(
            turn_returns, [row["turn_spans"] for row in inputs], output["completion_ids"].shape[1],
            normalize=self.turn_credit != "reinforce", scale=self.turn_credit == "rebn",
            population=np.concatenate(parts), offset=sum(len(part) for part in parts[: self.accelerator.process_index]),
        ), dtype=torch.float32)
        output["advantages"] = advantages.to(output["completion_ids"].device)
        self._log_advantages(advantages, output)
        return output

    def _log_advantages(self, advantages: torch.Tensor, output: dict[str, Any]) -> None:
        """Replace the stock GRPO advantages TRL logged for this batch (completions table, rich printout)
        with the ones trained on: each completion's mean advantage over its sampled tokens."""
        mask = output["completion_mask"].cpu() * output.get("tool_mask", torch.ones_like(output["completion_mask"])).cpu()
        per_completion = (advantages * mask).sum(1) / mask.sum(1).clamp(min=1)
        logged = gather_object(per_completion.tolist())
        logs = self._logs["advantages"]
        for _ in range(min(len(logged), len(logs))):
            logs.pop()
        logs.extend(logged)
