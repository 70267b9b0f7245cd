"""GEM core: multi-turn text environments for training and evaluating LLM agents.

``import gem_core`` loads nothing: its names (and with them gymnasium and numpy) load on first use. The
``gem`` console script imports this package before any code of its own runs, so whatever loaded here
would be a moment in which a Ctrl-C prints a traceback instead of ending ``gem`` quietly.
"""

TYPE_CHECKING = False  # typing's constant, without loading typing (type checkers read the name alone)
if TYPE_CHECKING:  # loaded by __getattr__ on first use; declared for type checkers and the API reference
    from gem_core.env import Env, TextSpace
    from gem_core.registry import list_envs, make, register, spec
    from gem_core.vector import make_vec

__all__ = ["Env", "TextSpace", "list_envs", "make", "make_vec", "register", "spec"]
__version__ = "0.1.0"

#: The module each name of the API comes from.
_HOMES = {"Env": "gem_core.env", "TextSpace": "gem_core.env", "list_envs": "gem_core.registry", "make": "gem_core.registry",
          "register": "gem_core.registry", "spec": "gem_core.registry", "make_vec": "gem_core.vector"}


def __getattr__(name: str):
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'gem_core' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(home), name)
    globals()[name] = value  # found directly from now on
    return value
