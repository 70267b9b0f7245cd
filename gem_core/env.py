"""The text environment contract every GEM env follows.

An :class:`Env` is a :class:`gymnasium.Env` whose observations and actions are strings. Everything the
rest of the project does (wrappers, vector execution, the episode runner, the adapters) relies only on
the methods defined here.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import contextvars
import copy
import functools
import inspect
import logging
import numbers
import threading
import time
from collections.abc import Hashable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, ClassVar, SupportsFloat, TypeVar

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from gem_core.errors import InvalidArgument, InvalidArgumentType

__all__ = [
    "Env", "TextSpace", "StepResult", "MAX_TEXT_LENGTH", "EnvThreadPool", "ENV_THREADS", "run_in_env_thread",
    "EPISODE_OVER", "episode_over_result", "guard_episode_end", "log_error_once", "warn_once", "episode_success",
    "STATE_FORMAT", "StateSnapshots", "MAX_SEED", "check_seed",
]

MAX_TEXT_LENGTH = 1_000_000
"""Longest observation or action the spaces admit. Actions longer than this are still answered (with a
format penalty), never rejected with an exception: a model's output is untrusted input.
"""

StepResult = tuple[str, SupportsFloat, bool, bool, dict[str, Any]]
"""What :meth:`Env.step` returns: ``(observation, reward, terminated, truncated, info)``, gymnasium's order."""

MAX_SEED = 2**63 - 1
"""The largest seed :meth:`Env.reset` takes, and a dataset label carries (:mod:`gem_core.rows.label`): parquet and
Arrow store the seed column as a signed 64-bit integer."""


def check_seed(seed: Any) -> int | None:
    """A reset's ``seed`` as gymnasium takes it: a Python int (numpy's integers, a seed drawn with numpy or read
    from a column, are converted; gymnasium refused them with its own error, as it did a negative seed).

    Raises:
        InvalidArgument: if it is not None or a whole number from 0 to :data:`MAX_SEED`.
    """
    if seed is None or (type(seed) is int and 0 <= seed <= MAX_SEED):  # the common case, once per episode
        return seed
    if isinstance(seed, numbers.Integral) and not isinstance(seed, bool) and 0 <= int(seed) <= MAX_SEED:
        return int(seed)
    raise InvalidArgument(f"seed={seed!r:.40} must be a whole number from 0 to {MAX_SEED}, or None for a fresh random seed.")


STATE_FORMAT = "gem.env_state/1"
"""Version tag of :meth:`Env.get_state` snapshots; :meth:`Env.set_state` refuses any other."""


