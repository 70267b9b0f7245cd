"""The per-env calls a backend runs, and what comes back when one does not return a result.

:class:`~gem_core.vector.vector_env.VectorEnv` decides which call each env gets (:class:`Reset`,
:class:`Step` or :class:`Call`); a backend runs a batch of them and answers, per env, the call's result
or a :class:`Failure`. Keeping episodes out of the backends is what makes every backend produce the
same episodes.
"""

from __future__ import annotations

import asyncio
import math
import numbers
import pickle
import threading
import traceback
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import gymnasium as gym

from gem_core.env import run_in_env_thread
from gem_core.errors import InvalidArgument, InvalidArgumentType, UsageError

__all__ = [
    "OneBatchAtATime",
    "EnvBuilder",
    "Reset",
    "Step",
    "Call",
    "EnvCall",
    "Failure",
    "TIMEOUT",
    "CLOSED",
    "describe_exception",
    "add_note",
    "build_envs",
    "PortableError",
    "portable_error",
    "raise_portable_error",
    "run_call",
    "arun_call",
    "never_blocks",
    "check_step_timeout",
    "check_count",
    "check_amount",
]

EnvBuilder = Callable[[], gym.Env]
"""Builds one sub-env of a vector env. For the ``process`` backend it runs inside the worker, so with a
``spawn`` or ``forkserver`` context it must be picklable (a module-level function, class or
``functools.partial``).
"""

TIMEOUT = "timeout"
"""``info["error"]`` of a call that ran past ``step_timeout``."""
CLOSED = "closed: the vector env was closed while this call was running"
"""``info["error"]`` of a call cut off because the vector env was closed while it ran."""


@dataclass(frozen=True)
class Reset:
    """Reset the env with ``seed`` and ``options``."""
    seed: int | None = None
    options: dict[str, Any] | None = None


@dataclass(frozen=True)
class Step:
    """Step the env with ``action``."""
    action: Any


@dataclass(frozen=True)
class Call:
    """Call the env's method ``name`` (or read the attribute if it is not callable)."""

    name: str
    args: tuple[Any, ...] = ()
    kwargs: dict[str, Any] = field(default_factory=dict)


EnvCall = Reset | Step | Call
"""One call a vector env sends to an env: a reset, a step or a named method call."""


@dataclass(frozen=True)
class Failure:
    """A call that did not return: ``error`` names the exception (or is :data:`TIMEOUT`/:data:`CLOSED`);
    ``env_replaced`` is true when the env was rebuilt from its builder (its worker died or was recycled,
    or its call timed out), so its RNG and episode state are gone."""

    error: str
    env_replaced: bool = False


def describe_exception(exc: BaseException) -> str:
    """``"ExceptionType: message"``, the last line of the exception's traceback."""
    return "".join(traceback.format_exception_only(type(exc), exc)).strip()


def add_note(exc: BaseException, note: str) -> None:
    """PEP 678's ``add_note`` (Python 3.11+), with the same attribute on 3.10 (where tracebacks omit it)."""
    if hasattr(exc, "add_note"):
        exc.add_note(note)
    else:  # pragma: no cover - Python 3.10
        exc.__notes__ = [*getattr(exc, "__notes__", []), note]  # type: ignore[attr-defined]


def build_envs(builders: Mapping[int, EnvBuilder]) -> dict[int, gym.Env]:
    """Build each env in order. If a builder raises, the envs already built are closed and its exception
    propagates unchanged, so a constructor's ``ValueError`` reaches the caller as itself."""
    envs: dict[int, gym.Env] = {}
    try:
        for index, build in builders.items():
            envs[index] = build()
    except BaseException:
        for env in envs.values():
            try:
                env.close()
            except Exception:  # noqa: BLE001 - closing is best effort; the build error is what matters
                pass
        raise
    return envs


@dataclass(frozen=True)
class PortableError:
    """An exception as a worker process or actor sends it: the exception itself when it survives a
    pickle round trip (else None), what it said, its notes, and the worker's traceback frames."""

    exception: BaseException | None
    summary: str
    notes: tuple[str, ...]
    frames: str


def portable_error(exc: BaseException) -> PortableError:
    """``exc`` packed to cross a process boundary (see :func:`raise_portable_error`)."""
    name = type(exc).__qualname__ if type(exc).__module__ == "builtins" else f"{type(exc).__module__}.{type(exc).__qualname__}"
    summary = f"{name}: {exc}" if str(exc) else name
    frames = "".join(traceback.format_tb(exc.__traceback__)).rstrip()
    notes = tuple(str(n) for n in getattr(exc, "__notes__", ()))
    try:
        pickle.loads(pickle.dumps(exc))
    except Exception:  # noqa: BLE001 - e.g. an exception whose constructor takes keyword-only arguments
        return PortableError(None, summary, notes, frames)
    return PortableError(exc, summary, notes, frames)


def raise_portable_error(error: PortableError, where: str) -> None:
    """Raise the exception a worker sent (its notes travel with it), or a ``RuntimeError`` naming it when
    it could not be sent. ``where`` says where it was raised; it becomes a note, with the worker's frames."""
    exc = error.exception
    if exc is None:
        exc = RuntimeError(f"{where} failed: {error.summary}")
        for note in error.notes:
            add_note(exc, note)
    add_note(exc, f"Raised {where}; its traceback there (most recent call last):\n{error.frames}")
    raise exc


