"""GEM core: multi-turn text environments for training and evaluating LLM agents.

``import gem_core`` loads nothing: its names and its submodules (and with them gymnasium and numpy) load
on first use, ``gem_core.make`` and ``gem_core.registry`` alike. The
``gem`` console script imports this package before any code of its own runs, so whatever loaded here
would be a moment in which a Ctrl-C prints a traceback instead of ending ``gem`` quietly.
"""

TYPE_CHECKING = False  # typing's constant, without loading typing (type checkers read the name alone)
if TYPE_CHECKING:  # loaded by __getattr__ on first use; declared for type checkers and the API reference
    from typing import Any

    from gem_core.env import Env, TextSpace
    from gem_core.registry import list_envs, make, register, spec
    from gem_core.vector import make_vec

__all__ = ["Env", "TextSpace", "list_envs", "make", "make_vec", "register", "spec"]
__version__ = "0.1.0"

#: The module each name of the API comes from.
_HOMES = {"Env": "gem_core.env", "TextSpace": "gem_core.env", "list_envs": "gem_core.registry", "make": "gem_core.registry",
          "register": "gem_core.registry", "spec": "gem_core.registry", "make_vec": "gem_core.vector"}


def __getattr__(name: str) -> "Any":
    """An API name (``gem_core.make``) or a submodule (``gem_core.registry``), loaded on first use.

    Before the package was lazy, ``import gem_core`` loaded its submodules, so ``gem_core.registry.UnknownEnvError``
    worked after it alone (GEM's docstrings say to write that); a submodule is loaded here to keep it working.

    Raises:
        AttributeError: ``name`` is neither an API name nor a submodule of ``gem_core``.
    """
    import importlib

    home = _HOMES.get(name)
    if home is not None:
        value = getattr(importlib.import_module(home), name)
        globals()[name] = value  # found directly from now on
        return value
    if name.isidentifier() and not name.startswith("__"):  # not "a.b" (a module below one), not a dunder probe
        try:
            return importlib.import_module(f"{__name__}.{name}")  # the import also sets it on the package
        except ModuleNotFoundError as error:
            if error.name != f"{__name__}.{name}":  # the submodule exists, but something it imports is missing
                raise
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> "list[str]":
    """The package's names, its API (loaded or not) and its submodules (found on disk, not imported)."""
    import pkgutil

    submodules = (module.name for module in pkgutil.iter_modules(__path__) if not module.name.startswith("_"))
    return sorted({*globals(), *__all__, *submodules})
