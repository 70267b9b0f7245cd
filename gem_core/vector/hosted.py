"""Envs hosted in groups by workers (processes, Ray actors): the part of the algorithm every hosted
backend shares, written once.

The worker side (:class:`HostedEnvs`) builds its group's envs and runs calls on them; the parent side
(:class:`HostedBackend`) fans a batch out as one message per worker, and when a worker is lost (died,
stuck past its deadline, killed with its node) fails that worker's calls, replaces it, and remembers its
other envs as *stale*: their episodes ended with the worker, so their next step answers the loss
(``truncated`` with ``info["error"]``) instead of stepping an env that was rebuilt from scratch.

A worker that cannot be rebuilt (its builder raised, it did not start in time) stays *broken*: its envs'
calls fail (``info["error"]`` starting with ``WorkerNotRebuilt``) and the next batch that calls one of
them tries again. A batch interrupted in the parent (Ctrl-C) leaves the workers that had not answered
broken too, stopped at once where the backend can: their answers, still on the way, must not be read as
the next batch's, and their envs' episodes end as with a lost worker.

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
        self._broken: set[int] = set()  # workers to rebuild before their next batch

    def _run(self, calls: Mapping[int, EnvCall]) -> dict[int, Any]:
        results: dict[int, Any] = {}
        per_worker: dict[int, Batch] = {}
        for i, call in calls.items():
            lost = self._stale.pop(i, None)
            if lost is not None and isinstance(call, Step):
                results[i] = Failure(lost, env_replaced=True)
            else:
                per_worker.setdefault(self._owner[i], []).append((i, call))
        for w in sorted(self._broken & per_worker.keys()):
            error = self._rebuild(w)
            if error is not None:
                for i, _ in per_worker.pop(w):
                    results[i] = Failure(error, env_replaced=True)
        try:
            sent, lost_workers = self._exchange(per_worker, results)
        except BaseException as exc:  # Ctrl-C: the workers still at this batch would answer the next with it
            self._abandon_unanswered(per_worker, results, exc)
            raise
        for w, error in lost_workers.items():
            for i, _ in sent[w]:
                results.setdefault(i, Failure(error, env_replaced=not self._closed))
            if not self._closed:
                self._lose(w, error, skip=calls)
        if not self._closed:
            for w, batch in sent.items():
                if w not in lost_workers:
                    self._after_batch(w, batch)
        return {i: results[i] for i in calls}

    def _lose(self, w: int, why: str, skip: Container[int] = ()) -> None:
        """Worker ``w`` and its envs' episodes are gone (``why``): rebuild it, or leave it broken for the
        next batch to try again; either way the episodes end (see :meth:`_end_episodes`)."""
        self._end_episodes(w, why, skip)
        self._rebuild(w)

    def _rebuild(self, w: int) -> str | None:
        """Replace worker ``w``; None when it started, else the error its envs' calls answer meanwhile (it
        stays broken, so the next batch that calls one of its envs tries again). A builder's failure may
        be passing (a port in use, a full disk): it fails these calls, not the batch."""
        self._broken.add(w)  # until it has started: an interrupt in the middle leaves it broken too
        try:
            self._replace(w)
        except Exception as exc:  # noqa: BLE001 - reported in its envs' results
            return f"WorkerNotRebuilt: the worker of envs {self._hosted[w]} could not be rebuilt ({describe_exception(exc)}); the next call to one of them tries again."
        self._broken.discard(w)
        return None

    def _abandon_unanswered(self, per_worker: Mapping[int, Batch], results: Mapping[int, Any], exc: BaseException) -> None:
        """The batch was interrupted (``exc``) before every worker answered: those that had not are
        stopped and left broken, and their envs' episodes end."""
        for w, batch in per_worker.items():
            if any(i not in results for i, _ in batch):
                self._broken.add(w)
                self._end_episodes(
                    w, f"WorkerInterrupted: a batch was interrupted ({type(exc).__name__}) while the worker of envs "
                    f"{self._hosted[w]} ran it; the worker was stopped and the episode in progress ended."
                )
                self._stop(w)

    def _stop(self, w: int) -> None:
        """Stop worker ``w`` now, whatever it is running (a hook: by default it runs on until it is
        replaced before its next batch)."""

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