def run_call(env: gym.Env, call: EnvCall) -> Any:
    """Perform one call on an in-process env (shared by every backend, including the workers).

    Raises:
        InvalidArgumentType: if ``call`` is not a :class:`Reset`, :class:`Step` or :class:`Call`.
    """
    if isinstance(call, Step):
        return env.step(call.action)
    if isinstance(call, Reset):
        return env.reset(seed=call.seed, options=call.options)
    if isinstance(call, Call):
        attr = getattr(env, call.name)
        return attr(*call.args, **call.kwargs) if callable(attr) else attr
    raise InvalidArgumentType(f"Unknown env call {call!r}; expected Reset, Step or Call.")


def _has_own(env: gym.Env, name: str) -> bool:
    # A gymnasium Wrapper that is not GEM-aware has no astep; calling the inner env's astep would skip
    # the wrapper, so only use astep/areset when the outermost object defines them.
    return callable(getattr(type(env), name, None))


async def arun_call(env: gym.Env, call: EnvCall) -> Any:
    """:func:`run_call` for an event loop: ``astep``/``areset`` when the env has them, else a thread."""
    if isinstance(call, Step) and _has_own(env, "astep"):
        return await env.astep(call.action)
    if isinstance(call, Reset) and _has_own(env, "areset"):
        return await env.areset(seed=call.seed, options=call.options)
    if isinstance(call, Call):
        return run_call(env, call)
    return await run_in_env_thread(run_call, env, call)


def never_blocks(env: gym.Env) -> bool:
    """Whether the env declares (``blocking = False``) that its steps and resets never wait: such an
    env is stepped inline, without a hop to a thread or an event-loop task.

    Only the outermost object is asked. A gymnasium wrapper does not forward attributes, so a wrapped
    env counts as blocking unless the wrapper itself declares ``blocking = False``; a wrapper that adds
    tool calls to a game is therefore never mistaken for the game.
    """
    return getattr(env, "blocking", True) is False


def check_step_timeout(step_timeout: Any) -> float | None:
    """``step_timeout``, checked: a positive number of seconds, or None for no limit.

    Raises:
        InvalidArgument: if it is zero, negative, infinite or not a number.
    """
    return None if step_timeout is None else check_amount("step_timeout", step_timeout, "seconds", none_means="no limit")


def check_count(name: str, value: Any, *, least: int = 1, most: int | None = None, none_means: str | None = None) -> int:
    """Option ``name``, a count of workers, threads or steps, checked when the backend is made: a whole
    number from ``least`` (1; 0 for retries, reconnects, tool calls) to ``most``. A bool, a float or a text
    is refused, where ``value or default`` would have read 0 as the default and a range check raised a bare
    TypeError. ``none_means`` says, in the message, what None would mean where the caller takes it.

    Raises:
        InvalidArgument: if it is not a whole number in range.
    """
    count = int(value) if isinstance(value, numbers.Integral) and not isinstance(value, bool) else None
    if count is None or count < least or (most is not None and count > most):
        span = f"at least {least}" if most is None else f"between {least} and {most}"
        also = f", or None for {none_means}" if none_means is not None else ""
        raise InvalidArgument(f"{name}={value!r:.80} must be a whole number {span}{also}.")
    return count


def check_amount(name: str, value: Any, unit: str, *, zero_allowed: bool = False, none_means: str | None = None) -> float:
    """Option ``name``, an amount of ``unit`` (seconds, MB), checked when the backend is made: a finite
    number above 0 (or 0 with ``zero_allowed``). A negative cap would act on every batch, and a text would
    fail only at the first step. ``none_means`` says, in the message, what None would mean where the
    caller takes it.

    Raises:
        InvalidArgument: if it is out of range or not a number.
    """
    if (
        isinstance(value, bool) or not isinstance(value, numbers.Real) or not math.isfinite(value)
        or value < 0 or (value == 0 and not zero_allowed)
    ):
        least = "0 or more" if zero_allowed else "above 0"
        also = f", or None for {none_means}" if none_means is not None else ""
        raise InvalidArgument(f"{name}={value!r:.80} must be a finite number of {unit} {least}{also}.")
    return float(value)


class OneBatchAtATime:
    """``run``/``arun`` for backends whose workers take one batch at a time (processes, Ray actors):
    batches are serialised by ``self._lock`` and refused once ``self._closed``; subclasses implement
    ``_run(calls)``."""

    _lock: threading.Lock
    _closed: bool

    def run(self, calls: Mapping[int, EnvCall]) -> dict[int, Any]:
        """Run one batch of calls, waiting for any batch in flight.

        Raises:
            UsageError: if the vector env is closed.
        """
        with self._lock:
            if self._closed:
                raise UsageError("This vector env is closed; make a new one with make_vec(...).")
            return self._run(calls)

    async def arun(self, calls: Mapping[int, EnvCall]) -> dict[int, Any]:
        """:meth:`run` in a worker thread, so the event loop is not blocked."""
        return await asyncio.to_thread(self.run, calls)

    def _run(self, calls: Mapping[int, EnvCall]) -> dict[int, Any]:
        raise NotImplementedError
