"""Envs hosted in groups by workers (processes, Ray actors): the part of the algorithm every hosted
backend shares, written once.

The worker side (:class:`HostedEnvs`) builds its group's envs and runs calls on them; the parent side
(:class:`HostedBackend`) fans a batch out as one message per worker, and when a worker is lost (died,
stuck past its deadline, killed with its node) fails that worker's calls, replaces it, and remembers its
other envs as *stale*: their episodes ended with the worker, so their next step answers the loss
(``truncated`` with ``info["error"]``) instead of stepping an env that was rebuilt from scratch.

A backend says how a message travels (:meth:`HostedBackend._exchange`) and how a worker is replaced
(:meth:`HostedBackend._replace`); :mod:`gem_core.vector.process` and :mod:`gem_core.vector.ray_backend`
are the two.
"""

from __future__ import annotations

import signal
from collections.abc import Container, Mapping
from typing import Any

from gem_core.vector.calls import (
    TIMEOUT,
    Call,
    EnvBuilder,
    EnvCall,
    Failure,
    OneBatchAtATime,
    PortableError,
    Step,
    build_envs,
    describe_exception,
    portable_error,
    run_call,
)

__all__ = ["HostedEnvs", "HostedBackend", "CallTimedOut", "Batch"]

Batch = list[tuple[int, EnvCall]]
"""One worker's share of a batch: (env index, call) pairs."""


class CallTimedOut(BaseException):
    """Raised by SIGALRM inside a call that ran past the step timeout (process workers)."""


class HostedEnvs:
    """The envs of one worker, built from their builders, and the calls run on them.

    A reply is ``(status, payload)``: ``"ok"`` (payload: the result), ``"error"`` (the exception as text)
    or ``"replaced"`` (the env was rebuilt; payload: why).
    """

    def __init__(self, builders: Mapping[int, EnvBuilder]):
        self.builders = dict(builders)
        self.envs: dict[int, Any] = {}

    def start(self) -> PortableError | None:
        """Build the envs; a builder's exception comes back as a value (the envs built before it closed),
        so the parent can raise the builder's own exception."""
        try:
            self.envs = build_envs(self.builders)
        except BaseException as exc:  # noqa: BLE001 - sent to the parent, which raises it (SystemExit too)
            return portable_error(exc)
        return None

    def run(self, index: int, call: EnvCall, step_timeout: float | None = None) -> tuple[str, Any]:
        """Run ``call`` on env ``index`` (built again on first use after a timeout). With ``step_timeout``,
        a SIGALRM handler raising :class:`CallTimedOut` must be installed (main thread only)."""
        envs = self.envs
        timed = step_timeout is not None and not isinstance(call, Call)
        try:
            if envs.get(index) is None:
                envs[index] = self.builders[index]()
            if timed and step_timeout is not None:
                signal.setitimer(signal.ITIMER_REAL, step_timeout)
            try:
                return "ok", run_call(envs[index], call)
            finally:
                if timed:
                    signal.setitimer(signal.ITIMER_REAL, 0)
        except CallTimedOut:
            old, envs[index] = envs.pop(index, None), None
            try:
                if old is not None:
                    old.close()
            except BaseException:  # noqa: BLE001 - the env is dropped either way
                pass
            return "replaced", TIMEOUT
        except BaseException as exc:  # SystemExit from an env is that env's error, not the worker's end
            return "error", describe_exception(exc)

    def run_batch(self, batch: Batch, step_timeout: float | None = None) -> list[tuple[int, str, Any]]:
        """``(env index, status, payload)`` for each call of ``batch``, in order."""
        return [(i, *self.run(i, call, step_timeout)) for i, call in batch]

    def close(self) -> None:
        """Close every env; closing is best effort (one that raises does not keep the others open)."""
        for env in self.envs.values():
            try:
                if env is not None:
                    env.close()
            except BaseException:  # noqa: BLE001
                pass


class HostedBackend(OneBatchAtATime):
    """The parent side of a hosted backend: env ``i`` lives in worker ``self._owner[i]``; a batch is one
    message per worker; a lost worker is replaced and its other envs' episodes end (see the module
    docstring). Subclasses set ``_closed``, ``_lock`` and call :meth:`_place` in ``__init__``."""

    num_envs: int

    def _place(self, owner: list[int]) -> None:
        """Host env ``i`` in worker ``owner[i]``."""
        self._owner = owner
        count = max(owner, default=-1) + 1
        self._hosted = [[i for i in range(len(owner)) if owner[i] == w] for w in range(count)]
        self._stale: dict[int, str] = {}  # env index -> why its episode was lost since its last call

    def _run(self, calls: Mapping[int, EnvCall]) -> dict[int, Any]:
        results: dict[int, Any] = {}
        per_worker: dict[int, Batch] = {}
        for i, call in calls.items():
            lost = self._stale.pop(i, None)
            if lost is not None and isinstance(call, Step):
                results[i] = Failure(lost, env_replaced=True)
            else:
                per_worker.setdefault(self._owner[i], []).append((i, call))
        sent, lost_workers = self._exchange(per_worker, results)
        for w, error in lost_workers.items():
            for i, _ in sent[w]:
                results.setdefault(i, Failure(error, env_replaced=not self._closed))
            if not self._closed:
                self._replace(w)
                self._end_episodes(w, error, skip=calls)
        if not self._closed:
            for w, batch in sent.items():
                if w not in lost_workers:
                    self._after_batch(w, batch)
        return {i: results[i] for i in calls}

    def _end_episodes(self, w: int, why: str, skip: Container[int] = ()) -> None:
        """The episodes of worker ``w``'s envs (but those in ``skip``, answered already) ended: say ``why``
        at their next step."""
        for i in self._hosted[w]:
            if i not in skip:
                self._stale[i] = why

    @staticmethod
    def _replies(replies: list[tuple[int, str, Any]], results: dict[int, Any]) -> None:
        """Record a worker's ``(env index, status, payload)`` replies as results or failures."""
        for i, outcome, value in replies:
            results[i] = value if outcome == "ok" else Failure(value, env_replaced=outcome == "replaced")

    def _exchange(self, per_worker: dict[int, Batch], results: dict[int, Any]) -> tuple[dict[int, Batch], dict[int, str]]:
        """Send each worker its batch and record the answers in ``results``; return what was sent to each
        worker and, for each worker lost meanwhile, the error its envs' calls answer."""
        raise NotImplementedError

    def _replace(self, w: int) -> None:
        """Start a fresh worker ``w`` from the same builders."""
        raise NotImplementedError

    def _after_batch(self, w: int, batch: Batch) -> None:
        """Worker ``w`` answered ``batch`` (a hook: the process backend recycles workers here)."""
