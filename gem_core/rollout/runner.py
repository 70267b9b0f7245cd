"""Drive mode: the core runs the episode loop and asks a :class:`Policy` for each turn's tokens.

:func:`run_episode` is a loop over :class:`~gem_core.rollout.session.EpisodeSession` (the same object
driven-mode frameworks call), so both modes give identical trajectories. :func:`run_episodes` runs many
episodes concurrently on one event loop: while one episode waits for its env (a tool call, a grader)
or its policy call, the others proceed; ``concurrency`` bounds how many are in flight.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import dataclasses
import inspect
import logging
import math
import numbers
import operator
import threading
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Sequence
from typing import Any, TypeVar

from gem_core.env import ENV_THREADS
from gem_core.errors import DependencyNotInstalled, GemError, InvalidArgument, InvalidArgumentType
from gem_core.protocols import Tokenizer
from gem_core.rollout.chat_template import ChatTemplate
from gem_core.rollout.options import EpisodeOptions, episode_options
from gem_core.rollout.policy import Generation, ImagePolicy, Policy, SamplingParams, default_stop_token_ids
from gem_core.rollout.policy_version import GenerationInterrupted
from gem_core.rollout.session import EpisodeSession
from gem_core.rollout.trajectory import TokenTrajectory

__all__ = ["EnvFactory", "EpisodeArgumentError", "run_episode", "run_episodes", "run_session", "run_branched_episode"]

EnvFactory = str | Callable[[], Any]
"""What :func:`run_episodes` builds envs from: a registered env id, or a function returning a new env."""

logger = logging.getLogger("gem.rollout")


async def run_episode(
    env: Any,
    policy: Policy,
    tokenizer: Tokenizer,
    *,
    seed: int | None = None,
    options: EpisodeOptions | None = None,
    max_turns: int | None = None,
    max_total_tokens: int | None = None,
    max_response_tokens: int | None = None,
    sampling: SamplingParams | None = None,
    system_prompt: str | None = None,
    chat_template: ChatTemplate | None = None,
    env_id: str | None = None,
    history: str = "as_sampled",
    chat_template_kwargs: dict | None = None,
    record_env_states: bool = False,
) -> TokenTrajectory:
    """Play one episode of ``env`` with ``policy`` and return its token trajectory.

    Each turn the policy gets the context ids and ``sampling`` with ``max_new_tokens`` lowered to what
    ``max_total_tokens`` leaves, and ``stop_token_ids`` filled in (eos and end-of-turn) when None.
    The episode options go to :class:`EpisodeSession`: ``options=EpisodeOptions(...)``, or the same
    options as keywords (``max_turns``, ``max_total_tokens``, ``max_response_tokens``, ``system_prompt``,
    ``history``, ``chat_template_kwargs``, ``record_env_states``; e.g. Qwen3 with
    ``chat_template_kwargs={"enable_thinking": False}``), not both.
    """
    session = EpisodeSession(
        env,
        tokenizer,
        options=options,
        chat_template=chat_template,
        system_prompt=system_prompt,
        max_turns=max_turns,
        max_total_tokens=max_total_tokens,
        max_response_tokens=max_response_tokens,
        env_id=env_id,
        history=history,
        chat_template_kwargs=chat_template_kwargs,
        record_env_states=record_env_states,
    )
    return await run_session(session, policy, seed=seed, sampling=sampling)


async def run_session(
    session: EpisodeSession, policy: Policy, *, seed: int | None = None, sampling: SamplingParams | None = None
) -> TokenTrajectory:
    """Play the episode of a built session (e.g. :meth:`EpisodeSession.from_label`) with ``policy``.

    The loop of :func:`run_episode`, for adapters that receive dataset rows rather than envs.
    """
    sampling = _with_stop_tokens(session, sampling)
    await session.start(seed=seed)
    await _play(session, policy, sampling)
    return session.trajectory()


def _with_stop_tokens(session: EpisodeSession, sampling: SamplingParams | None) -> SamplingParams:
    sampling = sampling or SamplingParams()
    if sampling.stop_token_ids is None:
        stop = default_stop_token_ids(session.tokenizer, session.chat_template)
        sampling = dataclasses.replace(sampling, stop_token_ids=stop)
    return sampling


@dataclasses.dataclass
class _TurnState:
    """What a caller that plays one turn per :func:`_play` call (:class:`~gem_core.rollout.async_engine.AsyncEpisodeEngine`)
    keeps between the calls, so the episode's kept states are released however it ends and an interrupt that no
    update caused is still recognised."""

    last: tuple[list[int], int, list[int]] | None = None
    """The last turn's prompt, its length then and its first sampled id (see :func:`_play`); None once released."""
    interrupted_at: int | None = None
    """The version the turn's last aborted generation ran under (:class:`GenerationInterrupted`); None after a turn."""

    def release(self, policy: Policy) -> None:
        """Free the states a backend kept for the episode (once: a second call does nothing)."""
        last, self.last = self.last, None
        _release(policy, last)