class EnvThreadPool:
    """The threads that run blocking ``step``/``reset`` calls for :meth:`Env.astep`/:meth:`Env.areset`.

    Large (256 threads) on purpose: asyncio's default executor has ``min(32, cpus + 4)`` threads, so on
    a 2-core machine only 6 slow steps (tool calls, graders waiting on I/O) could overlap, while
    episodes run by the hundred and a waiting thread is cheap (``bench/concurrency.py`` shows both).
    The threads start on first use, not at import; :meth:`shutdown` stops them, and a later call
    starts a fresh pool.

    Args:
        max_workers: threads in the pool.
        thread_name_prefix: the threads' name prefix (seen in stack dumps and profilers).
    """

    def __init__(self, max_workers: int = 256, thread_name_prefix: str = "gem-env"):
        self.max_workers = max_workers
        self.thread_name_prefix = thread_name_prefix
        self._executor: concurrent.futures.ThreadPoolExecutor | None = None
        self._lock = threading.Lock()
        #: When each call now running in a pool thread started (``time.monotonic``), by call.
        self._running: dict[object, float] = {}
        self._watchers: contextvars.ContextVar[list[concurrent.futures.Future[Any]] | None] = contextvars.ContextVar(
            f"{thread_name_prefix}-watchers", default=None
        )

    @property
    def executor(self) -> concurrent.futures.ThreadPoolExecutor:
        """The executor, created on first use."""
        executor = self._executor
        if executor is None:
            with self._lock:
                if self._executor is None:
                    self._executor = concurrent.futures.ThreadPoolExecutor(self.max_workers, self.thread_name_prefix)
                executor = self._executor
        return executor

    @property
    def started(self) -> bool:
        """Whether the threads are running (they start on first use)."""
        return self._executor is not None

    async def run(self, fn: Any, /, *args: Any, **kwargs: Any) -> Any:
        """Run a blocking call in a pool thread without blocking the event loop.

        Cancelling the caller does not stop the thread (nothing can): the call stays in
        :meth:`running_longer_than` until it returns.
        """
        return await asyncio.wrap_future(self.submit(fn, *args, **kwargs))

    def submit(self, fn: Any, /, *args: Any, **kwargs: Any) -> concurrent.futures.Future[Any]:
        """Start a blocking call in a pool thread; its future is done when the thread is free again.

        A caller that stopped waiting (a server's step timeout) can act on that future when the call
        at last returns, e.g. close the env only then. Watchers (:meth:`watching`) see it too.
        """
        key = object()

        def timed() -> Any:
            self._running[key] = time.monotonic()
            try:
                return fn(*args, **kwargs)
            finally:
                del self._running[key]

        future = self.executor.submit(timed)
        watchers = self._watchers.get()
        if watchers is not None:
            watchers.append(future)
        return future

    @contextlib.contextmanager
    def watching(self) -> Iterator[list[concurrent.futures.Future[Any]]]:
        """Collect the futures of the calls started in this context (and in tasks created within it).

        An env's ``astep`` starts its thread out of the caller's sight; a server that gave up on a step
        still has to know when that thread is done with the env before it may close it.
        """
        started: list[concurrent.futures.Future[Any]] = []
        token = self._watchers.set(started)
        try:
            yield started
        finally:
            self._watchers.reset(token)

    def running_longer_than(self, seconds: float) -> int:
        """How many calls have held their pool thread for over ``seconds`` (hung steps a server must report)."""
        now = time.monotonic()
        return sum(now - started > seconds for started in list(self._running.values()))

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        """Stop the threads (after their calls finish when ``wait``)."""
        with self._lock:
            executor, self._executor = self._executor, None
        if executor is not None:
            executor.shutdown(wait=wait, cancel_futures=cancel_futures)


ENV_THREADS = EnvThreadPool()
"""The process-wide pool behind the default :meth:`Env.astep`/:meth:`Env.areset`."""


async def run_in_env_thread(fn: Any, /, *args: Any, **kwargs: Any) -> Any:
    """Run a blocking env call in :data:`ENV_THREADS` without blocking the event loop."""
    return await ENV_THREADS.run(fn, *args, **kwargs)


class TextSpace(spaces.Text):
    """A :class:`gymnasium.spaces.Text` that admits any Unicode string up to ``max_length``.

    gymnasium's ``Text`` checks membership against a finite charset (alphanumerics by default). LLM
    observations hold punctuation, newlines and arbitrary Unicode, so membership here is "is a ``str``
    of admissible length"; ``sample()`` still draws from the charset, which gives random actions.

    Args:
        max_length: the longest string admitted.
        min_length: the shortest string admitted.
        seed: seeds the space's own RNG (for ``sample()``).
    """

    def __init__(self, max_length: int = MAX_TEXT_LENGTH, *, min_length: int = 0, seed: int | None = None):
        charset = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789 .,;:!?()[]{}\\'\"-_+=*/<>\n"
        super().__init__(max_length=max_length, min_length=min_length, charset=charset, seed=seed)

    def contains(self, x: Any) -> bool:
        """Whether ``x`` is a ``str`` whose length is within ``[min_length, max_length]``."""
        return isinstance(x, str) and self.min_length <= len(x) <= self.max_length

    def sample(self, mask: Any = None, probability: Any = None) -> str:
        """A random string, the one :meth:`gymnasium.spaces.Text.sample` draws for the same RNG state.

        gymnasium joins the drawn characters one numpy scalar at a time: ~0.1 s for the average
        500,000 characters of this space (``gymnasium.utils.env_checker.check_env`` samples three).
        The same draws, joined as one array, take a few milliseconds. ``mask``/``probability`` go to
        gymnasium unchanged.
        """
        if mask is not None or probability is not None:
            return super().sample(mask=mask, probability=probability)
        length = self.np_random.integers(self.min_length, self.max_length + 1)
        uniform = np.ones(len(self.character_set)) / len(self.character_set)
        drawn = self.np_random.choice(self.character_list, size=length, p=uniform)  # gymnasium's draw, call for call
        return drawn.astype("<U1").tobytes().decode("utf-32-le")

    def __repr__(self) -> str:
        return f"TextSpace(min_length={self.min_length}, max_length={self.max_length})"


