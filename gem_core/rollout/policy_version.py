"""A policy with a version number, so every sampled token says which weights produced it.

Off-policy (asynchronous) training samples with weights that are some updates behind the trainer's.
Its corrections (importance weights, a staleness bound) need, per token, the version of the policy
that sampled it. :class:`VersionedPolicy` wraps any :class:`~gem_core.rollout.policy.Policy` and owns
the version: tokens are tagged with the version in force when their generation started
(``Generation.versions``), and :meth:`VersionedPolicy.update` is the only way the version changes,
so no tag can be wrong:

- ``update(apply, interrupt=False)`` (drain) stops new generations, waits until the in-flight ones end,
  runs ``apply`` (load the new weights into the backend), bumps the version and lets generations go on;
- ``update(apply, interrupt=True)`` aborts the in-flight generations instead; each of their callers gets
  :class:`GenerationInterrupted` and asks again from the same context, then sampled by the new weights.
  The episode loop (:func:`gem_core.rollout.runner.run_episode`) does exactly that: the env has not been
  stepped for an aborted turn, so it is stepped once per action, with the action the new policy sampled.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Awaitable, Callable
from typing import Any

from gem_core.errors import GemError, InvalidArgument
from gem_core.rollout.policy import BatchingPolicy, Generation, Policy, SamplingParams

__all__ = ["GenerationInterrupted", "UpdateInProgress", "VersionedPolicy", "WeightUpdate"]

WeightUpdate = Callable[[], Awaitable[Any] | Any]
"""What :meth:`VersionedPolicy.update` runs while no generation is in flight: loads the new weights
into the backend (sync or async; its return value is ignored).
"""


class GenerationInterrupted(GemError):
    """A generation was aborted by :meth:`VersionedPolicy.update` (``interrupt=True``); ask again.

    The episode loop catches it and resamples the turn; only code that calls ``generate`` itself sees it.

    Args:
        version: the policy version the aborted generation ran under (the update installed a later one).
    """

    def __init__(self, version: int):
        super().__init__(f"generation under policy version {version} was aborted by a weight update; generate again")
        self.version = version


class UpdateInProgress(GemError, RuntimeError):
    """:meth:`VersionedPolicy.update` was called while another update of the same policy was running."""


class VersionedPolicy:
    """A :class:`~gem_core.rollout.policy.Policy` that tags each sampled token with its version.

    Args:
        policy: the backend that samples (any :class:`~gem_core.rollout.policy.Policy`).
        version: the version of the weights it holds now.

    Other attributes (``accepts_images``, ``episode_finished``, ...) are the wrapped policy's.

    Example:
        >>> import asyncio
        >>> from gem_core.rollout.policy import Generation, SamplingParams
        >>> class Echo:
        ...     async def generate(self, prompt_ids, sampling):
        ...         return Generation(token_ids=[7, 8], logprobs=None, finish_reason="stop")
        >>> policy = VersionedPolicy(Echo(), version=3)
        >>> asyncio.run(policy.generate([1], SamplingParams())).versions
        [3, 3]

    Raises:
        InvalidArgument: if ``version`` is not a non-negative int.
    """

    def __init__(self, policy: Policy, *, version: int = 0):
        if isinstance(version, bool) or not isinstance(version, int) or version < 0:
            raise InvalidArgument(f"version must be a non-negative int, got {version!r}.")
        self.policy = policy
        self.version = version
        self.interrupted = 0
        """How many generations :meth:`update` aborted so far."""
        self._open: asyncio.Event | None = None  # made on first use, on the loop that uses it
        self._open_loop: asyncio.AbstractEventLoop | None = None
        self._in_flight: set[asyncio.Task] = set()
        self._aborted: set[asyncio.Task] = set()
        self._updating = False
        self._listeners: list[Callable[[], object]] = []

    def __getattr__(self, name: str) -> Any:
        if name == "policy":  # not set yet (copy, unpickling): no recursion
            raise AttributeError(name)
        return getattr(self.policy, name)

    def on_update(self, listener: Callable[[], object]) -> Callable[[], None]:
        """Call ``listener()`` after each :meth:`update` (on the event loop, once the new version is in), so code that
        waits for a version (:class:`~gem_core.rollout.async_engine.AsyncEpisodeEngine`) hears of an update whoever
        makes it. Returns the call that stops it (safe to call twice)."""
        self._listeners.append(listener)

        def stop() -> None:
            if listener in self._listeners:
                self._listeners.remove(listener)

        return stop

    @property
    def in_flight(self) -> int:
        """Generations running now."""
        return len(self._in_flight)

    def _gate(self) -> asyncio.Event:
        # An asyncio.Event belongs to the loop it first waited on: a policy kept across asyncio.run calls
        # (one per eval, say) gets a gate of the running loop's own, open unless an update holds it shut.
        loop = asyncio.get_running_loop()
        if self._open is None or self._open_loop is not loop:
            was_open = self._open is None or self._open.is_set()
            self._open, self._open_loop = asyncio.Event(), loop
            if was_open:
                self._open.set()
        return self._open

    async def generate(self, prompt_ids: list[int], sampling: SamplingParams, **kwargs: Any) -> Generation:
        """Sample one turn with the current weights; ``Generation.versions`` says which (one per token).

        Waits while an :meth:`update` is under way.

        Raises:
            GenerationInterrupted: an ``update(interrupt=True)`` aborted this generation.
        """
        gate = self._gate()
        release = None
        if not gate.is_set():
            release = self._held_at_gate()
            try:
                while not gate.is_set():
                    await gate.wait()
            except BaseException:
                release()
                raise
        version = self.version
        if release is None:
            task = asyncio.ensure_future(self.policy.generate(prompt_ids, sampling, **kwargs))
        else:
            task = asyncio.ensure_future(self._released_then_generate(release, prompt_ids, sampling, kwargs))
        self._in_flight.add(task)
        try:
            await asyncio.wait({task})
        except asyncio.CancelledError:  # our caller was cancelled: so is its generation
            task.cancel()
            raise
        finally:
            self._in_flight.discard(task)
            if release is not None:
                release()  # (done already, unless the task was cancelled before it started)
        aborted = task in self._aborted
        self._aborted.discard(task)
        if aborted and (task.cancelled() or task.result().finish_reason == "abort"):
            raise GenerationInterrupted(version)
        generation = task.result()  # a finished generation (even one the update came too late to abort) stands
        if generation.versions is not None:  # the backend knows better (weights swapped mid-generation)
            return generation
        return Generation(
            token_ids=generation.token_ids,
            logprobs=generation.logprobs,
            finish_reason=generation.finish_reason,
            versions=[version] * len(generation.token_ids),
        )

    def _held_at_gate(self) -> Callable[[], None]:
        """Tell a batching backend that waits for every live episode (``num_episodes``) not to wait for this one while
        the gate holds it: its round counted on this episode, and the update waits for that round (a drain deadlocked).
        Returns the call that ends the hold, once, however often it is called."""
        hold, release = getattr(self.policy, "episodes_held", None), getattr(self.policy, "episodes_released", None)
        if not (callable(hold) and callable(release)):
            return lambda: None
        hold(1)
        held = [True]

        def released() -> None:
            if held[0]:
                held[0] = False
                release(1)

        return released

    async def _released_then_generate(self, release: Callable[[], None], prompt_ids: list[int], sampling: SamplingParams,
                                      kwargs: dict[str, Any]) -> Generation:
        # The hold ends in the same step as the request joins the backend's pending ones: no round starts between.
        release()
        return await self.policy.generate(prompt_ids, sampling, **kwargs)

    async def update(self, apply: WeightUpdate | None = None, *, interrupt: bool = False) -> int:
        """Move to the next version: no generation runs while ``apply`` loads the new weights.

        Args:
            apply: loads the new weights into the backend (sync or async); None when the caller swaps
                them itself (e.g. the backend is told elsewhere).
            interrupt: abort the in-flight generations (their callers get :class:`GenerationInterrupted`
                and ask again) instead of waiting for them to end. Aborting cancels the awaiting
                coroutines; a backend that samples in a thread (:class:`~gem_core.rollout.policy.TransformersPolicy`)
                may still be finishing that batch, so its ``apply`` must wait for it (hold the policy's
                sampling lock) before touching the weights; vLLM-style servers abort requests themselves.

        Returns:
            The new version.

        Raises:
            UpdateInProgress: another update is under way.
        """
        if self._updating:
            raise UpdateInProgress("VersionedPolicy.update is already running; await it before starting the next.")
        self._updating = True
        gate = self._gate()
        gate.clear()
        try:
            running = set(self._in_flight)
            if interrupt:
                for task in running:
                    if not task.done():
                        self._aborted.add(task)
                        task.cancel()
                        self.interrupted += 1
            if running:
                await asyncio.wait(running)
            if apply is not None:
                result = apply()
                if inspect.isawaitable(result):
                    await result
            invalidate = getattr(self.policy, "invalidate_caches", None)
            if callable(invalidate):  # states a backend kept (KV caches) were computed by the old weights
                invalidate()
            self.version += 1
        finally:
            self._updating = False
            gate.set()
        for listener in list(self._listeners):
            listener()
        return self.version


def episode_counting_batcher(policy: Any) -> BatchingPolicy | None:
    """The :class:`BatchingPolicy` under ``policy`` (itself, or what a :class:`VersionedPolicy` wraps) if it was built
    with ``num_episodes``, else None. Such a policy's rounds wait until each of a fixed set of live episodes asks for a
    turn, so a caller whose episodes do not all ask (a seat waiting for another's move) or that streams episodes without
    reporting their ends refuses it."""
    batching = policy.policy if isinstance(policy, VersionedPolicy) else policy
    return batching if isinstance(batching, BatchingPolicy) and batching.live is not None else None
