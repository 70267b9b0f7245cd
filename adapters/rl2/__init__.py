"""GEM environments in RL2: env files for RL2 main (``generate``) and PyPI rl-square 0.0.2 (``reset``/``step``).

Neither module imports RL2, so both are usable (and testable) wherever gem_core runs.
"""

from gem_adapters.rl2.api import RL2VersionError, check_rl2_api, installed_rl2_api
from gem_adapters.rl2.generate import GenerateEnv
from gem_adapters.rl2.make_dataset import make_dataset  # the function; `python -m gem_adapters.rl2` is its CLI
from gem_adapters.rl2.reset_step import ResetStepEnv

__all__ = ["GenerateEnv", "RL2VersionError", "ResetStepEnv", "check_rl2_api", "installed_rl2_api", "make_dataset"]