def _update_marks(policy: Policy) -> tuple[Any, Any]:
    """What a weight update of a :class:`~gem_core.rollout.policy_version.VersionedPolicy` moves: its version, and
    its count of aborted generations (which moves first: the new weights may still be loading when the aborted
    turn hears of it). ``(None, None)`` for a policy that shows neither."""
    return getattr(policy, "version", None), getattr(policy, "interrupted", None)


def _caused_by_update(policy: Policy, marks: tuple[Any, Any], error: GenerationInterrupted, state: _TurnState) -> bool:
    """Whether a weight update aborted the attempt begun at ``marks``, so the turn is asked for again.

    A policy that raises :class:`GenerationInterrupted` with no update (a backend's own bug) was asked again and
    again without the loop ever running anything else. An update shows in the policy's marks
    (:func:`_update_marks`); a policy that counts its aborted generations and shows no change had none aborted. For
    one that does not count them, the interrupt's own version must differ from the previous interrupt's of this
    turn (each update moves it), so a turn's first interrupt is asked again, and a repeated one is not.
    """
    now = _update_marks(policy)
    if now != marks:
        return True
    if type(now[1]) is int:
        return False
    version = getattr(error, "version", None)
    return state.interrupted_at is None or version != state.interrupted_at


async def _play(
    session: EpisodeSession, policy: Policy, sampling: SamplingParams, *, until_turn: int | None = None, state: _TurnState | None = None
) -> None:
    """Sample and step turns until the episode is done (or ``until_turn`` turns have been played).

    A turn whose generation a weight update aborted (:class:`GenerationInterrupted`) is asked for again
    from the same context: the env was not stepped for it, so it is stepped once, with what the new
    weights sampled. A :class:`GenerationInterrupted` that no update caused is the policy's error and is raised
    (asked again, it repeats for ever). A malformed generation raises, naming the policy (:func:`_sampled_ids`).

    ``state`` is given by a caller that plays one turn per call (the async engine): the episode's last prompt is kept
    in it between calls (so the kept states are released when the episode ends, :meth:`_TurnState.release`,
    however it ends), and an interrupted turn returns instead of being asked for again here, so the caller checks
    first whether the episode may still play (its staleness bound) before it asks for the same turn again.
    """
    # A policy that reads the prompt only until its turn is sampled is lent the session's own list, not a copy per turn.
    borrows = getattr(policy, "borrows_prompt_ids", False) is True
    vocab = getattr(policy, "vocab_size", None)
    vocab = vocab if type(vocab) is int and vocab > 0 else None
    per_turn = state is not None
    state = state if state is not None else _TurnState()
    # state.last: the last turn's prompt, its length then and its first sampled id: what the policy keeps states
    # under. Not the session's context: with history="as_rendered" that is the re-rendered conversation, which the
    # kept states never saw.
    try:
        while not session.done and (until_turn is None or session.num_turns < until_turn):
            turn_sampling = dataclasses.replace(sampling, max_new_tokens=session.generation_budget(sampling.max_new_tokens))
            # A policy that declares `accepts_images` gets the context's images beside the ids; others play blind.
            images = session.images if getattr(policy, "accepts_images", False) else None
            context = session.borrow_context_ids() if borrows else session.context_ids
            marks = _update_marks(policy)
            try:
                if images and isinstance(policy, ImagePolicy):  # images are only drawn for such a policy
                    generation = await policy.generate(context, turn_sampling, images=images)
                else:
                    generation = await policy.generate(context, turn_sampling)
            except GenerationInterrupted as error:
                if not _caused_by_update(policy, marks, error, state):
                    raise
                state.interrupted_at = getattr(error, "version", None)
                await asyncio.sleep(0)  # the update (and every other episode) runs before the turn is asked again
                if per_turn:
                    return
                continue
            state.interrupted_at = None
            ids = _sampled_ids(generation, policy, vocab, turn_sampling.max_new_tokens)
            # Before the step: a borrowed list is extended in place by it (a copy now would be one per turn).
            state.last = (context, len(context), list(ids[:1]))
            await session.step(ids, logprobs=generation.logprobs, finish_reason=generation.finish_reason, versions=generation.versions)
    except BaseException:
        state.release(policy)  # a failed or cancelled episode ends here too: its states would be held for good
        raise
    if session.done:  # not before a fork (run_branched_episode): the branches continue from these states
        state.release(policy)


