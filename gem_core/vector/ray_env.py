"""One env in a Ray actor, for the episode runner: :class:`RayEnv` is a :class:`gem_core.Env` whose
``areset``/``astep`` await the actor's call, so :func:`~gem_core.rollout.run_episodes` and
:class:`~gem_core.rollout.EpisodeSession` keep the tokens where the policy is (a GPU node) and step the
env wherever the cluster has room, never blocking the event loop.

Envs live in :class:`RayEnvPool` actors: each actor hosts many envs (a Ray worker process per env
would cost seconds of start-up and ~100 MB each) and runs their calls in its threads
(``max_envs_per_actor`` at once), so a thousand episodes waiting on tool calls need a few actors, not a
thousand processes. Actors ask for ``num_cpus`` and custom ``resources`` (e.g. ``{"gem_env": 1}`` pins
them to nodes started with ``--resources='{"gem_env": N}'``) and spread over the nodes.

Faults end only the episodes they touch: an env whose step raises raises here too (the session turns
it into a truncation, as for a local env); an actor lost with its node answers each of its envs' calls
in flight with a truncation carrying ``info["error"]`` (``"ActorDied: ..."``), the pool starts a
replacement wherever the cluster has room, and the env's next ``reset`` builds it afresh there.

Use it through a factory::

    pool = RayEnvPool(num_actors=4, resources={"gem_env": 1})
    trajectories = await run_episodes(pool.factory("code:CodeContest"), policy, tokenizer, seeds)

or one env at a time with ``RayEnv("game:Wordle-v0")``, which starts (and closes) an actor of its own.
Adapters that start episodes from dataset rows (:meth:`EpisodeSession.from_label
<gem_core.rollout.EpisodeSession.from_label>`: verl, OpenRLHF, RL2) build their envs with
:func:`make_env`, so ``GEM_ENV_BACKEND=ray`` in the job's Ray runtime env moves them all to actors.
"""

from __future__ import annotations

import copy
import itertools
import json
import threading
from collections.abc import Callable, Mapping
from typing import Any

from gem_core.env import Env, StepResult
from gem_core.errors import DependencyNotInstalled, InvalidArgument, ResetNeeded, StartFailed, UsageError
from gem_core.placement import make_env
from gem_core.settings import environment_value
from gem_core.vector.calls import check_amount, check_count

# make_env is the placement entry point (gem_core.placement), named here too where the README points.
__all__ = [
    "RayEnv", "RayEnvPool", "check_ray_amount", "check_ray_resources", "connect_ray", "default_env_pool",
    "make_in_default_pool", "make_env", "pool_options_from_environment",
]

#: What a :class:`RayEnv` builds in its actor: a registered env id or a function returning a new env.
EnvSpec = str | Callable[[], Any]


def connect_ray(address: str | None = None) -> Any:
    """Import Ray and join a cluster unless Ray is already initialized; return the ``ray`` module.

    ``address`` (e.g. ``"auto"``), else ``$RAY_ADDRESS`` (read by Ray itself), names an existing cluster;
    with neither, Ray starts a local one.

    Raises:
        DependencyNotInstalled: if Ray is not installed (the ``ray`` extra).
    """
    try:
        import ray
    except ImportError as exc:  # pragma: no cover - depends on the install
        raise DependencyNotInstalled('Envs on Ray need Ray: pip install -e ".[ray]"') from exc
    if not ray.is_initialized():
        ray.init(address=address, include_dashboard=False, log_to_driver=False)
    return ray


#: Resources Ray reserves for its own keywords (``num_cpus``, ``num_gpus``, ``memory``): refused in ``resources``.
_RAY_RESERVED_RESOURCES = ("CPU", "GPU", "memory", "object_store_memory")
#: Ray keeps resource amounts in units of 0.0001; a nonzero amount below one unit is refused by Ray.
_RAY_RESOURCE_UNITS = 10_000


