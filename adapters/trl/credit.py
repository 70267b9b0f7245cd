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

from gem_core.rollout.advantages import discounted_returns, return_batch_normalize, turn_to_token_advantages

__all__ = ["TurnCreditGRPOTrainer", "per_turn_token_advantages"]

TurnCredit = Literal["episode", "rebn", "reinforce", "baseline"]


def per_turn_token_advantages(
    turn_returns: list[list[float]], turn_spans: list[list[list[int]]], length: int,
    *, process_returns: list[list[float]] | None = None, process_index: int = 0, normalize: bool = True,
    scale: bool = True,
) -> torch.Tensor:
    """``(len(turn_returns), length)`` advantages: ReBN of per-turn returns, placed on each turn's tokens.

    ``process_returns`` holds every process's flat list of per-turn returns (in process order): the
    normalization runs over that whole population, as the batch is split across processes. By default
    the batch is this process's alone. ``normalize=False`` places the returns as they are (vanilla REINFORCE);
    ``scale=False`` subtracts the batch mean only.
    """
    flat = [float(g) for row in turn_returns for g in row]
    if normalize:
        parts = process_returns if process_returns is not None else [flat]
        offset = sum(len(part) for part in parts[:process_index])
        per_turn = return_batch_normalize([g for part in parts for g in part], scale=scale)[offset : offset + len(flat)]
    else:
        per_turn = np.asarray(flat, dtype=np.float64)
    rows, k = [], 0
    for row_returns, spans in zip(turn_returns, turn_spans):
        rows.append(turn_to_token_advantages(per_turn[k : k + len(row_returns)], [tuple(s) for s in spans], length))
        k += len(row_returns)
    return torch.tensor(np.stack(rows), dtype=torch.float32)


class TurnCreditGRPOTrainer(GRPOTrainer):
    """``trl.GRPOTrainer`` whose advantages are per turn (see the module docstring).

    Args:
        turn_credit: ``"rebn"`` (per-turn ReBN), ``"reinforce"`` (per-turn returns, no baseline),
            ``"baseline"`` (per-turn returns minus the batch mean) or ``"episode"`` (stock GRPO on the
            episode return).
        gamma: discount over turns for the per-turn credits.
        *args, **kwargs: ``GRPOTrainer``'s; ``rollout_func`` must be a
            :class:`~gem_adapters.trl.GemRolloutFunc` (it provides ``turn_rewards`` and ``turn_spans``).
    """

    def __init__(self, *args: Any, turn_credit: TurnCredit = "rebn", gamma: float = 1.0, **kwargs: Any):
        if turn_credit not in ("episode", "rebn", "reinforce", "baseline"):
            raise ValueError(
                f"turn_credit={turn_credit!r}: expected 'rebn' (per-turn ReBN), 'reinforce' (per-turn returns, "
                "no baseline), 'baseline' (per-turn returns minus the batch mean) or 'episode' (stock GRPO)."
            )
        if not 0.0 <= gamma <= 1.0:
            raise ValueError(f"gamma={gamma}: a discount must lie in [0, 1].")
        super().__init__(*args, **kwargs)
        self.turn_credit = turn_credit
        self.gamma = gamma

    def _generate_and_score_completions(self, inputs: list[dict[str, Any]]) -> dict[str, Any]:
        output = super()._generate_and_score_completions(inputs)
        if self.turn_credit == "episode":
            return output
        # TRL merged the rollout's extra fields into each input row before scoring.
        if any("turn_rewards" not in row or "turn_spans" not in row for row in inputs):
            raise ValueError(
                f"turn_credit={self.turn_credit!r} needs per-turn rewards and spans from the rollout: pass "
                "rollout_func=gem_adapters.trl.GemRolloutFunc(...) to the trainer, or use turn_credit='episode'."
            )
        turn_returns = [discounted_returns(row["turn_rewards"], self.gamma).tolist() for row in inputs]
        flat = [g for row in turn_returns for g in row]
        advantages = per_turn_token_advantages(
            turn_returns, [row["turn_spans"] for row in inputs], output["completion_ids"].shape[1],
            process_returns=gather_object([flat]), process_index=self.accelerator.process_index,
            normalize=self.turn_credit != "reinforce", scale=self.turn_credit == "rebn",
        )
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