_INTS = frozenset({int})


def _sampled_ids(generation: Any, policy: Policy, vocab: int | None, budget: int) -> list[int]:
    """The sampled ids of a well-formed generation (Python ints), or the error that names the policy.

    The policy's fault is raised, as the policy's own errors are: None or a tuple crashed far from the cause (a
    raw AttributeError), a negative id with a raw OverflowError, and bool ids, an id past the model's vocabulary,
    a NaN log-prob or a turn past its ``max_new_tokens`` were recorded for a trainer to choke on. An env's fault ends
    only its episode (``info["error"]``, counted as an env error); a policy's would repeat on every episode.
    ``vocab`` is the policy's declared ``vocab_size`` (None: ids are only checked to be at least 0; a model may
    have more rows than its tokenizer, and samplers draw them). A few passes over the turn's ids in C.
    """
    if not isinstance(generation, Generation):
        raise InvalidArgumentType(
            f"{type(policy).__name__}.generate returned a {type(generation).__name__}, not a Generation; return "
            "Generation(token_ids=..., logprobs=..., finish_reason=...)."
        )
    ids = generation.token_ids
    try:
        kinds = set(map(type, ids))
    except TypeError:
        raise InvalidArgumentType(
            f"{type(policy).__name__}.generate returned token_ids of type {type(ids).__name__}; return a list of ints."
        ) from None
    if not kinds <= _INTS:  # numpy or torch ints become ints; bools (operator.index takes True as 1), floats and text do not
        try:
            if bool in kinds:
                raise TypeError
            ids = list(map(operator.index, ids))
        except TypeError:
            raise InvalidArgumentType(
                f"{type(policy).__name__}.generate returned token ids of type {', '.join(sorted(k.__name__ for k in kinds))}; "
                "return the sampled ids as ints."
            ) from None
    if len(ids) > budget:
        raise InvalidArgument(
            f"{type(policy).__name__}.generate returned {len(ids)} token ids for a turn of max_new_tokens={budget}; a policy "
            "samples at most sampling.max_new_tokens ids."
        )
    if ids:
        low = min(ids)
        if low < 0 or (vocab is not None and max(ids) >= vocab):
            bound = "at least 0" if vocab is None else f"from 0 to {vocab - 1} (its vocab_size)"
            raise InvalidArgument(
                f"{type(policy).__name__}.generate returned token id {low if low < 0 else max(ids)}; the policy's ids are {bound}."
            )
    logprobs = generation.logprobs
    if logprobs is not None:
        try:
            total = sum(logprobs)  # a NaN or an infinity reaches the sum
        except TypeError:
            raise InvalidArgumentType(
                f"{type(policy).__name__}.generate returned log-probs that are not all numbers; return one float per token id."
            ) from None
        if not math.isfinite(total):
            first = next((x for x in logprobs if not math.isfinite(x)), total)
            raise InvalidArgument(
                f"{type(policy).__name__}.generate returned a log-prob of {first}; log-probs are finite (one NaN or "
                "infinity makes the importance ratios of the whole batch NaN)."
            )
    return ids