def check_ray_amount(name: str, value: Any, unit: str) -> float:
    """``value``, an amount an actor reserves, checked before Ray starts: Ray refuses a negative, nan or
    too fine amount only when the actor is made, with a ValueError that names neither the option nor the
    variable it came from.

    Raises:
        InvalidArgument: if it is not a finite number from 0, or is above 0 but below Ray's 0.0001 granularity.
    """
    amount = check_amount(name, value, unit, zero_allowed=True)
    if amount and int(amount * _RAY_RESOURCE_UNITS) == 0:
        raise InvalidArgument(f"{name}={value!r:.80} is finer than Ray's granularity of 0.0001 {unit}: use 0 or at least 0.0001.")
    return amount


def check_ray_resources(name: str, resources: Any) -> dict[str, float]:
    """``resources`` (custom resource name to amount), checked before Ray starts, which would refuse a
    reserved name or a bad amount only when the actor is made, naming no option or variable.

    Raises:
        InvalidArgument: if it is not a mapping, names one of Ray's own resources (CPU, GPU, memory,
            object_store_memory) or a non-text name, or an amount is refused by :func:`check_ray_amount`.
    """
    if resources is None:
        return {}
    if not isinstance(resources, Mapping):
        raise InvalidArgument(f'{name} must map custom resource names to amounts, such as {{"gem_env": 1}}, got {resources!r:.80}.')
    checked: dict[str, float] = {}
    for key, amount in resources.items():
        if not isinstance(key, str) or key in _RAY_RESERVED_RESOURCES:
            raise InvalidArgument(
                f'{name} may hold only custom resources such as {{"gem_env": 1}}, got {key!r:.80}: ask for CPUs with '
                "num_cpus (GEM_RAY_ENV_CPUS for the default pool), and for GPUs or memory through actor_options."
            )
        checked[key] = check_ray_amount(f"{name}[{key!r}]", amount, "units")
    return checked


def _build(spec: EnvSpec, kwargs: dict[str, Any]) -> Any:
    if isinstance(spec, str):
        from gem_core.registry import make

        return make(spec, **kwargs)
    return spec(**kwargs)


class _EnvHost:
    """The actor: envs by key, built on their first reset; calls for different keys run in parallel threads."""

    def __init__(self) -> None:
        self.envs: dict[int, Any] = {}

    def reset(self, key: int, spec: EnvSpec | None, kwargs: dict[str, Any], seed: int | None, options: dict | None) -> Any:
        if key not in self.envs:
            if spec is None:
                raise UsageError("This env's actor was replaced; its next reset rebuilds it.")
            self.envs[key] = _build(spec, kwargs)
        return self.envs[key].reset(seed=seed, options=options)

    def _env(self, key: int) -> Any:
        env = self.envs.get(key)
        if env is None:
            raise ResetNeeded("This actor has no such env: call reset() first (after a lost actor, reset rebuilds the env).")
        return env

    def step(self, key: int, action: str) -> StepResult:
        return self._env(key).step(action)

    def call(self, key: int, name: str, args: tuple, kwargs: dict[str, Any]) -> Any:
        return getattr(self._env(key), name)(*args, **kwargs)

    def spawn(self, key: int, new_key: int, same_state: bool, seed: int | None) -> None:
        self.envs[new_key] = self._env(key).spawn(same_state, seed=seed)

    def close(self, key: int) -> None:
        env = self.envs.pop(key, None)
        if env is not None:
            env.close()

    def node_id(self) -> str:
        import ray

        return ray.get_runtime_context().get_node_id()


