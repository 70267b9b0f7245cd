"""GEM for TRL's ``GRPOTrainer``.

Two routes, both on the stock trainer:

- ``rollout_func`` (token-exact, any model): ``GRPOTrainer(..., rollout_func=GemRolloutFunc(),
  reward_funcs=env_return_reward, train_dataset=make_dataset(env_id, n))``. Add per-turn credit with
  :class:`TurnCreditGRPOTrainer` (REINFORCE with Return Batch Normalization over turns).
- ``environment_factory`` (tool-calling models): ``GRPOTrainer(..., environment_factory=environment_factory(),
  train_dataset=make_dataset(env_id, n))``. The same factories serve ``trl.experimental.async_grpo.AsyncGRPOTrainer``
  (they pickle into its rollout worker's process); a mixture takes the dict form,
  ``environment_factory=environment_factories(mixture)`` with ``with_environment_column(make_dataset(mixture, n))``.

A curriculum (``rollout_func`` route): ``GemRolloutFunc(task_sampler=TaskSampler(tasks))`` draws each GRPO group's
episode start from :mod:`gem_core.curriculum`; ``callbacks=[TaskSamplerCallback(sampler)]`` keeps its state in checkpoints.
"""

import importlib
from typing import TYPE_CHECKING

from gem_adapters.framework_version import TRLVersionError, check_trl_version
from gem_adapters.trl.environment import GemToolEnvironment, environment_factories, environment_factory, with_environment_column
from gem_adapters.trl.make_dataset import make_dataset  # the function; `python -m gem_adapters.trl` is its CLI
from gem_adapters.trl.rollout import GemRolloutFunc, env_return_reward, trajectories_to_rollout

if TYPE_CHECKING:  # loaded by __getattr__ on first use; declared for type checkers and the API reference
    from gem_adapters.trl.credit import TurnCreditGRPOTrainer
    from gem_adapters.trl.curriculum import TaskSamplerCallback

__all__ = [
    "GemRolloutFunc",
    "GemToolEnvironment",
    "TRLVersionError",
    "TaskSamplerCallback",
    "TurnCreditGRPOTrainer",
    "check_trl_version",
    "env_return_reward",
    "environment_factories",
    "environment_factory",
    "make_dataset",
    "trajectories_to_rollout",
    "with_environment_column",
]


_NEEDS_TRL = {"TurnCreditGRPOTrainer": "credit", "TaskSamplerCallback": "curriculum"}
"""Names whose modules import trl or transformers (and torch), which the rest of the adapter does not need at import."""


def __getattr__(name: str):
    if name not in _NEEDS_TRL:
        raise AttributeError(f"module 'gem_adapters.trl' has no attribute {name!r}")
    check_trl_version()  # before TRL is imported: a wrong install fails with the install line first
    return getattr(importlib.import_module(f"gem_adapters.trl.{_NEEDS_TRL[name]}"), name)
