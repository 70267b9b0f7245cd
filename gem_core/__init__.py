"""GEM core: multi-turn text environments for training and evaluating LLM agents.

``import gem_core`` stays light (gymnasium and numpy only); envs, the vector env and the rollout
machinery load on first use.
"""

from typing import TYPE_CHECKING

from gem_core.env import Env, TextSpace
from gem_core.registry import list_envs, make, register, spec

if TYPE_CHECKING:  # loaded by __getattr__ on first use; declared for type checkers and the API reference
    from gem_core.vector import make_vec

__all__ = ["Env", "TextSpace", "list_envs", "make", "make_vec", "register", "spec"]
__version__ = "0.1.0"


def __getattr__(name: str):
    if name == "make_vec":
        from gem_core.vector import make_vec

        return make_vec
    raise AttributeError(f"module 'gem_core' has no attribute {name!r}")