def _release(policy: Policy, last: tuple[list[int], int, list[int]] | None) -> None:
    """Let a backend that kept an episode's states free them, given the episode's last prompt and sampled id."""
    release = getattr(policy, "release_context", None)
    if last is not None and callable(release):
        context, length, first_sampled = last
        release(context[:length] + first_sampled)


async def run_branched_episode(
    env: Any,
    policy: Policy,
    tokenizer: Tokenizer,
    *,
    branch_turn: int,
    num_branches: int,
    seed: int | None = None,
    sampling: SamplingParams | None = None,
    **session_kwargs: Any,
) -> list[TokenTrajectory]:
    """A same-state turn group: play ``branch_turn`` turns once, then ``num_branches`` continuations
    from that very state (:meth:`EpisodeSession.fork`), played concurrently.

    The branches share the first ``branch_turn`` turns token for token and differ only after them, so
    their returns from the fork turn compare actions taken in one state
    (:func:`gem_core.rollout.advantages.same_state_advantages`). If the episode ends before
    ``branch_turn``, that one trajectory is returned. ``session_kwargs`` go to :class:`EpisodeSession`.

    Raises:
        InvalidArgument: if ``branch_turn`` is negative.
    """
    if branch_turn < 0:
        raise InvalidArgument(f"branch_turn must be >= 0, got {branch_turn}.")
    session = EpisodeSession(env, tokenizer, **session_kwargs)
    sampling = _with_stop_tokens(session, sampling)
    await session.start(seed=seed)
    await _play(session, policy, sampling, until_turn=branch_turn)
    if session.done:
        return [session.trajectory()]
    branches = session.fork(num_branches)
    # A branch's task that a cancel ends before its first step never reaches its own close; these are closed here.
    unstarted = {id(branch): branch for branch in branches}

    async def play(branch: EpisodeSession) -> TokenTrajectory:
        del unstarted[id(branch)]
        async with _closed_when_idle(branch.env):  # each branch's env is its own spawn: closed however its play ended
            await _play(branch, policy, sampling)
            return branch.trajectory()

    try:
        return await _all_or_none(play(branch) for branch in branches)
    finally:
        for branch in unstarted.values():
            await branch.aclose()


async def run_labels(
    labels: Sequence[Any],
    policy: Policy,
    tokenizer: Tokenizer,
    *,
    system_prompts: Sequence[str | None] | None = None,
    sampling: SamplingParams | None = None,
    **session_kwargs: Any,
) -> list[TokenTrajectory]:
    """Play one episode per label (the episode starts a framework hands over with a batch), all in flight
    at once; the trajectories in ``labels`` order.

    Each session is :meth:`EpisodeSession.from_label` with ``session_kwargs`` (so its env is placed by
    :mod:`gem_core.placement`; ``options=EpisodeOptions(...)`` among them, or the option keywords) and, where
    ``system_prompts`` gives one, that episode's system prompt (set on the options when given). A session is closed when its episode ends, and a batching policy is told then (``episode_finished``), so
    its rounds stop waiting for an episode that will ask for nothing more.

    Raises:
        InvalidArgument: if ``system_prompts`` does not hold one entry per label.
    """
    if system_prompts is not None and len(system_prompts) != len(labels):
        raise InvalidArgument(f"Got {len(system_prompts)} system prompts for {len(labels)} labels: give one system prompt per label, or None.")
    finished = getattr(policy, "episode_finished", None)

    options = session_kwargs.pop("options", None)

    started = [0]  # episodes whose task took its first step (its finally tells the policy; see _tell_unstarted)

    async def play(label: Any, system_prompt: str | None) -> TokenTrajectory:
        started[0] += 1
        if options is not None:  # this label's system prompt goes onto the options
            extra: dict[str, Any] = {"options": options if system_prompt is None else dataclasses.replace(options, system_prompt=system_prompt)}
        else:
            extra = {} if system_prompt is None else {"system_prompt": system_prompt}
        try:
            session = EpisodeSession.from_label(label, tokenizer, **extra, **session_kwargs)
            async with _closed_when_idle(session.env):
                return await run_session(session, policy, sampling=sampling)
        finally:  # a bad label too: the policy's rounds must not wait for an episode that never starts
            if finished is not None:
                finished()

    prompts = system_prompts if system_prompts is not None else [None] * len(labels)
    try:
        return await _all_or_none(play(label, prompt) for label, prompt in zip(labels, prompts, strict=True))
    finally:
        _tell_unstarted(finished, len(labels) - started[0])


