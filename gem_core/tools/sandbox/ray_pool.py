"""Sandboxes on other machines: one Ray actor per labelled node runs snippets there, with that node's own
sandbox pools, so the isolation inside each node is the same as locally (bubblewrap, zygote, limits;
:mod:`gem_core.tools.sandbox`). The actor runs any ``"module:function"`` call (:meth:`RaySandboxPool.call`):
a grader that needs a labelled node passes its own function, so the sandbox knows nothing of graders.

A node offers sandboxes by advertising a custom resource, ``gem_sandbox`` by default
(``ray start --resources='{"gem_sandbox": 16}'``; ``$GEM_SANDBOX_RAY_RESOURCE`` names another one). Its
amount is the node's slots: how many snippets its actor runs at once. The actors are named per node
(``gem_sandbox:<node id>`` in namespace ``gem``), so every process of a job (each of verl's agent loop
workers, say) shares them instead of starting its own. Each actor reserves a sliver of the label
(:data:`ACTOR_SHARE`) and no CPU: the label is the node's sandbox capacity, and the snippets' CPU use
is bounded by the sandbox's own limits.

Calls go to the actor with the fewest calls in flight from this process. A node that dies takes its
actor with it: its calls in flight are run again on another labelled node (a snippet has no effect
outside its sandbox, so running it twice is harmless). The pool looks for labelled nodes every
:data:`REFRESH_SECONDS` in the background (new nodes join), and at once when none of its actors is left;
with no labelled node alive, a call raises :class:`~gem_core.tools.sandbox.SandboxUnavailableError`.

Switch it on with ``GEM_SANDBOX_BACKEND=ray`` (every :func:`~gem_core.tools.sandbox.run_python` of the
process), or per tool/env: ``PythonTool(sandbox_backend="ray")``, ``make("code:...", sandbox_backend="ray")``.
"""

from __future__ import annotations

import dataclasses
import importlib
import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from gem_core.errors import InvalidArgument
from gem_core.tools.sandbox.config import FunctionCall, SandboxResult, SandboxUnavailableError, ray_resource_from_environment

__all__ = ["RaySandboxPool", "default_ray_pool", "ACTOR_SHARE", "NAMESPACE"]

logger = logging.getLogger("gem.tools.sandbox")

ACTOR_SHARE = 0.001
"""The amount of the label each node's actor reserves (it only has to land on the node)."""
#: Nodes a call is tried on before it gives up (each try after a node was lost).
ATTEMPTS = 3
#: Seconds between two looks for labelled nodes (new ones join the pool; the look runs in the background).
REFRESH_SECONDS = 30.0
NAMESPACE = "gem"
"""The Ray namespace of the per-node actors (shared by every job process that joins it)."""


def _check_target(target: str) -> tuple[str, str]:
    """``(module, function)`` of a ``"package.module:function"`` reference; refused here, before it travels."""
    module_name, _, attr = target.partition(":") if isinstance(target, str) else ("", "", "")
    if not module_name or not attr:
        raise InvalidArgument(f"A sandbox node call names its function as 'package.module:function', got {target!r}.")
    return module_name, attr


def _resolve(target: str) -> Callable[..., Any]:
    """The function a reference names, imported on the node."""
    module_name, attr = _check_target(target)
    return getattr(importlib.import_module(module_name), attr)


