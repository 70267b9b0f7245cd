"""What a GEM row puts in ``extra_fields["reward_extra_info"]``, where verl merges it with other agent loops' rows.

verl's default trainer (``trainer.use_v1=True``) merges ``reward_extra_info`` row by row and fills a key a
row lacks with None: a GEM row carries ``acc`` (1.0 if the episode succeeded) and its ``gem_*`` metrics.

verl's legacy worker (``trainer.use_v1=False``, ``AgentLoopWorker._postprocess``) takes the keys of a
chunk's *first* row and reads ``info[key]`` from every row (a row without that key raises KeyError), and
``AgentLoopManager`` then asserts that every worker's chunk lifted the same keys (``DataProto.concat``).
So in a batch that mixes GEM rows with another agent loop's rows, every row must carry the same keys,
whichever row comes first. The other loop's keys are decided by verl's reward loop, which GEM never sees:
``acc`` for a reward function returning a float; the dict's own keys for one returning a dict; none when
the workers have no reward loop (a reward model without a resource pool of its own scores the batch
later, in the trainer). GEM rows therefore carry exactly :func:`legacy_reward_extra_keys`: ``reward_extra_keys``
from the agent-loop YAML when given, else ``acc`` or, without a reward loop, nothing. A GEM row still
answers None for any key it was not given, for a chunk whose first row is another loop's.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from gem_core.errors import GemError

__all__ = ["RewardExtraInfo", "RewardExtraKeysError", "legacy_reward_extra_keys", "reward_extra_info"]


class RewardExtraKeysError(GemError, ValueError):
    """``reward_extra_keys`` in the agent-loop YAML is not a list of key names."""


class RewardExtraInfo(dict):
    """A GEM row's ``reward_extra_info``: None for any key it lacks.

    verl's legacy worker reads every key of a chunk's first row from every row; where another loop's row
    comes first with keys GEM was not told about, a GEM row answers None (what verl's v1 trainer fills in
    for missing keys) instead of raising KeyError. Pickles as a dict subclass, so the trainer process needs
    ``gem_adapters`` importable (it does anyway: it loads the ``gem_rebn`` plugin).
    """

    def __missing__(self, key: Any) -> None:
        return None


def _select(config: Any, path: str) -> Any:
    from omegaconf import OmegaConf

    return OmegaConf.select(config, path, default=None)


def legacy_reward_extra_keys(config: Any, given: Sequence[str] | None, *, use_v1: bool = False) -> tuple[str, ...]:
    """The ``reward_extra_info`` keys of a GEM row under verl's legacy worker (see the module docstring).

    Args:
        config: verl's trainer config (``AgentLoopBase.config``).
        given: ``reward_extra_keys`` from the agent-loop YAML entry, or None to derive them from ``config``.
        use_v1: verl's default trainer runs: ``given`` is only checked, and no key is needed (empty).

    Raises:
        RewardExtraKeysError: ``given`` is not a list of key names (a ``ValueError``).
    """
    if given is not None:
        if isinstance(given, (str, bytes)) or not isinstance(given, Iterable) or not all(isinstance(key, str) for key in given):
            raise RewardExtraKeysError(
                f"GemAgentLoop: reward_extra_keys must be a list of key names (e.g. [score, pred]), got {given!r}."
            )
        given = tuple(given)
    if use_v1:
        return ()
    if given is not None:
        return given
    if _select(config, "reward.reward_model.enable") and not _select(config, "reward.reward_model.enable_resource_pool"):
        return ()  # no reward loop in the workers (verl's ray_trainer): other loops' rows come back without reward_extra_info
    if _select(config, "reward.custom_reward_function.path"):
        warnings.warn(
            "GemAgentLoop: with trainer.use_v1=False verl takes reward_extra_info keys from each chunk's first row, so every "
            "row of a batch must carry the same keys. GEM rows carry 'acc', what verl's reward managers write for a reward "
            "function returning a float. If reward.custom_reward_function returns a dict for another agent loop's rows in "
            "the same batch (a KeyError 'acc' in verl's _postprocess), set reward_extra_keys in the gem_env entry of the "
            "agent-loop YAML to that dict's keys, or run verl's default trainer (trainer.use_v1=True), which merges rows by key.",
            UserWarning,
            stacklevel=3,
        )
    return ("acc",)


def reward_extra_info(
    metrics: Mapping[str, float], episode_return: float, *, use_v1: bool, legacy_keys: Sequence[str]
) -> RewardExtraInfo:
    """A GEM row's ``reward_extra_info`` from its ``gem_*`` metrics.

    With ``use_v1`` (verl logs every number there as ``val-aux/<data_source>/<key>/mean@N``): ``acc`` and
    the metrics. Otherwise exactly ``legacy_keys``: ``acc`` is success (1.0 or 0.0), ``score`` the episode
    return (what a dict reward function's ``score`` is), a ``gem_*`` name that metric, any other key None.
    """
    if use_v1:
        return RewardExtraInfo(acc=metrics["gem_success"], **metrics)
    known = {**metrics, "acc": metrics["gem_success"], "score": float(episode_return)}
    return RewardExtraInfo({key: known.get(key) for key in legacy_keys})