async def run_episodes(
    env_fn: EnvFactory,
    policy: Policy,
    tokenizer: Tokenizer,
    seeds: Sequence[int],
    *,
    concurrency: int = 64,
    progress: bool = False,
    **run_episode_kwargs: Any,
) -> list[TokenTrajectory]:
    """Run one episode per seed, at most ``concurrency`` at a time; results are in ``seeds`` order.

    Args:
        env_fn: a registered env id (each episode's env is built by :func:`gem_core.placement.make_env`:
            here, or in a Ray actor with ``GEM_ENV_BACKEND=ray``) or a factory of new envs.
        policy: shared by all episodes (a batching backend sees concurrent ``generate`` calls).
        seeds: one episode per seed.
        concurrency: most episodes in flight at once. A batching policy built with ``num_episodes`` is told the
            episodes waiting for a slot are held back (:meth:`~gem_core.rollout.policy.BatchingPolicy.episodes_held`),
            so its rounds hold ``concurrency`` turns rather than waiting for episodes that cannot start.
        progress: show a progress bar (needs ``tqdm``).
        run_episode_kwargs: passed to :func:`run_episode` (``max_turns``, ``sampling``, ...).

    Raises:
        InvalidArgument: if ``concurrency`` is not a positive whole number, or a seed is one gymnasium refuses
            (not None or a whole number of at least 0): found before any episode starts, not at its reset.
    """
    if isinstance(concurrency, bool) or not isinstance(concurrency, numbers.Integral) or concurrency < 1:
        raise InvalidArgument(f"run_episodes: concurrency={concurrency!r} must be a positive whole number (episodes in flight).")
    seeds = list(seeds)
    for index, seed in enumerate(seeds):
        if seed is not None and (isinstance(seed, bool) or not isinstance(seed, numbers.Integral) or seed < 0):
            raise InvalidArgument(f"run_episodes: seeds[{index}]={seed!r} must be a whole number of at least 0, or None.")
        seeds[index] = None if seed is None else int(seed)  # gymnasium takes no numpy int
    _check_run_episode_kwargs(run_episode_kwargs)
    # The episode options are checked once here, before any env is built, and passed down as one object.
    keywords = {name: run_episode_kwargs.pop(name) for name in _OPTION_FIELDS if name in run_episode_kwargs}
    options = run_episode_kwargs["options"] = episode_options(run_episode_kwargs.get("options"), "run_episodes", **keywords)
    if isinstance(env_fn, str):
        from gem_core import placement

        env_id = env_fn
        run_episode_kwargs.setdefault("env_id", env_id)

        def factory() -> Any:
            return placement.make_env(env_id)
    else:
        factory = env_fn
    if run_episode_kwargs.get("chat_template") is None:
        # Probe the template once for the whole batch.
        run_episode_kwargs["chat_template"] = ChatTemplate.for_tokenizer(
            tokenizer,
            system_prompt=options.system_prompt,
            chat_template_kwargs=None if options.chat_template_kwargs is None else dict(options.chat_template_kwargs),
        )
    bar = _progress_bar(len(seeds)) if progress else None
    limit = asyncio.Semaphore(concurrency)
    finished = getattr(policy, "episode_finished", None)
    # A batching policy told num_episodes waits for every live episode's turn, and the episodes past `concurrency` wait
    # for a slot: it is told they are held back. As many as the slots leave: one that takes a freed slot counts as
    # running from the moment the slot is freed, so the next round waits for its first turn as it would without a bound.
    hold, release = getattr(policy, "episodes_held", None), getattr(policy, "episodes_released", None)
    held = [max(0, len(seeds) - concurrency) if callable(hold) and callable(release) else 0]
    if held[0]:
        hold(held[0])

    started = [0]  # episodes whose task took its first step (its finally tells the policy; see _tell_unstarted)

    async def one(seed: int) -> TokenTrajectory:
        started[0] += 1
        try:
            async with limit:
                env = factory()
                try:
                    async with _closed_when_idle(env):
                        return await run_episode(env, policy, tokenizer, seed=seed, **run_episode_kwargs)
                finally:
                    if bar is not None:
                        bar.update(1)
        finally:  # a batching policy's rounds must not wait for an episode that asks for nothing more
            if held[0]:  # held stays the unfinished episodes past `concurrency`: a waiting one takes this slot
                held[0] -= 1
                release(1)
            if finished is not None:
                finished()

    try:
        return await _all_or_none(one(s) for s in seeds)
    finally:
        if held[0]:  # episodes that never started (the run was cancelled first)
            release(held[0])
        _tell_unstarted(finished, len(seeds) - started[0])
        if bar is not None:
            bar.close()