EPISODE_OVER = "The episode is over; this action was not scored. Call reset() to start a new episode."
"""The observation for an action sent after the episode ended (see :func:`guard_episode_end`)."""

logger = logging.getLogger("gem.env")
_warned: set[Hashable] = set()
_warned_lock = threading.Lock()


def warn_once(log: logging.Logger, key: Hashable, message: str, *args: Any) -> None:
    """Log ``message % args`` as a warning the first time ``key`` is seen in this process.

    The one "warn once" of the package: errors an env turns into a reward or a truncation repeat on
    every step of a training run, so each kind is logged once and counted in the metrics after that.
    """
    with _warned_lock:
        if key in _warned:
            return
        _warned.add(key)
    log.warning(message, *args)


def log_error_once(env: Any, error: str, detail: str = "") -> None:
    """Log one warning per env id and kind of error that an env turned into a reward.

    A grader that crashes or times out on every answer pays 0 for everything; the warning makes that
    visible once per ``(env id, error)`` without flooding a training log, and ``info["error"]`` marks
    every such step for the rollout's metrics.
    """
    env_id = getattr(env, "env_id", None) or type(env).__name__
    key = ("scored-error", str(env_id), error.split(":", 1)[0])
    warn_once(logger, key, "%s: %s%s (scored as reward 0; further errors of this kind are not logged)", env_id, error, f": {detail}" if detail else "")


def episode_success(infos: Sequence[Mapping[str, Any]], episode_return: float, terminated: bool) -> bool:
    """Whether an episode succeeded: the one definition (wrappers, the session and the eval report).

    The env's own verdict wins: ``info["success"]`` of the last step, where the env reports one (games
    do, on their last step). Otherwise an episode the env ended (``terminated``, not cut short) with a
    positive return succeeded: a graded answer that scored.
    """
    if infos and "success" in infos[-1]:
        return bool(infos[-1]["success"])
    return bool(terminated and episode_return > 0)


def episode_over_result() -> StepResult:
    """What a step after the end of an episode returns: no reward, still terminated, never a re-grade."""
    return EPISODE_OVER, 0.0, True, False, {"episode_over": True}


def guard_episode_end(cls: type) -> type:
    """Make the ``step``/``astep``/``reset``/``areset`` of ``cls`` respect episode ends.

    Once a step returns ``terminated`` or ``truncated``, further steps return
    :func:`episode_over_result` until the next reset that returns, whatever the subclass's own ``step`` would do
    (GuessTheNumber paid 1.0 for the right number after "Out of turns"; math envs re-graded). A reset that raises
    (a refused seed) leaves an ended episode ended. Applied to every subclass of :class:`Env` and of the GEM
    wrapper, so no env has to remember it: the methods ``cls`` defines, and those it inherits unguarded (from a
    mixin holding the grading logic, a class that is no env); methods already guarded are left as they are.
    """
    step = _unguarded(cls, "step")
    if step is not None:

        @functools.wraps(step)
        def guarded_step(self: Any, action: str) -> StepResult:
            # Inline, not helper calls: this runs on every step of every env, and the cheapest games
            # step in a few microseconds.
            if getattr(self, "_gem_episode_over", False):
                return episode_over_result()
            result = step(self, action)
            if result[2] or result[3]:
                self._gem_episode_over = True
            return result

        guarded_step._gem_guarded = True  # type: ignore[attr-defined]
        cls.step = guarded_step  # type: ignore[attr-defined]
    astep = _unguarded(cls, "astep")
    if astep is not None and inspect.iscoroutinefunction(astep):

        @functools.wraps(astep)
        async def guarded_astep(self: Any, action: str) -> StepResult:
            if getattr(self, "_gem_episode_over", False):
                return episode_over_result()
            result = await astep(self, action)
            if result[2] or result[3]:
                self._gem_episode_over = True
            return result

        guarded_astep._gem_guarded = True  # type: ignore[attr-defined]
        cls.astep = guarded_astep  # type: ignore[attr-defined]
    for name in ("reset", "areset"):
        method = _unguarded(cls, name)
        if method is None:
            continue
        # The flag clears only once the reset has returned: one that raised started no episode.
        if inspect.iscoroutinefunction(method):

            async def guarded_areset(self: Any, *args: Any, _reset: Any = method, **kwargs: Any) -> Any:
                result = await _reset(self, *args, **kwargs)
                self._gem_episode_over = False
                return result

            guarded = functools.wraps(method)(guarded_areset)
        else:

            def guarded_reset(self: Any, *args: Any, _reset: Any = method, **kwargs: Any) -> Any:
                result = _reset(self, *args, **kwargs)
                self._gem_episode_over = False
                return result

            guarded = functools.wraps(method)(guarded_reset)
        guarded._gem_guarded = True  # type: ignore[attr-defined]
        setattr(cls, name, guarded)
    return cls