class _SandboxNode:
    """The actor on one labelled node: runs ``module:function`` calls (threads, one per call)."""

    def __init__(self) -> None:
        self.calls = 0
        self._lock = threading.Lock()

    def call(self, target: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        function = _resolve(target)
        with self._lock:
            self.calls += 1
        return function(*args, **kwargs)

    def stats(self) -> tuple[str, int]:
        import ray

        return ray.get_runtime_context().get_node_id(), self.calls


#: What a snippet runs as on a node: the node's local pools, never ``run_python`` (``GEM_SANDBOX_BACKEND=ray``
#: in the node's worker must not route back to Ray).
_RUN_ON_NODE = "gem_core.tools.sandbox.pool:run_python_here"


class RaySandboxPool:
    """The per-node sandbox actors (see the module docstring).

    Args:
        resource: the custom resource marking sandbox nodes (default ``$GEM_SANDBOX_RAY_RESOURCE`` or
            ``"gem_sandbox"``).
        address: the cluster to join if Ray is not initialized (``"auto"``, else ``$RAY_ADDRESS``).
        start_timeout: seconds a node's actor may take to start.
    """

    def __init__(self, resource: str | None = None, *, address: str | None = None, start_timeout: float = 60.0):
        from gem_core.vector.ray_env import connect_ray

        self._ray = connect_ray(address)
        self.resource = resource or ray_resource_from_environment()
        self.start_timeout = start_timeout
        self._lock = threading.Lock()
        self._actors: dict[str, Any] = {}  # node id -> actor
        self._in_flight: dict[str, int] = {}
        self._refreshed, self._refreshing = 0.0, False
        self._refresh()

    def _labelled_nodes(self) -> dict[str, float]:
        return {
            node["NodeID"]: float(node["Resources"][self.resource])
            for node in self._ray.nodes()
            if node.get("Alive") and node.get("Resources", {}).get(self.resource, 0) > 0
        }

    def _refresh(self, exclude: frozenset[str] = frozenset()) -> None:
        """Find the labelled nodes (but ``exclude``, nodes whose actor was just lost and that Ray may not
        know are dead yet) and get, or start, each one's actor; keep those that answer in time."""
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        nodes = {node: slots for node, slots in self._labelled_nodes().items() if node not in exclude}
        if not nodes:
            raise SandboxUnavailableError(
                f"No live Ray node advertises the resource {self.resource!r}, so there is nowhere to run sandboxes "
                f"on Ray. Start sandbox nodes with `ray start --resources='{{\"{self.resource}\": <slots>}}'`, set "
                "GEM_SANDBOX_RAY_RESOURCE to the label your nodes have, or use sandbox_backend=\"local\"."
            )
        actors = {}
        for node_id, slots in nodes.items():
            actors[node_id] = (
                self._ray.remote(_SandboxNode)
                .options(
                    name=f"gem_sandbox:{node_id}",
                    namespace=NAMESPACE,
                    get_if_exists=True,
                    num_cpus=0,
                    resources={self.resource: ACTOR_SHARE},
                    max_concurrency=max(1, int(slots)),
                    scheduling_strategy=NodeAffinitySchedulingStrategy(node_id, soft=False),
                    max_restarts=0,
                )
                .remote()
            )
        probes = {actor.stats.remote(): node for node, actor in actors.items()}
        ready, _ = self._ray.wait(list(probes), num_returns=len(probes), timeout=self.start_timeout)
        answered = {probes[ref] for ref in ready}
        if not answered:
            raise SandboxUnavailableError(
                f"The sandbox actors on the nodes labelled {self.resource!r} did not start within {self.start_timeout:g} s."
            )
        with self._lock:
            self._actors = {node: actor for node, actor in actors.items() if node in answered}
            self._in_flight = {node: self._in_flight.get(node, 0) for node in self._actors}
            self._refreshed = time.monotonic()

    def _refresh_in_background(self) -> None:
        """Every :data:`REFRESH_SECONDS`, look for new (or returned) labelled nodes without holding up calls."""
        with self._lock:
            if self._refreshing or time.monotonic() - self._refreshed < REFRESH_SECONDS:
                return
            self._refreshing = True

        def refresh() -> None:
            try:
                self._refresh()
            except Exception:  # noqa: BLE001 - the current actors keep serving; the next call retries
                logger.warning("Looking for gem sandbox nodes failed; keeping the known ones.", exc_info=True)
            finally:
                with self._lock:
                    self._refreshing = False
                    self._refreshed = time.monotonic()

        threading.Thread(target=refresh, name="gem-sandbox-nodes", daemon=True).start()

    def _pick(self, avoid: set[str]) -> tuple[str, Any]:
        with self._lock:
            choices = [node for node in self._actors if node not in avoid] or list(self._actors)
            node = min(choices, key=self._in_flight.__getitem__)
            self._in_flight[node] += 1
            return node, self._actors[node]

    def _done(self, node: str) -> None:
        with self._lock:
            if node in self._in_flight:
                self._in_flight[node] -= 1

    def _lost(self, node: str, tried: set[str]) -> None:
        with self._lock:
            self._actors.pop(node, None)
            self._in_flight.pop(node, None)
            if self._actors:
                return  # calls go on with the others; a later background refresh finds nodes that return
        self._refresh(exclude=frozenset(tried))

    def call(self, target: str, *args: Any, **kwargs: Any) -> Any:
        """Call ``target`` (``"package.module:function"``, importable on the nodes) on a labelled node and
        return its result; an exception it raises is raised here. Picklable arguments and results only."""
        _check_target(target)
        return self._call(target, args, kwargs)[1]

    async def acall(self, target: str, *args: Any, **kwargs: Any) -> Any:
        """:meth:`call` for async callers: awaits the actor call, never blocks the event loop."""
        _check_target(target)
        return (await self._acall(target, args, kwargs))[1]

    def run_python(
        self, code: str, *, stdin: str = "", timeout: float = 5.0, memory_mb: int = 512, mode: str | None = None, call: FunctionCall | None = None
    ) -> SandboxResult:
        """:func:`~gem_core.tools.sandbox.run_python` on a labelled node."""
        kwargs = dict(stdin=stdin, timeout=timeout, memory_mb=memory_mb, mode=mode, call=call)
        node, result = self._call(_RUN_ON_NODE, (code,), kwargs)
        return dataclasses.replace(result, node=node)

    async def arun_python(
        self, code: str, *, stdin: str = "", timeout: float = 5.0, memory_mb: int = 512, mode: str | None = None, call: FunctionCall | None = None
    ) -> SandboxResult:
        """:meth:`run_python` for async callers: awaits the actor call, never blocks the event loop."""
        kwargs = dict(stdin=stdin, timeout=timeout, memory_mb=memory_mb, mode=mode, call=call)
        node, result = await self._acall(_RUN_ON_NODE, (code,), kwargs)
        return dataclasses.replace(result, node=node)

    def _call(self, target: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[str, Any]:
        """``(node id, result)`` of ``target`` run on the least busy node, tried again on another if a node dies."""
        self._refresh_in_background()
        tried: set[str] = set()
        for _ in range(ATTEMPTS):
            node, actor = self._pick(tried)
            try:
                return node, self._ray.get(actor.call.remote(target, args, kwargs))
            except self._ray.exceptions.RayActorError:
                tried.add(node)
                self._lost(node, tried)
            except self._ray.exceptions.RayTaskError as exc:  # e.g. a bad timeout: the local pool's own error
                raise exc.as_instanceof_cause() from None
            finally:
                self._done(node)
        raise SandboxUnavailableError(f"The sandbox actors kept dying ({ATTEMPTS} attempts on nodes {sorted(tried)}).")

    async def _acall(self, target: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[str, Any]:
        import asyncio

        self._refresh_in_background()
        tried: set[str] = set()
        for _ in range(ATTEMPTS):
            node, actor = self._pick(tried)
            try:
                return node, await actor.call.remote(target, args, kwargs)
            except self._ray.exceptions.RayActorError:
                tried.add(node)
                await asyncio.to_thread(self._lost, node, tried)
            except self._ray.exceptions.RayTaskError as exc:
                raise exc.as_instanceof_cause() from None
            finally:
                self._done(node)
        raise SandboxUnavailableError(f"The sandbox actors kept dying ({ATTEMPTS} attempts on nodes {sorted(tried)}).")

    def calls_per_node(self) -> dict[str, int]:
        """Calls each node's actor has run (all processes together), by node id."""
        with self._lock:
            actors = list(self._actors.values())
        return dict(self._ray.get([actor.stats.remote() for actor in actors]))

    def node_ids(self) -> list[str]:
        """The Ray node ids that have a sandbox actor."""
        with self._lock:
            return list(self._actors)


_default: RaySandboxPool | None = None
_default_lock = threading.Lock()


def default_ray_pool() -> RaySandboxPool:
    """The process's :class:`RaySandboxPool`, made on first use (joins Ray if it is not initialized)."""
    global _default
    with _default_lock:
        if _default is None:
            _default = RaySandboxPool()
        return _default


def _forget_default_pool() -> None:
    """Drop the default pool (tests that start and stop clusters)."""
    global _default
    with _default_lock:
        _default = None