class RayEnvPool:
    """Ray actors that host envs for :class:`RayEnv` (see the module docstring).

    Args:
        num_actors: actors to start (each a Ray worker process).
        max_envs_per_actor: envs one actor steps at once (its threads); more envs may live on it, their
            calls wait their turn.
        num_cpus: CPUs each actor reserves (fractions allowed; 0 for envs that mostly wait).
        resources: custom resources each actor reserves, e.g. ``{"gem_env": 1}``.
        actor_options: other ``ActorClass.options(...)`` keywords (default: ``SPREAD`` over the nodes).
        address: the cluster to join if Ray is not initialized (see :func:`connect_ray`).
        start_timeout: seconds the actors may take to start.

    Raises:
        InvalidArgument: if ``num_actors`` or ``max_envs_per_actor`` is not a whole number from 1, ``num_cpus`` or a
            ``resources`` amount is not a finite number from 0 in Ray's steps of 0.0001, ``resources`` names one of
            Ray's own resources (CPU, GPU, memory, object_store_memory), or ``start_timeout`` is not a finite number
            of seconds above 0; all checked before Ray is started or joined.
    """

    def __init__(
        self,
        num_actors: int = 1,
        *,
        max_envs_per_actor: int = 256,
        num_cpus: float = 1.0,
        resources: Mapping[str, float] | None = None,
        actor_options: Mapping[str, Any] | None = None,
        address: str | None = None,
        start_timeout: float = 120.0,
    ):
        # Checked before Ray starts: Ray refuses these with a raw error naming nothing, and a negative
        # start_timeout reaches ray.get, whose C++ core aborts the whole process on it.
        num_actors = check_count("num_actors", num_actors)
        max_envs_per_actor = check_count("max_envs_per_actor", max_envs_per_actor)
        num_cpus = check_ray_amount("num_cpus", num_cpus, "CPUs")
        resources = check_ray_resources("resources", resources)
        start_timeout = check_amount("start_timeout", start_timeout, "seconds")
        self._ray = connect_ray(address)
        options: dict[str, Any] = {
            "num_cpus": num_cpus,
            "max_concurrency": max_envs_per_actor,
            "max_restarts": 0,
            "max_task_retries": 0,
            "scheduling_strategy": "SPREAD",
            **dict(actor_options or {}),
        }
        if resources:
            options["resources"] = dict(resources)
        self._actor_class = self._ray.remote(_EnvHost).options(**options)
        self._asked = f"num_cpus={num_cpus}, resources={dict(resources or {})}"
        self._start_timeout = start_timeout
        self._lock = threading.Lock()
        self._keys = itertools.count()
        self._load: dict[int, int] = {}  # envs per actor slot
        self.closed = False
        self.actors: list[Any] = [self._actor_class.remote() for _ in range(num_actors)]
        self._load = dict.fromkeys(range(num_actors), 0)
        try:
            self._await_ready(self.actors)
        except BaseException:
            self.close()
            raise

    def _await_ready(self, actors: list[Any]) -> None:
        try:
            self._ray.get([actor.node_id.remote() for actor in actors], timeout=self._start_timeout)
        except self._ray.exceptions.GetTimeoutError:
            raise StartFailed(
                f"The env actors did not start within start_timeout={self._start_timeout:g} s. Each asks for "
                f"{self._asked}; the cluster may not have room for {len(actors)} of them: lower num_cpus or "
                "num_actors, or add nodes with those resources."
            ) from None

    def make(self, env: EnvSpec, **env_kwargs: Any) -> RayEnv:
        """A :class:`RayEnv` of ``env`` (an env id or a factory) hosted by this pool's least loaded actor."""
        return RayEnv(env, pool=self, **env_kwargs)

    def factory(self, env: EnvSpec, **env_kwargs: Any) -> Callable[[], RayEnv]:
        """A function returning a new :class:`RayEnv` per call, the ``env_fn`` of :func:`run_episodes`."""
        return lambda: self.make(env, **env_kwargs)

    def _assign(self, slot: int | None = None) -> tuple[int, Any]:
        with self._lock:
            if self.closed:
                raise UsageError("This RayEnvPool is closed; make a new one.")
            if slot is None:
                slot = min(self._load, key=self._load.__getitem__)
            self._load[slot] += 1
            return slot, self.actors[slot]

    def _release(self, slot: int) -> None:
        with self._lock:
            self._load[slot] = max(0, self._load[slot] - 1)

    def _replace(self, slot: int, dead: Any) -> Any:
        """Start a fresh actor in ``slot`` if ``dead`` is still there (once per lost actor); return the current one."""
        with self._lock:
            if self.closed:
                return dead
            if self.actors[slot] is dead:
                try:
                    self._ray.kill(dead, no_restart=True)
                except Exception:  # noqa: BLE001 - already gone with its node
                    pass
                self.actors[slot] = self._actor_class.remote()
            return self.actors[slot]

    def next_key(self) -> int:
        """A fresh key for the next env an actor builds (unique within this pool)."""
        return next(self._keys)

    def actor_node_ids(self) -> list[str]:
        """The Ray node id of each actor."""
        return self._ray.get([actor.node_id.remote() for actor in self.actors])

    def close(self) -> None:
        """Kill the actors (their envs go with them). Safe to call twice."""
        with self._lock:
            actors, self.actors = self.actors, []
            self.closed = True
        for actor in actors:
            try:
                self._ray.kill(actor, no_restart=True)
            except Exception:  # noqa: BLE001 - gone with its node
                pass

    def __enter__(self) -> RayEnvPool:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