def _unguarded(cls: type, name: str) -> Any:
    """The method ``name`` that ``cls`` defines or inherits, if it still needs the episode-end guard; else None.

    An inherited one needs it only if it is a plain function not guarded yet: a subclass of a guarded class
    inherits the guarded method, and wrapping it again would only add a check to every step.
    """
    if name in vars(cls):
        method = vars(cls)[name]
    else:
        method = next((vars(base)[name] for base in cls.__mro__[1:] if name in vars(base)), None)
        if not inspect.isfunction(method):
            return None
    return None if getattr(method, "_gem_guarded", False) else method


_Snapshotted = TypeVar("_Snapshotted", bound="StateSnapshots")


class StateSnapshots:
    """Save, restore and branch an env's episode: the state methods of :class:`Env` and of
    :class:`gem_core.multi_agent.MultiAgentEnv` (any env whose state lives in its attributes)."""

    if TYPE_CHECKING:  # the env class this is mixed into provides them (real ones here would shadow gymnasium's)
        np_random: np.random.Generator

        def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> Any: ...

    #: Attributes that are shared resources, not episode state (a dataset every env reads, a tool
    #: client): :meth:`get_state` leaves them out, :meth:`set_state` leaves them as they are, and
    #: :meth:`spawn` shares them with the clone.
    state_excludes: ClassVar[frozenset[str]] = frozenset()

    def _state_attributes(self) -> dict[str, Any]:
        excluded: set[str] = set()
        for cls in type(self).__mro__:
            excluded.update(getattr(cls, "state_excludes", ()))
        return {name: value for name, value in vars(self).items() if name not in excluded}

    def get_state(self) -> dict[str, Any]:
        """A picklable snapshot of the episode so far, RNG included.

        Restoring it (:meth:`set_state`) into an env built with the same arguments continues exactly as
        this env would: same observations, rewards and terminations for the same actions. Group-based RL
        and tree search branch from such snapshots mid-episode, not only from a reset seed.

        Raises:
            TypeError: an attribute cannot be copied (a client, a lock); the env should list it in
                :attr:`state_excludes`.
        """
        attributes = {}
        for name, value in self._state_attributes().items():
            try:
                attributes[name] = copy.deepcopy(value)
            except Exception as exc:
                raise InvalidArgumentType(
                    f"{type(self).__name__}.get_state() cannot copy attribute {name!r} ({type(value).__name__}: {exc}); "
                    f"if it is a shared resource rather than episode state, add it to {type(self).__name__}.state_excludes."
                ) from exc
        return {"format": STATE_FORMAT, "env": _qualified_name(self), "attributes": attributes}

    def set_state(self, state: dict[str, Any]) -> None:
        """Continue from a :meth:`get_state` snapshot of an env of the same class.

        The whole snapshot is checked before any attribute changes, so a refused one leaves the env as it was.
        Attributes the env has and the snapshot lacks (created after it was taken) are removed, except those in
        :attr:`state_excludes`, which :meth:`get_state` never takes.
        Only names :meth:`get_state` could have produced are set: an attribute of this env, or a new name that
        is no method or property of its class (a tampered snapshot could otherwise replace ``step``).

        Raises:
            InvalidArgument: (a ValueError) the snapshot has another format version, comes from another env
                class, has no ``attributes`` dict, or names an attribute that is not episode state.
        """
        _check_state(self, state)
        excluded = set().union(*(getattr(cls, "state_excludes", ()) for cls in type(self).__mro__))
        _restore_attributes(self, _settable_attributes(self, state, excluded), excluded)

    def spawn(self: _Snapshotted, same_state: bool = True, *, seed: int | None = None) -> _Snapshotted:
        """A new env with this one's configuration (shared resources shared, see :attr:`state_excludes`).

        With ``same_state`` it continues from this env's current state (a branch) and leaves this env's RNG
        alone; otherwise it is reset with ``seed``. Without a seed, one is drawn from this env's
        :attr:`np_random`: the clone copies that generator and ``reset(seed=None)`` keeps it, so every clone
        would otherwise deal this env's next episode. Drawn, clones differ, and a seeded env spawns the same ones.
        """
        if not same_state and seed is None:
            seed = int(self.np_random.integers(MAX_SEED))
        clone = copy.copy(self)
        clone.set_state(self.get_state())
        if not same_state:
            clone.reset(seed=seed)
        return clone


