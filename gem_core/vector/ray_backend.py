"""The ``ray`` backend: envs as Ray actors, so env work spreads over the nodes of a Ray cluster.

Each actor hosts a group of envs (``envs_per_actor``) and runs a group's calls per remote call. Actors
ask for ``num_cpus`` and custom ``resources`` (e.g. ``{"gem_env": 1}`` to pin envs to CPU nodes that
advertise that resource); ``actor_options`` passes any other ``ActorClass.options`` (a scheduling
strategy, a runtime env).

The defaults fit the cluster the backend joins, as the process backend's fit the machine (issue 47):
envs that never block (``Env.blocking = False``, the games; :func:`~gem_core.vector.make_vec` tells) are
grouped over one actor per free CPU, and an env that may block gets an actor of its own so its waits
overlap and a fault touches it alone. Either way an actor asks for one CPU, or its share of the free CPUs
when there are fewer than actors, so the default never asks for more than the cluster has free (a
reservation no node can grant would leave the actors pending until ``start_timeout``). Given values win.

Faults end only the episodes they touch (``truncated`` with ``info["error"]``), as on the other
backends: an env that raises fails its call; an actor lost with its node (or killed) is replaced by a
fresh one, wherever the cluster has room, and its envs' calls come back as ``ActorDied`` failures; a
call past ``step_timeout`` is given up on, its actor killed and replaced (``info["error"] ==
"timeout"`` for its envs). ``close()`` is safe at any time.

Ray is started here only if it is not running: ``address`` (or ``RAY_ADDRESS``, read by Ray itself)
joins an existing cluster; without one, a local single-node Ray is started.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Mapping, Sequence
from typing import Any

from gem_core.errors import StartFailed
from gem_core.vector.calls import CLOSED, TIMEOUT, EnvBuilder, check_amount, check_count, check_step_timeout, describe_exception, raise_portable_error
from gem_core.vector.hosted import Batch, HostedBackend, HostedEnvs
from gem_core.vector.in_process import CLOSE_TIMEOUT

__all__ = ["RayBackend", "default_actor_shape"]

#: How often a waiting batch checks whether close() wants it to stop.
_POLL_SECONDS = 0.2


class _EnvGroup(HostedEnvs):
    """The actor: a group of envs living in one Ray worker process (no step timeout inside: the driver's
    deadline kills and replaces a stuck actor)."""

    def node_id(self) -> str:
        import ray

        return ray.get_runtime_context().get_node_id()


#: Ray keeps resource amounts to four decimals; a share is rounded down to that so it never asks for more than is free.
_CPU_STEP = 1e-4


def default_actor_shape(num_envs: int, blocking: bool, free_cpus: float, envs_per_actor: int | None = None) -> tuple[int, float]:
    """``(envs_per_actor, num_cpus)`` for ``num_envs`` envs on a cluster with ``free_cpus`` CPUs free.

    Envs that never block step in microseconds: an actor per env would only add processes (and ask for
    CPUs a laptop does not have), so they share one actor per free CPU (at least one actor). An env that
    may block keeps an actor of its own. Each actor asks for one CPU, or for its share of the free CPUs
    when there are fewer CPUs than actors (0 when none is free), so the whole request always fits. A
    given ``envs_per_actor`` is kept, and the share is computed for the actors it makes.
    """
    if envs_per_actor is None:
        actors = num_envs if blocking else min(num_envs, max(1, int(free_cpus)))
        envs_per_actor = -(-num_envs // actors)
    actors = -(-num_envs // envs_per_actor)  # the groups actually made
    share = max(0.0, free_cpus) / actors
    return envs_per_actor, 1.0 if share >= 1.0 else math.floor(share / _CPU_STEP) * _CPU_STEP


def _free_cpus(ray: Any) -> float:
    """The CPUs no task or actor holds now, over the whole cluster (Ray's own view)."""
    return float(ray.available_resources().get("CPU", 0.0))


class RayBackend(HostedBackend):
    """Envs as Ray actors (see the module docstring).

    Args:
        env_fns: one builder per env (pickled to the actors with Ray's cloudpickle).
        envs_per_actor: envs hosted by one actor (env ``i`` lives in actor ``i // envs_per_actor``).
            None: 1 if ``blocking``, else the envs spread over one actor per free CPU.
        num_cpus: CPUs each actor reserves (fractions allowed). None: 1, or the actor's share of the
            free CPUs where there are fewer than actors (:func:`default_actor_shape`).
        resources: custom resources each actor reserves, e.g. ``{"gem_env": 1}``.
        actor_options: other ``ActorClass.options(...)`` keywords.
        address: a cluster to join when Ray is not initialized yet (None: Ray's default).
        step_timeout: seconds a batch's calls may run on one actor.
        start_timeout: seconds the actors may take to build their envs.
        blocking: whether any env may block (:attr:`gem_core.Env.blocking`); :func:`~gem_core.vector.make_vec`
            passes False when every env declares ``blocking = False``, and only the defaults depend on it.

    Raises:
        InvalidArgument: if ``envs_per_actor`` is not a whole number from 1, ``num_cpus`` or a ``resources`` amount
            is not a finite number from 0 in Ray's steps of 0.0001, ``resources`` names one of Ray's own resources
            (CPU, GPU, memory, object_store_memory), or ``step_timeout``/``start_timeout`` is not a finite number of
            seconds above 0; all checked before Ray is started or joined.
    """

    def __init__(
        self,
        env_fns: Sequence[EnvBuilder],
        envs_per_actor: int | None = None,
        num_cpus: float | None = None,
        resources: Mapping[str, float] | None = None,
        actor_options: Mapping[str, Any] | None = None,
        address: str | None = None,
        step_timeout: float | None = None,
        start_timeout: float = 120.0,
        blocking: bool = True,
    ):
        from gem_core.vector.ray_env import check_ray_amount, check_ray_resources, connect_ray

        # Checked before Ray starts: Ray refuses these with a raw error naming nothing, and a negative
        # start_timeout reaches ray.get, whose C++ core aborts the whole process on it.
        if envs_per_actor is not None:
            envs_per_actor = check_count("envs_per_actor", envs_per_actor, none_means="the default grouping")
        if num_cpus is not None:
            num_cpus = check_ray_amount("num_cpus", num_cpus, "CPUs")
        resources = check_ray_resources("resources", resources)
        self.step_timeout = check_step_timeout(step_timeout)
        start_timeout = check_amount("start_timeout", start_timeout, "seconds")
        self._ray = ray = connect_ray(address)
        self._builders = list(env_fns)
        self.num_envs = len(self._builders)
        if envs_per_actor is None or num_cpus is None:
            envs_per_actor, default_cpus = default_actor_shape(self.num_envs, blocking, _free_cpus(ray), envs_per_actor)
            num_cpus = default_cpus if num_cpus is None else num_cpus
        self.envs_per_actor, self.num_cpus = envs_per_actor, num_cpus
        count = -(-self.num_envs // envs_per_actor)
        self._place([i // envs_per_actor for i in range(self.num_envs)])
        options = {"num_cpus": num_cpus, "max_restarts": 0, "max_task_retries": 0, **dict(actor_options or {})}
        if resources:
            options["resources"] = dict(resources)
        self._actor_class = ray.remote(_EnvGroup).options(**options)
        self._start_timeout = start_timeout
        self._asked = f"num_cpus={num_cpus}, resources={dict(resources or {})}"
        self._lock = threading.Lock()
        self._closed = False
        self.actors: list[Any] = [None] * count
        try:
            for a in range(count):
                self.actors[a] = self._start(a)
            self._await_ready(range(count))
        except BaseException:
            self.close()
            raise

    def _start(self, a: int) -> Any:
        return self._actor_class.remote({i: self._builders[i] for i in self._hosted[a]})

    def _await_ready(self, actors: Any) -> None:
        actors = list(actors)
        refs = [self.actors[a].start.remote() for a in actors]
        try:
            errors = self._ray.get(refs, timeout=self._start_timeout)
        except self._ray.exceptions.GetTimeoutError:
            raise StartFailed(
                f"The Ray actors for the envs did not start within start_timeout={self._start_timeout:g} s. Each asks for "
                f"{self._asked}; the cluster may not have room for {len(refs)} of them: lower num_cpus, raise "
                "envs_per_actor, or add nodes with those resources."
            ) from None
        for a, error in zip(actors, errors, strict=True):
            if error is not None:  # a builder raised: its own exception
                raise_portable_error(error, f"in the Ray actor for envs {self._hosted[a]}")

    def _replace(self, a: int) -> None:
        try:
            self._ray.kill(self.actors[a], no_restart=True)
        except Exception:  # noqa: BLE001 - already gone with its node
            pass
        self.actors[a] = self._start(a)
        self._await_ready([a])

    def _exchange(self, per_actor: dict[int, Batch], results: dict[int, Any]) -> tuple[dict[int, Batch], dict[int, str]]:
        ray = self._ray
        refs = {self.actors[a].run_batch.remote(batch): a for a, batch in per_actor.items()}
        deadline = None if self.step_timeout is None else time.monotonic() + self.step_timeout
        pending = list(refs)
        while pending and not self._closed:
            wait = _POLL_SECONDS if deadline is None else min(_POLL_SECONDS, max(0.0, deadline - time.monotonic()))
            _, pending = ray.wait(pending, num_returns=len(pending), timeout=wait)
            if deadline is not None and time.monotonic() >= deadline:
                break
        lost_actors: dict[int, str] = {}
        for ref, a in refs.items():
            if ref in pending:
                lost_actors[a] = CLOSED if self._closed else TIMEOUT
                continue
            try:
                self._replies(ray.get(ref), results)
            except ray.exceptions.RayActorError as exc:
                lost_actors[a] = f"ActorDied: the Ray actor of envs {self._hosted[a]} was lost ({type(exc).__name__}); it was replaced by a fresh one."
            except Exception as exc:  # noqa: BLE001 - e.g. a result that cannot be unpickled
                lost_actors[a] = f"the actor's answer could not be received: {describe_exception(exc)}"
        return per_actor, lost_actors

    def actor_node_ids(self) -> list[str]:
        """The Ray node id hosting each env, by env index."""
        ids = self._ray.get([actor.node_id.remote() for actor in self.actors])
        return [ids[self._owner[i]] for i in range(self.num_envs)]

    def close(self, timeout: float | None = None) -> None:
        """Kill the actors; a batch in flight gets ``timeout`` seconds (default :data:`CLOSE_TIMEOUT`)."""
        if self._closed:
            return
        got_lock = self._lock.acquire(timeout=CLOSE_TIMEOUT if timeout is None else timeout)
        self._closed = True  # a batch still waiting returns its unfinished envs as closed
        if not got_lock:
            self._lock.acquire()
        try:
            for actor in self.actors:
                if actor is None:
                    continue
                try:
                    self._ray.get(actor.close.remote(), timeout=1.0)
                except Exception:  # noqa: BLE001 - the actor may be busy or gone
                    pass
                try:
                    self._ray.kill(actor, no_restart=True)
                except Exception:  # noqa: BLE001
                    pass
            self.actors = [None] * len(self.actors)
        finally:
            self._lock.release()
