"""Building a vector env from env ids or factories: :func:`make_vec`."""

from __future__ import annotations

import functools
import numbers
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import gymnasium as gym
from gymnasium.vector import AutoresetMode

from gem_core import registry
from gem_core.cpus import usable_cpus
from gem_core.errors import InvalidArgument, InvalidArgumentType
from gem_core.vector.calls import add_note
from gem_core.vector.vector_env import VectorEnv

__all__ = ["make_vec", "Wrapper"]

Wrapper = Callable[[gym.Env], gym.Env]
"""A wrapper: any callable that takes an env and returns an env (a ``gymnasium.Wrapper`` class qualifies)."""


def _build_env(source: str | Callable[..., gym.Env], wrappers: tuple[Wrapper, ...], env_kwargs: dict[str, Any]) -> gym.Env:
    """Build one sub-env (module-level so the process backend can pickle it). A constructor's exception
    propagates as itself, with a note naming the env id, since a list of ids may mix several."""
    try:
        env = registry.make(source, **env_kwargs) if isinstance(source, str) else source(**env_kwargs)
    except Exception as exc:
        add_note(exc, f"Raised while make_vec built {_describe(source)}.")
        raise
    try:
        for wrap in wrappers:
            env = wrap(env)
    except Exception as exc:
        add_note(exc, f"Raised while make_vec wrapped {_describe(source)} with {_describe(wrap)}.")
        try:
            env.close()
        except Exception:  # noqa: BLE001 - the wrapper's error is the one to report
            pass
        raise
    return env


def _check_wrappers(wrappers: Any) -> tuple[Wrapper, ...]:
    """The wrappers as a tuple, refused here rather than in each env's build (a worker, for the process backend)."""
    if callable(wrappers) and not isinstance(wrappers, (list, tuple)):
        name = _describe(wrappers)
        raise InvalidArgumentType(f"make_vec(wrappers=...) takes a list of wrappers, got the single wrapper {name}; pass wrappers=[{name}].")
    if not isinstance(wrappers, (list, tuple)):
        raise InvalidArgumentType(
            f"make_vec(wrappers=...) takes a list of wrappers (callables env -> env, e.g. [EpisodeStatistics]), got {wrappers!r:.80}."
        )
    for index, wrap in enumerate(wrappers):
        if not callable(wrap):
            raise InvalidArgumentType(
                f"make_vec(wrappers=...): entry {index} ({wrap!r:.80}) is not a wrapper; each is a callable env -> env, "
                "a wrapper class (EpisodeStatistics) or e.g. lambda env: TurnLimit(env, 10)."
            )
    return tuple(wrappers)


def _describe(source: Any) -> str:
    return repr(source) if isinstance(source, str) else getattr(source, "__qualname__", None) or repr(source)


def _declares_never_blocking(source: str | Callable[..., gym.Env], wrappers: tuple[Wrapper, ...]) -> bool:
    """Whether the env class behind ``source`` declares ``blocking = False``, read without building it.
    A wrapper decides for the env it wraps, so any wrapper counts as blocking."""
    if wrappers:
        return False
    env_class = registry.spec(source).load() if isinstance(source, str) else source
    return isinstance(env_class, type) and getattr(env_class, "blocking", True) is False


#: How long the process backend polls before sleeping, for envs that never block (see ``Spinner``): a few
#: batches of the cheapest games, and far below what a sleeping wait costs.
NEVER_BLOCKING_SPIN_SECONDS = 200e-6


