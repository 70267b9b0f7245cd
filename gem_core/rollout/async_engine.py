"""Asynchronous (off-policy) rollouts: episodes keep playing while the trainer trains.

The synchronous path (:func:`~gem_core.rollout.runner.run_episodes`, then a training step) waits for the
slowest episode of every batch, and the generator idles during the training step. Multi-turn episodes
have long-tailed lengths, so that wait is most of the run. :class:`AsyncEpisodeEngine` runs each episode
as its own task, continuously, and hands the trainer finished episodes in the order they finish:

- **versions.** The policy is a :class:`~gem_core.rollout.policy_version.VersionedPolicy`; every sampled
  token records the version that produced it (``TokenTrajectory.token_versions``, with the behaviour
  log-probs in ``logprobs``), and :meth:`AsyncEpisodeEngine.update_policy` is how the weights change.
- **staleness bound.** An episode whose oldest token is more than ``max_staleness`` versions behind the
  current version is never handed to the trainer. By default it is dropped (``on_stale="drop"``: its seed is
  not played again, so the data distribution does not lean towards short episodes through replays);
  ``on_stale="regenerate"`` plays the same seed again from the start. Both are counted in
  :meth:`AsyncEpisodeEngine.metrics`. It is checked when the episode is handed over; finished episodes are
  handed oldest first (the one nearest the bound goes now rather than being dropped at the next batch).
  Once a batch has been handed, episodes (finished, or before their next turn) that will be past the bound
  under the next version stop at once, so their replacements play while the trainer trains (this assumes
  the usual cadence of one batch per update; a trainer that takes more loses those episodes, never the bound).
- **admission.** At most ``max_in_flight`` episodes run at once, and no more episodes start than the
  trainer can take within the bound: with ``u`` updates so far, kept episodes plus running ones stay
  below ``(u + max_staleness + 1) * batch_size`` (AReaL's rule). So ``max_staleness=0`` is the
  synchronous schedule (the next batch starts only after the update), and ``max_staleness=1`` lets the
  next batch play while the trainer trains on this one.
- **interrupt and resume.** With ``on_update="interrupt"`` (default) an update aborts the in-flight
  generations; each such turn is asked for again from the same context once the new weights are in. The
  env was not stepped for an aborted turn, so it is stepped exactly once per action, and the turn's
  tokens are those the new weights sampled, tagged with the new version. ``on_update="drain"`` waits
  for the in-flight generations to end instead.

Everything runs on the caller's event loop: run a blocking training step off the loop (for example
``await asyncio.to_thread(train_step, batch)``) so the episodes keep playing meanwhile.

Example::

    policy = VersionedPolicy(backend)
    config = AsyncRolloutConfig(batch_size=64, max_staleness=1)
    async with AsyncEpisodeEngine("game:GuessTheNumber-v0", policy, tokenizer, itertools.count(), config) as engine:
        for step in range(100):
            batch = await engine.next_batch()
            await asyncio.to_thread(train_step, batch)
            await engine.update_policy(load_new_weights)
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import deque
from collections.abc import AsyncIterator, Callable, Iterable
from dataclasses import dataclass
from enum import Enum
from typing import Any

from gem_core.env import warn_once
from gem_core.errors import GemError, InvalidArgument
from gem_core.protocols import Tokenizer
from gem_core.rollout.chat_template import ChatTemplate
from gem_core.rollout.policy import Policy, SamplingParams
from gem_core.rollout.policy_version import VersionedPolicy, WeightUpdate, episode_counting_batcher
from gem_core.rollout.runner import EnvFactory, _closed_when_idle, _play, _TurnState, _with_stop_tokens
from gem_core.rollout.session import EpisodeSession
from gem_core.rollout.trajectory import TokenTrajectory

__all__ = [
    "AsyncEpisodeEngine", "AsyncRolloutConfig", "AsyncRolloutConfigError", "AsyncRolloutOrderError", "EnvStartError", "OnStale",
    "OnUpdate",
]

logger = logging.getLogger("gem.rollout")

#: The fewest episodes in a row whose env failed to start that end the run (:class:`EnvStartError`): with a batch of
#: one, a single bad row would.
MIN_FAILED_STARTS = 8


class AsyncRolloutConfigError(GemError, ValueError):
    """An :class:`AsyncRolloutConfig` field holds a value the engine cannot run with."""


class AsyncRolloutOrderError(GemError, RuntimeError):
    """:class:`AsyncEpisodeEngine` was used out of order (a batch before ``start`` or after ``aclose``, too many
    batches per update)."""


class EnvStartError(GemError, RuntimeError):
    """Every episode's env failed to start (to be made, or reset) for a whole batch of episodes in a row (at least
    :data:`MIN_FAILED_STARTS`): a broken env or config, not a bad row. The last one's error is the cause
    (``__cause__``)."""


class OnStale(str, Enum):
    """What happens to an episode that is too old for the trainer."""

    DROP = "drop"
    """Discard it; its seed is not played again."""
    REGENERATE = "regenerate"
    """Play its seed again from the start, with the current weights."""


class OnUpdate(str, Enum):
    """What a weight update does to the generations in flight."""

    INTERRUPT = "interrupt"
    """Abort them; each turn is sampled again, from the same context, by the new weights."""
    DRAIN = "drain"
    """Let them finish with the old weights, then update."""


@dataclass
class AsyncRolloutConfig:
    """How :class:`AsyncEpisodeEngine` schedules episodes."""

    batch_size: int = 64
    """Episodes per :meth:`AsyncEpisodeEngine.next_batch` (per training step)."""
    max_staleness: int = 1
    """Most versions an episode's oldest token may lag the current version when handed to the trainer."""
    max_in_flight: int = 128
    """Most episodes running at once."""
    on_stale: OnStale | str = OnStale.DROP
    """``"drop"`` (default) or ``"regenerate"`` an episode past ``max_staleness``."""
    on_update: OnUpdate | str = OnUpdate.INTERRUPT
    """``"interrupt"`` (default: abort and resample in-flight turns) or ``"drain"`` (let them finish)."""

    def __post_init__(self) -> None:
        for name in ("batch_size", "max_in_flight"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise AsyncRolloutConfigError(f"AsyncRolloutConfig.{name} must be a positive int, got {value!r}.")
        if isinstance(self.max_staleness, bool) or not isinstance(self.max_staleness, int) or self.max_staleness < 0:
            raise AsyncRolloutConfigError(
                f"AsyncRolloutConfig.max_staleness must be an int >= 0 (0: on-policy), got {self.max_staleness!r}."
            )
        try:
            self.on_stale = OnStale(self.on_stale)
        except ValueError:
            raise AsyncRolloutConfigError(f"AsyncRolloutConfig.on_stale must be 'drop' or 'regenerate', got {self.on_stale!r}.") from None
        try:
            self.on_update = OnUpdate(self.on_update)
        except ValueError:
            raise AsyncRolloutConfigError(f"AsyncRolloutConfig.on_update must be 'interrupt' or 'drain', got {self.on_update!r}.") from None


class _Signal:
    """Wakes every coroutine waiting for the engine's state to change.

    No lock: the engine's state changes only between awaits on one event loop. A lock (``asyncio.Condition``)
    made the trainer queue behind the producer after an update, so a new batch's env resets and prompt
    encodings ran before the trainer took the episodes already waiting for it.
    """

    def __init__(self) -> None:
        self._waiters: list[asyncio.Future] = []

    async def wait_until(self, predicate: Any) -> None:
        while not predicate():
            waiter = asyncio.get_running_loop().create_future()
            self._waiters.append(waiter)
            await waiter

    def notify(self) -> None:
        waiters, self._waiters = self._waiters, []
        for waiter in waiters:
            if not waiter.done():
                waiter.set_result(None)


class AsyncEpisodeEngine:
    """Plays episodes continuously with a versioned policy and hands the trainer batches within a staleness bound.

    See the module docstring for the schedule. Use it as an async context manager (or call :meth:`start`
    and :meth:`aclose`). An engine closed can be started again: the episodes :meth:`aclose` cancelled before their
    end (counted in ``episodes_cancelled``) are played first then, their seeds in the order they started, so no seed
    is lost. Each episode's env is closed when the episode ends, never under a step still running in an env pool
    thread (as :func:`~gem_core.rollout.runner.run_episodes` does); an env whose ``close`` raises is counted
    (``env_close_errors``) and logged, and ends neither its episode nor the run.

    The policy's version may change through :meth:`update_policy` or the :class:`VersionedPolicy` itself
    (:meth:`VersionedPolicy.update`): the engine hears both.

    Args:
        env_fn: a registered env id (each episode's env is made by :func:`gem_core.placement.make_env`) or
            a function returning a new env.
        policy: a :class:`VersionedPolicy`, or any policy (wrapped in one at version 0).
        tokenizer: the policy's tokenizer.
        seeds: one episode per seed, in order (may be endless, e.g. ``itertools.count()``).
        config: the schedule (:class:`AsyncRolloutConfig`).
        sampling: how each turn is sampled.
        session_kwargs: passed to :class:`EpisodeSession` (``max_turns``, ``max_total_tokens``, ...).

    Raises:
        InvalidArgument: the policy is (or wraps) a :class:`~gem_core.rollout.policy.BatchingPolicy` built with
            ``num_episodes``: its rounds wait for a fixed set of live episodes, and the engine's stream.
    """

    def __init__(
        self,
        env_fn: EnvFactory,
        policy: VersionedPolicy | Policy,
        tokenizer: Tokenizer,
        seeds: Iterable[int],
        config: AsyncRolloutConfig | None = None,
        *,
        sampling: SamplingParams | None = None,
        **session_kwargs: Any,
    ):
        batching = episode_counting_batcher(policy)
        if batching is not None:
            raise InvalidArgument(
                f"AsyncEpisodeEngine got a {type(batching).__name__} built with num_episodes={batching.live}: its rounds wait "
                "for that many live episodes, but the engine streams episodes (max_in_flight at a time, new ones as others "
                "end), so the first round would wait for ever. Build it with num_episodes=None (a round at every event-loop tick)."
            )
        self.config = config or AsyncRolloutConfig()
        self.policy = policy if isinstance(policy, VersionedPolicy) else VersionedPolicy(policy)
        self.tokenizer = tokenizer
        if isinstance(env_fn, str):
            from gem_core import placement

            env_id = env_fn
            session_kwargs.setdefault("env_id", env_id)
            self._make_env = lambda: placement.make_env(env_id)
        else:
            self._make_env = env_fn
        if session_kwargs.get("chat_template") is None:  # probed once for every episode
            session_kwargs["chat_template"] = ChatTemplate.for_tokenizer(
                tokenizer, system_prompt=session_kwargs.pop("system_prompt", None),
                chat_template_kwargs=session_kwargs.pop("chat_template_kwargs", None),
            )
        self._session_kwargs = session_kwargs
        self._sampling = sampling
        self._seeds = iter(seeds)
        self._retry: deque[int | None] = deque()  # seeds to play again (on_stale="regenerate")
        self._ready: list[tuple[int, TokenTrajectory]] = []  # (oldest version, episode), in finishing order
        self._tasks: dict[asyncio.Task, int | None] = {}  # running episodes and their seeds, in starting order
        self._stop_listening: Callable[[], None] | None = None
        self._producer: asyncio.Task | None = None
        self._changed: _Signal | None = None
        self._error: BaseException | None = None
        self._closed = False  # aclose() ran: a batch asked for then (or waiting then) would never come
        self._exhausted = False  # the seeds ran out
        self._failed_starts = 0  # episodes in a row whose env could not start
        self._base_version = self.policy.version
        self._running = 0
        self._kept = 0  # finished and not dropped: waiting in _ready or handed to the trainer
        self._batches = 0
        self._last_staleness: list[int] = []
        self.counts = {
            "episodes_started": 0, "episodes_finished": 0, "episodes_handed": 0,
            "dropped_stale": 0, "regenerated_stale": 0, "stopped_stale_in_flight": 0, "env_start_errors": 0,
            "episodes_cancelled": 0, "env_close_errors": 0,
        }
        """Running totals; :meth:`metrics` reports them with the version and the last batch's staleness."""

    # -- lifecycle ------------------------------------------------------------------------------

    async def start(self) -> AsyncEpisodeEngine:
        """Start playing episodes (on the running event loop)."""
        if self._producer is None:
            self._closed = False
            self._changed = _Signal()
            # An update made on the policy itself (VersionedPolicy.update) changes admission and the bound too.
            self._stop_listening = self.policy.on_update(self._changed.notify)
            self._producer = asyncio.create_task(self._produce())
        return self

    async def aclose(self) -> None:
        """Stop every episode (their envs are closed) and the producer; a :meth:`next_batch` waiting now, or
        called later, raises :class:`AsyncRolloutOrderError` rather than waiting for episodes that will not come.

        The seeds of the episodes cancelled before their end go back to the front of the retry queue, in the order
        they started, so a :meth:`start` after this plays them first.
        """
        self._closed = True
        if self._changed is not None:
            self._changed.notify()
        if self._stop_listening is not None:
            self._stop_listening()
            self._stop_listening = None
        tasks = [t for t in (self._producer, *self._tasks) if t is not None]
        for task in tasks:
            task.cancel()
        try:
            await asyncio.gather(*tasks, return_exceptions=True)
        finally:
            self._producer = None
            # An episode that ended by itself took itself out of _tasks; the ones left were cancelled mid-start,
            # mid-turn or before they first ran (then their own `finally` never ran).
            cancelled = [(task, seed) for task, seed in self._tasks.items() if task.done()]
            for task, _ in cancelled:
                del self._tasks[task]
            self._running -= len(cancelled)
            self.counts["episodes_cancelled"] += len(cancelled)
            self._retry.extendleft(reversed([seed for _, seed in cancelled]))

    async def __aenter__(self) -> AsyncEpisodeEngine:
        return await self.start()

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    # -- trainer side ---------------------------------------------------------------------------

    @property
    def version(self) -> int:
        """The policy's current version."""
        return self.policy.version

    def staleness(self, trajectory: TokenTrajectory) -> int:
        """How many versions ``trajectory``'s oldest token lags the current version (0 without sampled tokens)."""
        oldest = trajectory.oldest_version
        return 0 if oldest is None else self.version - oldest

    async def next_batch(self) -> list[TokenTrajectory]:
        """The next ``batch_size`` finished episodes within the staleness bound, the oldest first (then in
        finishing order); the episodes past the bound are dropped or regenerated here.

        Fewer (possibly none) only when the seeds have run out.

        Each episode is checked against the bound when the batch is handed over: an update while the batch
        fills (a trainer that asks for it before its training step ends) can make an episode taken earlier too old,
        and it is then dropped or regenerated, and another taken in its place.

        Raises:
            AsyncRolloutOrderError: the engine was not started, was closed (:meth:`aclose`, also while this
                waited), or more batches were taken than the bound allows without an update in between (call
                :meth:`update_policy` after each training step).
            Exception: what an episode raised (a policy error), re-raised here.

        A call that is cancelled (``asyncio.wait_for``) or raises hands nothing and loses nothing: the episodes it
        had taken are handed by the next call.
        """
        if self._changed is None:
            raise AsyncRolloutOrderError("Start the engine first: `async with AsyncEpisodeEngine(...) as engine:` or `await engine.start()`.")
        self._check_open()
        size, bound = self.config.batch_size, self.config.max_staleness
        if self._batches >= self._updates + bound + 1:
            raise AsyncRolloutOrderError(
                f"next_batch() called {self._batches + 1} times with {self._updates} policy updates: max_staleness={bound} "
                "lets the trainer run at most that many batches ahead. Call update_policy() after each training step."
            )
        taken: list[tuple[int, TokenTrajectory]] = []
        try:
            while True:
                # Against the version now, not when taken: an update while the batch filled may have made some too old.
                taken = self._within_bound(taken, self.version)
                if len(taken) >= size:
                    break
                await self._changed.wait_until(lambda: bool(self._ready) or self._error is not None or self._finished_all or self._closed)
                if self._error is not None:
                    raise self._error
                self._check_open()
                if not self._ready:  # the seeds ran out, unless one taken is now too old and regenerated
                    taken = self._within_bound(taken, self.version)
                    if self._finished_all:
                        break
                    continue
                fresh = self._within_bound(self._ready, self.version)
                # Oldest first (a stable sort keeps finishing order among equals): the episodes nearest the
                # bound are handed now rather than dropped at the next batch.
                fresh.sort(key=lambda item: item[0])
                taken, self._ready = taken + fresh[: size - len(taken)], fresh[size - len(taken) :]
        except BaseException:
            # Cancelled (asyncio.wait_for, a task group) or failed while the batch filled: the episodes taken go back,
            # still counted in _kept, so the next call hands them; lost, they held admission closed for ever.
            self._ready[:0] = taken
            self._changed.notify()
            raise
        self._batches += 1
        # The next batch is handed under a newer version: what is too old for it goes now, so its
        # replacement plays while the trainer trains instead of after the update.
        self._ready = self._within_bound(self._ready, self._handout_version)
        self.counts["episodes_handed"] += len(taken)
        self._last_staleness = [self.version - oldest for oldest, _ in taken]  # as handed
        return [trajectory for _, trajectory in taken]

    async def update_policy(self, apply: WeightUpdate | None = None) -> int:
        """Load new weights (``apply``, see :meth:`VersionedPolicy.update`) and move to the next version.

        In-flight generations are aborted and resampled (``on_update="interrupt"``) or awaited
        (``"drain"``). Returns the new version.
        """
        return await self.policy.update(apply, interrupt=self.config.on_update is OnUpdate.INTERRUPT)

    def metrics(self, prefix: str = "gem/async/") -> dict[str, float]:
        """Counts so far, the version, generations aborted by updates, and the staleness of the last batch."""
        values = {name: float(value) for name, value in self.counts.items()}
        values["version"] = float(self.version)
        values["generations_interrupted"] = float(self.policy.interrupted)
        values["in_flight"] = float(self._running)
        if self._last_staleness:
            values["staleness_mean"] = sum(self._last_staleness) / len(self._last_staleness)
            values["staleness_max"] = float(max(self._last_staleness))
        return {f"{prefix}{key}": value for key, value in values.items()}

    # -- episodes -------------------------------------------------------------------------------

    @property
    def _updates(self) -> int:
        return self.version - self._base_version

    @property
    def _handout_version(self) -> int:
        """The version the next batch will be handed under: this one, or (once a batch has been handed since
        the last update, the usual cadence of one batch per update) at least the next."""
        return self.version + (1 if self._batches > self._updates else 0)

    def _check_open(self) -> None:
        """Raise if :meth:`aclose` ran: its episodes were cancelled, so a batch would be waited for for ever."""
        if self._closed:
            raise AsyncRolloutOrderError(
                "The engine is closed (aclose() ran, or its `async with` block ended): its episodes were stopped, so no batch "
                "will come. Ask for batches inside the `async with AsyncEpisodeEngine(...)` block, or call start() again."
            )

    def _within_bound(self, episodes: list[tuple[int, TokenTrajectory]], at_version: int) -> list[tuple[int, TokenTrajectory]]:
        """The finished ``episodes`` (oldest version, episode) still within the bound at ``at_version``; the others
        are dropped or regenerated."""
        fresh = []
        for oldest, trajectory in episodes:
            if at_version - oldest > self.config.max_staleness:
                self._kept -= 1
                self._discard(trajectory.seed)
            else:
                fresh.append((oldest, trajectory))
        return fresh

    @property
    def _finished_all(self) -> bool:
        return self._exhausted and not self._retry and self._running == 0

    def _may_start(self) -> bool:
        """Admission: room in flight, and no episode beyond what the trainer can take within the bound."""
        if self._error is not None or (self._exhausted and not self._retry):
            return False
        allowed = (self._updates + self.config.max_staleness + 1) * self.config.batch_size
        return self._running < self.config.max_in_flight and self._kept + self._running < allowed

    def _discard(self, seed: int | None) -> None:
        """A too-old episode: count it, and play its seed again if the config says so."""
        if self.config.on_stale is OnStale.REGENERATE:
            self.counts["regenerated_stale"] += 1
            self._retry.append(seed)
        else:
            self.counts["dropped_stale"] += 1
        if self._changed is not None:  # set by start(), before any episode runs
            self._changed.notify()

    def _next_seed(self) -> tuple[bool, int | None]:
        if self._retry:
            return True, self._retry.popleft()
        try:
            return True, next(self._seeds)
        except StopIteration:
            self._exhausted = True
            return False, None
        except Exception as error:  # noqa: BLE001 - a seed source that fails (a dataset reader): next_batch raises it
            self._error = error
            return False, None

    async def _produce(self) -> None:
        assert self._changed is not None
        while True:
            await self._changed.wait_until(self._may_start)
            found, seed = self._next_seed()
            if not found:
                self._changed.notify()  # a trainer waiting on the last batch sees the end
                continue
            self._running += 1
            self.counts["episodes_started"] += 1
            self._tasks[asyncio.create_task(self._episode(seed))] = seed

    async def _episode(self, seed: int | None) -> None:
        assert self._changed is not None
        trajectory: TokenTrajectory | None = None
        stale = cancelled = False
        try:
            env = self._new_env(seed)
            if env is not None:
                async with self._closing(env, seed):
                    try:
                        session = await self._start_session(env, seed)
                        if session is not None:
                            trajectory = await self._play(session)
                            stale = trajectory is None
                    except asyncio.CancelledError:
                        cancelled = self._closed  # by aclose: it puts the seed back and counts the episode
                        raise
        except asyncio.CancelledError:
            raise
        except Exception as error:  # noqa: BLE001 - a policy error: the trainer hears it at next_batch
            if self._error is None:  # the first: an episode starting beside it may fail the same way a moment later
                self._error = error
        finally:
            if not cancelled:
                task = asyncio.current_task()
                if task is not None:
                    self._tasks.pop(task, None)
                self._running -= 1
                if stale:
                    self.counts["stopped_stale_in_flight"] += 1
                    self._discard(seed)
                elif trajectory is not None:
                    oldest = trajectory.oldest_version
                    self._ready.append((self.version if oldest is None else oldest, trajectory))
                    self._kept += 1
                    self.counts["episodes_finished"] += 1
            self._changed.notify()

    def _new_env(self, seed: int | None) -> Any:
        """The episode's env; None when it could not be made (counted as a failed start, see :meth:`_start_session`)."""
        try:
            return self._make_env()
        except Exception as error:  # noqa: BLE001 - counted, and the run stopped if every env fails
            self._failed_start(seed, error)
            return None

    @contextlib.asynccontextmanager
    async def _closing(self, env: Any, seed: int | None) -> AsyncIterator[None]:
        """Close ``env`` when the block ends, however it ends (a bad option, a failed reset, a cancel by aclose while a
        sandbox boots), as run_episodes does: never under a call a pool thread still runs.

        A close that raises is one env's teardown gone wrong, not the run's: counted (``env_close_errors``) and logged
        once, and what the block did (its episode, a start error, a cancel) stands.
        """
        raised: BaseException | None = None
        close_error: Exception | None = None
        try:
            async with _closed_when_idle(env):
                try:
                    yield
                except BaseException as error:
                    raised = error
                    raise
        except Exception as error:  # noqa: BLE001 - the close's own error (the block's is re-raised just below)
            if error is raised:
                raise
            close_error = error
        if close_error is not None:
            self.counts["env_close_errors"] += 1
            warn_once(logger, ("env-close-error", type(close_error)), "An episode's env failed to close (seed %r); the episode "
                      "stands and the error is counted in metrics()['gem/async/env_close_errors'] (later ones are not logged): "
                      "%s: %s", seed, type(close_error).__name__, close_error)
        if raised is not None:
            raise raised

    async def _start_session(self, env: Any, seed: int | None) -> EpisodeSession | None:
        """The episode's session on ``env``, started; None when its env could not be reset.

        Such an episode is a bad row (a file it names is gone): it is counted (``env_start_errors``), logged once,
        and dropped, and the run goes on, as an env that raises in a step ends only its episode. When a whole batch
        of episodes in a row (at least :data:`MIN_FAILED_STARTS`) fails so, the env itself is broken, and the run
        ends with :class:`EnvStartError`. The caller closes ``env``, whatever ends its start.
        """
        session = EpisodeSession(env, self.tokenizer, **self._session_kwargs)
        try:
            await session.start(seed=seed)
        except Exception as error:  # noqa: BLE001 - counted, and the run stopped if every env fails
            self._failed_start(seed, error)
            return None
        self._failed_starts = 0
        return session

    def _failed_start(self, seed: int | None, error: Exception) -> None:
        """Count an episode whose env failed to start; raises :class:`EnvStartError` once a batch's worth failed in a row."""
        self.counts["env_start_errors"] += 1
        self._failed_starts += 1
        if self._failed_starts >= max(self.config.batch_size, MIN_FAILED_STARTS):
            raise EnvStartError(
                f"The env failed to start {self._failed_starts} episodes in a row (a whole batch, or {MIN_FAILED_STARTS}), the last with seed {seed!r}: "
                f"{type(error).__name__}: {error}. Check the env and its config; a single bad row is skipped."
            ) from error
        warn_once(logger, ("env-start-error", type(error)), "An episode's env failed to start (seed %r); the episode is dropped and "
                  "counted in metrics()['gem/async/env_start_errors'] (later ones are not logged): %s: %s", seed, type(error).__name__, error)

    async def _play(self, session: EpisodeSession) -> TokenTrajectory | None:
        """One episode, one turn at a time; None when it stopped early, its oldest token past the bound.

        The bound is checked before every turn, an interrupted one too (``_play`` returns at a weight update rather
        than asking again itself), so an episode the update made too old is never stepped again (a tool call's side
        effects). The states a backend kept for the episode are released however it ends: finished, stopped, failed
        or cancelled (``_TurnState`` carries their key from one turn's call to the next).
        """
        sampling = _with_stop_tokens(session, self._sampling)
        state = _TurnState()
        try:
            while not session.done:
                oldest = session.oldest_version
                if oldest is not None and self._handout_version - oldest > self.config.max_staleness:
                    return None
                await _play(session, self.policy, sampling, until_turn=session.num_turns + 1, state=state)
            return session.trajectory()
        finally:
            state.release(self.policy)  # a no-op once _play released them (the episode finished, or its turn raised)