class RayEnv(Env):
    """A GEM env that lives in a Ray actor (see the module docstring).

    Args:
        env: a registered env id (built with :func:`gem_core.make` in the actor) or a function returning
            a new env (pickled to the actor with Ray's cloudpickle).
        pool: the :class:`RayEnvPool` to live in; None starts a one-actor pool owned by this env, made
            with ``pool_options`` (``num_cpus``, ``resources``, ``address``, ...).
        env_kwargs: passed to ``make(env, ...)`` or ``env(...)`` in the actor.
    """

    def __init__(self, env: EnvSpec, *, pool: RayEnvPool | None = None, pool_options: Mapping[str, Any] | None = None, **env_kwargs: Any):
        self._owns_pool = pool is None
        self.pool = RayEnvPool(**dict(pool_options or {})) if pool is None else pool
        self._ray = self.pool._ray
        self._env_spec = env
        self.env_kwargs = env_kwargs
        self.env_id = env if isinstance(env, str) else None
        self._key = self.pool.next_key()
        self._slot, self._actor = self.pool._assign()
        self._built = False
        self._closed = False

    # -- the calls --------------------------------------------------------------------------------

    def _reset_args(self, seed: int | None, options: dict | None) -> tuple:
        spec = None if self._built else self._env_spec
        return (self._key, spec, self.env_kwargs if spec is not None else {}, seed, options)

    def _lost(self, exc: BaseException) -> str:
        """Note that the actor is gone (the pool replaces it); the env is rebuilt at the next reset."""
        self._actor = self.pool._replace(self._slot, self._actor)
        self._built = False
        return f"ActorDied: the Ray actor hosting this env was lost ({type(exc).__name__}); the next reset rebuilds the env on a live actor."

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
        try:
            result = self._get(self._actor.reset.remote(*self._reset_args(seed, options)))
        except self._ray.exceptions.RayActorError:  # lost before the episode began: build it on the replacement
            result = self._get(self._actor.reset.remote(*self._reset_args(seed, options)))
        self._built = True
        return result

    async def areset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
        for attempt in range(2):  # an actor lost before the episode began: build the env on the replacement
            try:
                result = await self._actor.reset.remote(*self._reset_args(seed, options))
                break
            except self._ray.exceptions.RayActorError as exc:
                self._lost(exc)
                if attempt == 1:
                    raise
            except self._ray.exceptions.RayTaskError as exc:
                raise exc.as_instanceof_cause() from None
        self._built = True
        return result

    def step(self, action: str) -> StepResult:
        try:
            return self._ray.get(self._actor.step.remote(self._key, action))
        except self._ray.exceptions.RayActorError as exc:
            return "", 0.0, False, True, {"error": self._lost(exc)}
        except self._ray.exceptions.RayTaskError as exc:
            raise exc.as_instanceof_cause() from None

    async def astep(self, action: str) -> StepResult:
        try:
            return await self._actor.step.remote(self._key, action)
        except self._ray.exceptions.RayActorError as exc:
            return "", 0.0, False, True, {"error": self._lost(exc)}
        except self._ray.exceptions.RayTaskError as exc:
            raise exc.as_instanceof_cause() from None

    def _get(self, ref: Any) -> Any:
        try:
            return self._ray.get(ref)
        except self._ray.exceptions.RayActorError as exc:
            self._lost(exc)
            raise
        except self._ray.exceptions.RayTaskError as exc:
            raise exc.as_instanceof_cause() from None

    def call(self, name: str, *args: Any, **kwargs: Any) -> Any:
        """Call the hosted env's method ``name`` in the actor and return its (pickled) result."""
        return self._get(self._actor.call.remote(self._key, name, args, kwargs))

    def get_state(self) -> dict[str, Any]:
        """The hosted env's :meth:`~gem_core.Env.get_state` snapshot."""
        return self.call("get_state")

    def set_state(self, state: dict[str, Any]) -> None:
        self.call("set_state", state)

    def render(self) -> str | None:
        return self.call("render")

    def sample_random_action(self) -> str:
        return self.call("sample_random_action")

    def spawn(self, same_state: bool = True, *, seed: int | None = None) -> RayEnv:
        """A new env on the same actor, made by the hosted env's own :meth:`~gem_core.Env.spawn` (a branch
        of this episode with ``same_state``, else a fresh episode reset with ``seed``); what
        :meth:`EpisodeSession.fork <gem_core.rollout.EpisodeSession.fork>` calls."""
        clone = copy.copy(self)
        clone._owns_pool, clone._closed = False, False
        clone._key = self.pool.next_key()
        clone._slot, clone._actor = self.pool._assign(self._slot)
        self._get(self._actor.spawn.remote(self._key, clone._key, same_state, seed))
        clone._built = True
        return clone

    def node_id(self) -> str:
        """The Ray node this env's actor runs on."""
        return self._ray.get(self._actor.node_id.remote())

    def close(self) -> None:
        """Drop the env from its actor (fire and forget); closes the pool too when this env owns it."""
        if self._closed:
            return
        self._closed = True
        try:
            self._actor.close.remote(self._key)
        except Exception:  # noqa: BLE001 - the actor may be gone
            pass
        self.pool._release(self._slot)
        if self._owns_pool:
            self.pool.close()