def make_vec(
    env_id_or_ids: str | Callable[..., gym.Env] | Sequence[str | Callable[..., gym.Env]],
    num_envs: int | None = None,
    wrappers: Sequence[Wrapper] = (),
    backend: str = "sync",
    autoreset_mode: AutoresetMode | str = AutoresetMode.NEXT_STEP,
    seed: int | None = 0,
    backend_kwargs: Mapping[str, Any] | None = None,
    step_timeout: float | None = None,
    **env_kwargs: Any,
) -> VectorEnv:
    """Build a :class:`VectorEnv`.

    Args:
        env_id_or_ids: one env id (``"game:Wordle-v0"``) copied ``num_envs`` times, or a list with one
            id per env. An env class or factory callable may stand in for an id (called with
            ``env_kwargs``); the ``process`` backend calls it inside the worker.
        num_envs: number of envs for a single id (default 1); for a list it must be None or its length.
        wrappers: callables ``env -> env`` applied in order to every env after it is built.
        backend: ``"sync"``, ``"thread"``, ``"process"``, ``"async"`` or ``"ray"`` (see
            :mod:`gem_core.vector.backends`).
        autoreset_mode: a :class:`gymnasium.vector.AutoresetMode` (or its name/value).
        seed: env ``i`` is seeded with ``seed + i`` on the first reset; None for unseeded envs.
        backend_kwargs: backend options: ``max_workers`` (thread); ``num_workers`` (process: worker
            processes; default one per env, and for envs that declare ``blocking = False`` one per CPU
            but one, envs grouped over them), ``spin_seconds`` (process: see
            :class:`~gem_core.vector.process.Spinner`), ``context`` (process: a
            multiprocessing start method, default ``fork`` on Linux), ``start_timeout``,
            ``recycle_after_steps`` and ``max_worker_memory_mb`` (process: worker recycling);
            ``envs_per_actor``, ``num_cpus``, ``resources``, ``actor_options``, ``address`` (ray: default
            one actor per env, and for envs that declare ``blocking = False`` one per free CPU, envs
            grouped over them; each actor asks for at most its share of the free CPUs).
        step_timeout: seconds a step or reset may run; past it the env's episode is truncated with
            ``info["error"] == "timeout"`` and the env is rebuilt (every backend). None: no limit.
        **env_kwargs: passed to every env's constructor (override the registered defaults).

    Raises:
        InvalidArgumentType: if an entry is neither an env id nor a callable, or ``wrappers`` is not a list of
            callables (one wrapper alone: pass ``[wrapper]``).
        InvalidArgument: if ``num_envs`` is not a whole number >= 1 or contradicts the list's length, or ``seed`` is
            negative (and as :class:`VectorEnv` for the other arguments).
    """
    if num_envs is not None and (isinstance(num_envs, bool) or not isinstance(num_envs, numbers.Integral)):
        raise InvalidArgument(f"num_envs must be a whole number of envs (or None), got {num_envs!r}.")
    if isinstance(env_id_or_ids, str) or callable(env_id_or_ids):
        count = 1 if num_envs is None else num_envs
        if count < 1:
            raise InvalidArgument(f"num_envs must be at least 1, got {num_envs}.")
        sources = [env_id_or_ids] * count
    else:
        if not isinstance(env_id_or_ids, Iterable):
            raise InvalidArgumentType(f"make_vec takes an env id (str), an env factory (callable) or a list of them, got {env_id_or_ids!r}.")
        sources = list(env_id_or_ids)
        if num_envs is not None and num_envs != len(sources):
            raise InvalidArgument(
                f"num_envs={num_envs} but {len(sources)} env ids were given; leave num_envs=None with a list of ids."
            )
    for source in sources:
        if isinstance(source, str):
            registry.spec(source)  # fail here, with the closest ids, rather than in a worker
        elif not callable(source):
            raise InvalidArgumentType(f"Expected an env id (str) or an env factory (callable), got {source!r}.")
    wrappers = _check_wrappers(wrappers)
    env_fns = [functools.partial(_build_env, source, wrappers, dict(env_kwargs)) for source in sources]
    if backend == "process" and all(_declares_never_blocking(source, wrappers) for source in sources):
        # Envs that never wait (the games) step in microseconds: they are grouped over one worker per CPU
        # but one (one pipe round trip per worker and batch instead of per env), and parent and workers
        # poll for each other briefly instead of sleeping, the parent on the CPU left to it. Envs that
        # may wait keep a worker each, so their waits overlap and a fault touches one env only.
        backend_kwargs = {
            "num_workers": min(len(sources), max(1, usable_cpus() - 1)), "spin_seconds": NEVER_BLOCKING_SPIN_SECONDS,
            **dict(backend_kwargs or {}),
        }
    if backend == "ray" and all(_declares_never_blocking(source, wrappers) for source in sources):
        # The same grouping on Ray: the backend sizes it to the cluster's free CPUs (ray_backend.default_actor_shape).
        backend_kwargs = {"blocking": False, **dict(backend_kwargs or {})}
    return VectorEnv(
        env_fns,
        backend=backend,
        autoreset_mode=autoreset_mode,
        seed=seed,
        backend_kwargs=backend_kwargs,
        step_timeout=step_timeout,
    )
