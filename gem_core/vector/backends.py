"""Where a vector env's sub-envs live: the backend protocol and the registry of backends.

A backend knows nothing about episodes or autoreset: it runs a batch of per-env calls (see
:mod:`gem_core.vector.calls`) and answers, per env, the call's result or a
:class:`~gem_core.vector.calls.Failure`.

Backends:

- ``sync``: the envs in this process, called one after another.
- ``thread``: the envs in this process, called concurrently from a thread pool (envs whose steps wait
  on I/O, a subprocess or a C extension that releases the GIL).
- ``process``: the envs in worker processes, grouped several per worker (CPU-heavy pure-Python envs).
  A worker that dies is replaced by a fresh one built from the same builders.
- ``async``: the envs in this process, driven by ``asyncio.gather`` over ``env.astep``/``env.areset``.
- ``ray``: the envs as Ray actors on a cluster (``pip install -e ".[ray]"``; see
  :mod:`gem_core.vector.ray_backend`).

On ``sync``, ``thread`` and ``async``, envs that declare ``blocking = False`` (the games) are called
inline, without a thread or task hop. Every backend takes ``step_timeout`` and has a ``close(timeout)``
that is safe during a batch.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol

from gem_core.errors import InvalidArgumentType, did_you_mean
from gem_core.vector.calls import EnvBuilder, EnvCall
from gem_core.vector.in_process import AsyncBackend, SyncBackend, ThreadBackend
from gem_core.vector.process import ProcessBackend

__all__ = ["Backend", "SyncBackend", "ThreadBackend", "ProcessBackend", "AsyncBackend", "BACKENDS", "check_backend_options"]


class Backend(Protocol):
    """Runs batches of per-env calls. ``calls`` maps env index to call; the answer maps the same
    indices to results or :class:`~gem_core.vector.calls.Failure` (``Call`` failures included)."""

    num_envs: int

    def run(self, calls: Mapping[int, EnvCall]) -> dict[int, Any]:
        """Run each env's call (``{env index: call}``) and return ``{env index: result}``; an env's exception is its
        result.
        """
        ...

    async def arun(self, calls: Mapping[int, EnvCall]) -> dict[int, Any]:
        """:meth:`run` without blocking the event loop."""
        ...

    def close(self, timeout: float | None = None) -> None:
        """Close the envs and stop the workers, waiting at most ``timeout`` seconds for calls in flight."""
        ...


def check_backend_options(name: str, backend_class: Callable[..., Backend], options: Mapping[str, Any]) -> None:
    """Refuse an option ``backend_class`` does not take before anything is built, naming it and the options
    it takes (Python's own TypeError names neither the backend nor what it takes).

    Raises:
        InvalidArgumentType: if an option is not one of the backend's keywords.
    """
    parameters = inspect.signature(backend_class).parameters.values()
    takes = [p.name for p in parameters if p.name != "env_fns" and p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]
    if any(p.kind is p.VAR_KEYWORD for p in parameters):
        return  # it forwards them: the class it builds checks them
    for key in options:
        if key not in takes:
            raise InvalidArgumentType(
                f"backend_kwargs: the {name!r} backend takes no option {key!r}{did_you_mean(key, takes)}; it takes {', '.join(takes)}."
            )


def _ray_backend(env_fns: Sequence[EnvBuilder], **kwargs: Any) -> Backend:
    # Imported on use: Ray is an optional dependency and slow to import.
    from gem_core.vector.ray_backend import RayBackend

    check_backend_options("ray", RayBackend, kwargs)
    return RayBackend(env_fns, **kwargs)


BACKENDS: dict[str, Callable[..., Backend]] = {
    "sync": SyncBackend,
    "thread": ThreadBackend,
    "process": ProcessBackend,
    "async": AsyncBackend,
    "ray": _ray_backend,
}
"""Backend name (the ``backend=`` of :func:`~gem_core.vector.make_vec`) -> its class."""