class Env(StateSnapshots, gym.Env[str, str]):
    """A multi-turn text environment.

    Subclasses implement :meth:`reset` (calling ``super().reset(seed=seed)`` first, which seeds
    :attr:`np_random`), :meth:`step` and :meth:`sample_random_action`. All randomness goes through
    ``self.np_random``: the process-wide ``random``/``numpy`` generators are never seeded or used, so the
    same seed gives the same episode whatever else runs in the process.

    A malformed action is part of the game, not a programming error: answer it with
    :meth:`invalid_action`, which returns an observation that says what was expected, the env's
    :attr:`format_penalty` as reward, and ``info["format_error"] = True``.

    An episode that has ended stays ended: a step after ``terminated``/``truncated`` is answered with
    :data:`EPISODE_OVER`, reward 0 and ``terminated=True`` until :meth:`reset` (see
    :func:`guard_episode_end`; subclasses get this without doing anything).
    """

    metadata: dict[str, Any] = {"render_modes": ["ansi"]}
    observation_space = TextSpace()
    action_space = TextSpace()

    #: The most an episode can return, where the env knows it (games: 1.0 on a win); None if unbounded
    #: or unknown. Evaluation and tests compare returns against it.
    max_return: float | None = None
    #: Reward given for an action the env cannot parse. Negative, small next to a win.
    format_penalty: float = -0.1
    #: Whether a malformed action ends the episode. Games usually let the agent try again (and count the
    #: turn); single-question tasks end.
    terminate_on_format_error: bool = False
    #: Whether a step or reset may wait (on I/O, a subprocess, a grader). Envs whose steps are quick
    #: pure computation (the games) set it False: ``astep``/``areset`` and the vector backends then call
    #: them inline instead of hopping to a thread, which costs far more than such a step.
    blocking: bool = True
    #: The longest one ``step`` may take, in seconds, on any action (graders and tool calls included,
    #: a scoring worker's start-up and dataset build excluded: those are bounded by the worker pool's
    #: start-up limit and reported as ``info["scorer_setup_seconds"]``). Envs that call a grader or a
    #: tool declare more. The fuzz test holds every registered env to it.
    max_step_seconds: float = 1.0
    #: The registry id the env was made from (set by :func:`gem_core.registry.make`); None if built directly.
    env_id: str | None = None

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        guard_episode_end(cls)

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
        """Start a new episode.

        Args:
            seed: seeds :attr:`np_random`; the same seed gives the same episode.
            options: env-specific reset options.

        Returns:
            ``(observation, info)``: the first observation states the task and the action format.

        Raises:
            InvalidArgument: if ``seed`` is not None or a whole number from 0 to :data:`MAX_SEED`.
        """
        super().reset(seed=check_seed(seed), options=options)
        return "", {}

    def step(self, action: str) -> StepResult:
        """Act in the env.

        Returns:
            ``(observation, reward, terminated, truncated, info)`` as in gymnasium. ``observation`` is the
            text the agent sees next (feedback on this action, and what to do now).
        """
        raise NotImplementedError

    def sample_random_action(self) -> str:
        """A well-formed action drawn from :attr:`np_random` (a random policy's move)."""
        raise NotImplementedError

    async def areset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
        """:meth:`reset` off the event loop, so a slow reset never blocks an async trainer."""
        if not self.blocking:
            return self.reset(seed=seed, options=options)
        return await run_in_env_thread(self.reset, seed=seed, options=options)

    async def astep(self, action: str) -> StepResult:
        """:meth:`step` off the event loop: tool calls and graders may take seconds."""
        if not self.blocking:
            return self.step(action)
        return await run_in_env_thread(self.step, action)

    def invalid_action(self, message: str, *, truncated: bool = False, **info: Any) -> StepResult:
        """The step result for an action the env cannot use; ``message`` says what was expected.

        ``truncated`` is for envs where a malformed move still costs a turn: the last one ends the episode.
        """
        return (
            message,
            self.format_penalty,
            self.terminate_on_format_error,
            truncated,
            {"format_error": True, **info},
        )

    def render(self) -> str | None:
        """The current state as text (``render_mode="ansi"``); envs that keep a board override this."""
        return None


