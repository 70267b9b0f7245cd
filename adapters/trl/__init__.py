"""GEM for TRL's ``GRPOTrainer``.

Two routes, both on the stock trainer:

- ``rollout_func`` (token-exact, any model): ``GRPOTrainer(..., rollout_func=GemRolloutFunc(),
  reward_funcs=env_return_reward, train_dataset=make_dataset(env_id, n))``. Add per-turn credit with
  :class:`TurnCreditGRPOTrainer` (REINFORCE with Return Batch Normalization over turns).
- ``environment_factory`` (tool-calling models): ``GRPOTrainer(..., environment_factory=environment_factory(),
  train_dataset=make_dataset(env_id, n))``.

A curriculum (``rollout_func`` route): ``GemRolloutFunc(task_sampler=TaskSampler(tasks))`` draws each GRPO group's
episode start from :mod:`gem_core.curriculum`; ``callbacks=[TaskSamplerCallback(sampler)]`` keeps its state in checkpoints.
"""

from gem_adapters.framework_version import TRLVersionError, check_trl_version
from gem_adapters.trl.make_dataset import make_dataset  # the function; `python -m gem_adapters.trl` is its CLI
from gem_adapters.trl.environment import GemToolEnvironment, environment_factory
from gem_adapters.trl.rollout import GemRolloutFunc, env_return_reward, trajectories_to_rollout

__all__ = [
    "GemRolloutFunc",
    "GemToolEnvironment",
    "TRLVersionError",
    "TaskSamplerCallback",
    "TurnCreditGRPOTrainer",
    "check_trl_version",
    "env_return_reward",
    "environment_factory",
    "make_dataset",
    "trajectories_to_rollout",
]


def __getattr__(name: str):
    # The trainer subclass imports trl and torch; the rest of the adapter does not need them at import.
    if name == "TurnCreditGRPOTrainer":
        check_trl_version()  # before the trainer imports TRL: a wrong install fails with the install line first
        from gem_adapters.trl.credit import TurnCreditGRPOTrainer

        return TurnCreditGRPOTrainer
    if name == "TaskSamplerCallback":  # imports transformers
        check_trl_version()
        from gem_adapters.trl.curriculum import TaskSamplerCallback

        return TaskSamplerCallback
    raise AttributeError(f"module 'gem_adapters.trl' has no attribute {name!r}")