_OPTION_FIELDS = tuple(f.name for f in dataclasses.fields(EpisodeOptions))

#: The longest a cancelled episode waits for its env's call still running in a pool thread (or the env's own
#: ``max_step_seconds``, if less) before it lets the cancel through and leaves the close to that call's end.
_CANCEL_WAIT_SECONDS = 30.0


@contextlib.asynccontextmanager
async def _closed_when_idle(env: Any) -> AsyncIterator[None]:
    """Close ``env`` when the block ends, however it ends, but never under a call of the block's that a pool thread
    still runs (:func:`_close_when_idle`): run_episodes, run_labels and each branch of run_branched_episode close
    their envs this one way.

    The calls are those started in the block and in tasks it creates; an env's call started elsewhere (its
    caller's) is not waited for.
    """
    with ENV_THREADS.watching() as threads:  # the env's calls in pool threads, which a cancel leaves running
        try:
            yield
        finally:
            await _close_when_idle(env, threads)


async def _close_when_idle(env: Any, threads: list[concurrent.futures.Future[Any]]) -> None:
    """Close ``env`` once no pool thread runs a call on it.

    A cancel stops the episode's await, not the thread running the env's step (nothing can): the env was closed
    under that step, which then ran on a closed env, and the runner returned with the thread still busy. So the
    close waits for such a call, up to the env's ``max_step_seconds`` (the longest it declares a step takes, at most
    :data:`_CANCEL_WAIT_SECONDS`); a call still running then, or a second cancel, ends the wait, and the call closes
    the env itself when it returns, never before.
    """
    running = [future for future in threads if not future.done()]
    if running:
        waits = [asyncio.wrap_future(future) for future in running]
        try:
            await asyncio.wait(waits, timeout=_wait_bound(env))
        except BaseException:  # cancelled again while waiting: the close is left to the calls' end
            _close_after(env, [future for future in running if not future.done()])
            raise
        finally:
            for wait in waits:  # a call that returns later must not post to this loop, which may be closed by then
                wait.cancel()
        running = [future for future in running if not future.done()]
        if running:
            _close_after(env, running)
            return
    env.close()