def pool_options_from_environment() -> dict[str, Any]:
    """The options of :func:`default_env_pool` from ``$GEM_RAY_ENV_ACTORS`` (actors, default 2),
    ``$GEM_RAY_ENV_CPUS`` (CPUs per actor, default 1) and ``$GEM_RAY_ENV_RESOURCES`` (JSON, e.g.
    ``{"gem_env": 1}``); the one place that reads them.

    Raises:
        InvalidArgument: if a variable is not a number, or ``$GEM_RAY_ENV_RESOURCES`` not a JSON object, or one
            is out of range (actors from 1; CPUs and resource amounts finite, from 0, in Ray's steps of 0.0001),
            or ``$GEM_RAY_ENV_RESOURCES`` names one of Ray's own resources (CPU, GPU, memory,
            object_store_memory), naming the variable: Ray would otherwise fail on it only when the pool starts,
            far from the typo.
    """
    options: dict[str, Any] = {}
    for variable, key, kind in (("GEM_RAY_ENV_ACTORS", "num_actors", int), ("GEM_RAY_ENV_CPUS", "num_cpus", float)):
        value = environment_value(variable)
        if value:
            try:
                number = kind(value)
            except ValueError:
                raise InvalidArgument(f"{variable} must be a number ({key}), got {value!r}.") from None
            options[key] = check_count(variable, number) if kind is int else check_ray_amount(variable, number, "CPUs per actor")
    value = environment_value("GEM_RAY_ENV_RESOURCES")
    if value:
        try:
            resources = json.loads(value)
        except ValueError:
            resources = None
        if not isinstance(resources, dict):
            raise InvalidArgument(f'GEM_RAY_ENV_RESOURCES must be a JSON object such as {{"gem_env": 1}}, got {value!r}.')
        options["resources"] = check_ray_resources("GEM_RAY_ENV_RESOURCES", resources)
    options.setdefault("num_actors", 2)
    return options


_default_pool: RayEnvPool | None = None
_default_lock = threading.Lock()


def default_env_pool() -> RayEnvPool:
    """This process's :class:`RayEnvPool`, made on first use with :func:`pool_options_from_environment`."""
    global _default_pool
    with _default_lock:
        if _default_pool is None or _default_pool.closed:
            _default_pool = RayEnvPool(**pool_options_from_environment())
        return _default_pool


def make_in_default_pool(env_id: str, **env_kwargs: Any) -> RayEnv:
    """``gem_core.make(env_id, **env_kwargs)`` in an actor of :func:`default_env_pool`: the ``"ray"`` placement
    of :func:`gem_core.placement.make_env`."""
    return default_env_pool().make(env_id, **env_kwargs)
