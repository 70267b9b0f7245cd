"""ReasoningGym tasks, ids ``rg:<dataset>``: one id per dataset in reasoning-gym's registry, generated
offline and scored by the library (:mod:`gem_core.envs.reasoning_gym.env`).

The names come from :mod:`gem_core.envs.reasoning_gym.dataset_names`, generated from the installed
library by ``python -m gem_core.envs.reasoning_gym.refresh_names`` (a test fails when it is stale), so
registering them does not import reasoning-gym.
"""

from gem_core.envs.reasoning_gym.dataset_names import DATASET_NAMES
from gem_core.registry import register

for _name in DATASET_NAMES:
    register(f"rg:{_name}", "gem_core.envs.reasoning_gym.env:ReasoningGymEnv", extras=("rg",), name=_name)