def _wait_bound(env: Any) -> float:
    declared = getattr(env, "max_step_seconds", None)
    if isinstance(declared, numbers.Real) and not isinstance(declared, bool) and 0 <= float(declared) < math.inf:
        return min(float(declared), _CANCEL_WAIT_SECONDS)
    return 1.0  # Env's default max_step_seconds


def _close_after(env: Any, running: list[concurrent.futures.Future[Any]]) -> None:
    """Close ``env`` in the thread of the last of ``running`` to return (at once if none runs)."""
    if not running:
        env.close()
        return
    left = [len(running)]
    lock = threading.Lock()

    def returned(_: concurrent.futures.Future[Any]) -> None:
        with lock:
            left[0] -= 1
            if left[0]:
                return
        try:
            env.close()
        except Exception as exc:  # noqa: BLE001 - no caller is left to hear it
            logger.warning("Closing %s after its call in an env thread returned failed: %s: %s", type(env).__name__, type(exc).__name__, exc)

    for future in running:
        future.add_done_callback(returned)


_T = TypeVar("_T")


def _tell_unstarted(finished: Callable[[], object] | None, count: int) -> None:
    """Tell a batching policy that ``count`` episodes will ask for nothing: a cancel that reaches a task before its first
    step ends it without running its ``finally``, and a policy built with ``num_episodes`` would count them live for good."""
    if finished is not None:
        for _ in range(count):
            finished()


async def _all_or_none(coroutines: Iterable[Awaitable[_T]]) -> list[_T]:
    """Await the coroutines together, results in order; the first to raise (or a cancel) ends the others first.

    ``asyncio.gather`` raises the first error and leaves the rest running: after a batch of episodes raised, its
    other episodes went on calling the policy with their envs open. (``asyncio.TaskGroup`` does this from
    Python 3.11; the package supports 3.10.)
    """
    tasks = [asyncio.ensure_future(c) for c in coroutines]
    try:
        return list(await asyncio.gather(*tasks))
    except BaseException:
        for task in tasks:
            # Not a task cancelled already: a cancel of this one reached them all, and gather raised at the first to
            # end, while the others still waited for their envs' steps (_close_when_idle); a second cancel cut that
            # wait short, and the envs were closed only after this returned. (Task.cancelling is Python 3.11's.)
            if not task.done() and not getattr(task, "cancelling", lambda: 0)():
                task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        raise


class EpisodeArgumentError(GemError, TypeError):
    """:func:`run_episodes` got a keyword :func:`run_episode` does not take (a sampling setting belongs in
    ``sampling=SamplingParams(...)``)."""


def _check_run_episode_kwargs(kwargs: dict[str, Any]) -> None:
    """Refuse, before any env is built, a keyword the episodes would each fail on; a sampling setting given
    beside ``sampling`` (``max_new_tokens=8``) is named with where it goes."""
    taken = set(inspect.signature(run_episode).parameters) - {"env", "policy", "tokenizer", "seed"}
    sampling_fields = {f.name for f in dataclasses.fields(SamplingParams)}
    for name, value in kwargs.items():
        if name in taken:
            continue
        if name in sampling_fields:
            raise EpisodeArgumentError(
                f"run_episodes got {name}={value!r}: it is a sampling setting, so it goes in SamplingParams: "
                f"run_episodes(..., sampling=SamplingParams({name}={value!r}))."
            )
        raise EpisodeArgumentError(
            f"run_episodes got an unexpected keyword {name!r}; it passes these on to run_episode: {', '.join(sorted(taken))} "
            "(sampling settings go in sampling=SamplingParams(...))."
        )


def _progress_bar(total: int) -> Any:
    try:
        from tqdm.auto import tqdm
    except ImportError as exc:  # pragma: no cover - tqdm ships with the dev and eval extras
        raise DependencyNotInstalled('progress=True needs tqdm: pip install tqdm (or pip install -e ".[eval]" in the GEM checkout)') from exc
    return tqdm(total=total, desc="episodes", unit="ep")