# Env's own astep/areset only call step/reset, which every subclass gets guarded (guard_episode_end):
# a subclass that inherits them needs no second check on every async step.
Env.astep._gem_guarded = True  # type: ignore[attr-defined]
Env.areset._gem_guarded = True  # type: ignore[attr-defined]


def _qualified_name(obj: Any) -> str:
    return f"{type(obj).__module__}.{type(obj).__qualname__}"


def _check_state(owner: Any, state: Any) -> None:
    if not isinstance(state, dict) or state.get("format") != STATE_FORMAT:
        found = state.get("format") if isinstance(state, dict) else type(state).__name__
        raise InvalidArgument(f"Not an env state of format {STATE_FORMAT!r} (got {found!r}); take it from get_state().")
    if state.get("env") != _qualified_name(owner):
        raise InvalidArgument(f"This state belongs to {state.get('env')!r}, not {_qualified_name(owner)!r}; restore it into an env of that class.")


def _restore_attributes(owner: Any, attributes: Mapping[str, Any], excluded: set[str] | frozenset[str]) -> None:
    """Make ``owner``'s own attributes exactly the checked snapshot ``attributes`` (copies), ``excluded`` ones aside.

    An attribute created after the snapshot (a hint asked for later) is no part of the restored episode: it is
    removed, or the restored env or wrapper would go on differently from the snapshotted one.
    """
    for name, value in attributes.items():
        setattr(owner, name, copy.deepcopy(value))
    for name in [name for name in vars(owner) if name not in attributes and name not in excluded]:
        delattr(owner, name)


def _settable_attributes(owner: Any, state: Mapping[str, Any], excluded: set[str] | frozenset[str]) -> dict[str, Any]:
    """The ``attributes`` of snapshot ``state``, each checked as one :meth:`StateSnapshots.get_state` could have
    taken from ``owner``: one of its own, or a new name that is no method or property of its class (a tampered
    snapshot could otherwise replace ``step``), never one in ``excluded``. All are checked before the caller sets
    any, so a refused snapshot changes nothing.

    Raises:
        InvalidArgument: no ``attributes`` dict, or a name that is not episode state.
    """
    attributes = state.get("attributes")
    if not isinstance(attributes, dict):
        raise InvalidArgument(f"This snapshot's 'attributes' must be a dict, got {type(attributes).__name__}; take the snapshot from get_state().")
    for name in attributes:
        if isinstance(name, str) and name.isidentifier() and not name.startswith("__") and name not in excluded:
            if name in vars(owner):
                continue
            try:
                member = inspect.getattr_static(type(owner), name)
            except AttributeError:
                continue
            if not callable(member) and not hasattr(type(member), "__get__"):  # a class-level default value
                continue
        raise InvalidArgument(f"This snapshot sets attribute {name!r}, which is not episode state of {type(owner).__name__} "
                              "(a method, property, inner env or shared resource); take the snapshot from get_state().")
    return attributes
