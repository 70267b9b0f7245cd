"""Where the env of an episode lives: the one entry point every path that builds an env for an episode
calls (:meth:`EpisodeSession.from_label <gem_core.rollout.EpisodeSession.from_label>`,
:func:`~gem_core.rollout.run_episodes` with an id, the dataset rows' first observations, the eval runner,
``gem replay`` and ``gem eval --rescore``, and the adapters: oat's actor through ``run_episodes``, TRL's
environment factory), so one switch moves them all. Envs that play no episode (``gem play`` in the terminal,
``gem check``, the env a ``gem serve`` server hosts) are built here with :func:`gem_core.make`.

Placements:

- ``"local"``: in this process (:func:`gem_core.make`); inside a vector env's worker process or Ray actor,
  that is the worker (:func:`~gem_core.vector.make_vec`'s backends place sub-envs, and build each one
  locally where it lives).
- ``"ray"``: in an actor of this process's :func:`~gem_core.vector.ray_env.default_env_pool` (the pool's
  size and resources from ``GEM_RAY_ENV_*``).
- A remote server is chosen by the id, whatever the placement: ``remote:http://HOST:PORT/ENV_ID`` builds a
  :class:`~gem_core.serve.remote.RemoteEnv` client of the env that ``gem serve`` runs there.

``env_backend=None`` reads ``$GEM_ENV_BACKEND`` (default ``"local"``), so a whole job, Ray workers included,
moves its envs with one variable in its runtime env.
"""

from __future__ import annotations

import importlib
from typing import Any

from gem_core.errors import InvalidArgument
from gem_core.settings import environment_value

__all__ = ["make_env", "ENV_BACKENDS", "env_backend_from_environment"]

#: The placements :func:`make_env` knows, and the function that builds an env there (``module:function``,
#: imported on first use: Ray is an optional dependency, and the vector package sits above this module).
_BUILDERS = {
    "local": "gem_core.registry:make",
    "ray": "gem_core.vector.ray_env:make_in_default_pool",
}
ENV_BACKENDS = tuple(_BUILDERS)
"""The places :func:`make_env` can put an env (the values of ``env_backend=`` and ``$GEM_ENV_BACKEND``)."""


def env_backend_from_environment() -> str:
    """``$GEM_ENV_BACKEND`` (``"local"`` if unset): where :func:`make_env` builds envs when not told."""
    return environment_value("GEM_ENV_BACKEND") or "local"


def make_env(env_id: str, env_backend: str | None = None, **env_kwargs: Any) -> Any:
    """``gem_core.make(env_id, **env_kwargs)`` in the placement ``env_backend`` (see the module docstring).

    Raises:
        ValueError: an unknown placement, or one that is not a name (the message lists the choices and says where
            it came from).
        gem_core.registry.UnknownEnvError: ``env_id`` is not registered.
    """
    given = not (env_backend is None or env_backend == "")  # an empty list is given, and refused below
    chosen = env_backend if given else env_backend_from_environment()
    target = _BUILDERS.get(chosen) if isinstance(chosen, str) else None  # a list or dict cannot even be looked up
    if target is None:
        source = "env_backend" if given else "GEM_ENV_BACKEND"
        raise InvalidArgument(f"{source}={chosen!r} is not an env placement; choose one of {ENV_BACKENDS}.")
    module_name, _, function = target.partition(":")
    return getattr(importlib.import_module(module_name), function)(env_id, **env_kwargs)
