"""Every private name of TRL this adapter uses, checked against trl 1.16.0.

``tests/adapters/trl/test_trl_private_api.py`` imports each from the installed TRL and fails, naming the
name, the version checked and what to do, when a release removed it or changed its signature or body.
Everything else the adapter touches is TRL's public API (``GRPOTrainer(rollout_func=...)``,
``environment_factory``, ``trl.trainer.utils.add_fused_lm_head``'s ``fused_lm_head`` forward).
"""

from __future__ import annotations

from gem_adapters.private_api import PrivateName

__all__ = ["PRIVATE_API", "CHECKED_TRL", "FRAMEWORK_MODULES"]

FRAMEWORK_MODULES = ("trl",)
"""The framework's top-level modules: a name imported from them that starts with ``_`` must be listed in :data:`PRIVATE_API`."""

CHECKED_TRL = "1.16.0"
"""The TRL version every entry of :data:`PRIVATE_API` was last read against."""

PRIVATE_API: tuple[PrivateName, ...] = (
    PrivateName(
        "trl.GRPOTrainer._generate_and_score_completions", "adapters/trl/credit.py", "overrides",
        "TurnCreditGRPOTrainer calls the stock method, then replaces output['advantages'] with per-turn ones "
        "(it needs the output keys 'completion_ids', 'completion_mask' and 'advantages').",
        "trl", CHECKED_TRL, params=("self", "inputs"), source_has=('"completion_ids"', '"completion_mask"', '"advantages"'),
    ),
    PrivateName(
        "trl.GRPOTrainer._compute_loss", "adapters/trl/credit.py", "relies on",
        "the per-token (batch, tokens) advantages are used as they are: the loss unsqueezes only 1-D advantages.",
        "trl", CHECKED_TRL, params=("self", "model", "inputs"), source_has=("advantages.dim() == 1",),
    ),
    PrivateName(
        "trl.GRPOTrainer._logs", "adapters/trl/credit.py", "patches",
        "TurnCreditGRPOTrainer replaces the stock advantages TRL logged for the batch (_logs['advantages']) "
        "with the per-turn ones it trains on.",
        "trl", CHECKED_TRL, set_in="trl.GRPOTrainer.__init__", source_has=('"advantages"',),
    ),
    PrivateName(
        "trl.GRPOTrainer._metrics", "adapters/trl/rollout.py", "patches",
        "GemRolloutFunc puts each episode's statistics into _metrics['train'|'eval'] (one value per episode, one running "
        "total per count), so a logging window's rates are per episode; TRL's log_metric averages per batch first.",
        "trl", CHECKED_TRL, set_in="trl.GRPOTrainer.__init__", source_has=('{"train": defaultdict(list), "eval": defaultdict(list)}',),
    ),
    PrivateName(
        "trl.GRPOTrainer.log", "adapters/trl/rollout.py", "relies on",
        "it reports the mean of each _metrics list and then clears them (the window GemRolloutFunc's episode statistics fill).",
        "trl", CHECKED_TRL, params=("self", "logs"), source_has=("sum(valid) / len(valid)", "self._metrics[mode].clear()"),
    ),
    PrivateName(
        "trl.trainer.utils._use_triton", "adapters/trl/sampled_head.py", "patches",
        "score_sampled_tokens_only wraps it so TRL's fused LM head compacts to labelled positions on CPU too "
        "(a TRL without it keeps scoring every position: correct, slower).",
        "trl", CHECKED_TRL, params=("device",),
    ),
)
"""Every private name of TRL the adapter uses: where, how (overrides, relies on, patches), why, and what is checked."""
