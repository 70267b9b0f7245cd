"""The policy side of drive mode: token ids in, sampled token ids (and their log-probabilities) out.

The episode runner asks a :class:`Policy` for one assistant turn at a time. Anything that can sample
tokens sits behind this one protocol: verl's server manager, vLLM, SGLang, or a ``transformers`` model
(:class:`TransformersPolicy`, shipped here because it runs on a CPU in tests).

Backends that sample many prompts in one call (``model.generate``, vLLM) subclass :class:`BatchingPolicy`:
it gathers the concurrent turns of many episodes into batches and cuts each sample at its stop token
and budget, so every batching backend flushes and cuts the same way.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import math
import numbers
import operator
import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from gem_core.errors import InvalidArgument, UsageError
from gem_core.protocols import Tokenizer
from gem_core.rollout.kv_cache import PrefixKVCache
from gem_core.rollout.vision import text_tokenizer

__all__ = ["GENERATE_KEYWORDS_SET_PER_CALL", "BatchingPolicy", "Generation", "ImagePolicy", "Policy", "SampledLogprobs", "SamplingParams", "TransformersPolicy", "cut_at_stop"]


@dataclass
class SamplingParams:
    """How to sample one assistant turn."""

    max_new_tokens: int = 256
    """Most tokens to sample in one turn (the runner may lower it to respect ``max_total_tokens``)."""
    temperature: float = 1.0
    """Softmax temperature; 0 means greedy decoding (a positive one is at least 1e-5)."""
    top_p: float = 1.0
    """Nucleus sampling mass; 1.0 turns it off."""
    top_k: int = 0
    """Sample among the k most likely tokens; 0 turns it off."""
    stop_token_ids: list[int] | None = None
    """Ids that end the turn (included in the output when sampled). None: the tokenizer's eos and the
    chat template's end-of-turn ids (the runner fills these in)."""

    def __post_init__(self) -> None:
        """Refuse what no backend can sample with, here rather than mid-run: ``max_new_tokens=-3`` and
        ``temperature=-1`` were played, and 1.5 tokens failed deep in a slice; ``temperature=1e-300`` overflowed
        the logits divided by it (a raw error from torch's sampler), stop id ``"x"`` failed inside ``generate``
        and stop id -1 never stopped; counts past 32 bits overflow the integers backends keep them in. Numpy
        numbers (from a config) become Python ones, and the stop ids a list of its own.

        Raises:
            InvalidArgument: a field out of its range (the message names it).
        """
        if _whole(self.max_new_tokens) is None or not 0 <= self.max_new_tokens <= _MAX_COUNT:
            raise InvalidArgument(f"SamplingParams.max_new_tokens={self.max_new_tokens!r} must be a whole number from 0 to {_MAX_COUNT}.")
        if _whole(self.top_k) is None or not 0 <= self.top_k <= _MAX_COUNT:
            raise InvalidArgument(
                f"SamplingParams.top_k={self.top_k!r} must be a whole number from 0 to {_MAX_COUNT} (0: off; a k past the "
                "vocabulary keeps every token, as 0 does)."
            )
        self.max_new_tokens, self.top_k = int(self.max_new_tokens), int(self.top_k)
        if not _real(self.temperature) or not 0 <= self.temperature < math.inf:
            raise InvalidArgument(f"SamplingParams.temperature={self.temperature!r} must be a finite number of at least 0 (0: greedy).")
        if 0 < self.temperature < _MIN_TEMPERATURE:
            raise InvalidArgument(
                f"SamplingParams.temperature={self.temperature!r} is too small to sample with (the logits divided by it "
                f"overflow); use 0 for greedy decoding, or a temperature of at least {_MIN_TEMPERATURE:g}."
            )
        if not _real(self.top_p) or not 0 <= self.top_p <= 1:
            raise InvalidArgument(f"SamplingParams.top_p={self.top_p!r} must be a number in [0, 1] (1: off).")
        if self.stop_token_ids is not None:
            self.stop_token_ids = _stop_ids(self.stop_token_ids)


_MAX_COUNT = 2**31 - 1
"""The largest ``max_new_tokens`` and ``top_k`` :class:`SamplingParams` takes: vLLM and SGLang keep them in 32-bit integers."""

_MIN_TEMPERATURE = 1e-5
"""The smallest positive sampling temperature (vLLM's: below it vLLM samples greedily); 0 is greedy decoding.
Logits divided by ``1e-300`` overflow to infinities, which torch's sampler refuses."""


def _stop_ids(value: Any) -> list[int]:
    """``stop_token_ids`` as a list of Python ints of at least 0, or the error that names the field."""
    fix = "give a list of token ids (whole numbers of at least 0), e.g. [tokenizer.eos_token_id], or None for the defaults"
    if isinstance(value, (str, bytes)) or not isinstance(value, Iterable):
        raise InvalidArgument(f"SamplingParams.stop_token_ids={value!r:.60} is not a list of ids; {fix}.")
    ids = list(value)
    try:
        if any(isinstance(t, bool) for t in ids):  # operator.index takes True as 1: a mask passed for ids
            raise TypeError
        ids = list(map(operator.index, ids))  # numpy or torch ids become ints; floats and text are refused
    except TypeError:
        raise InvalidArgument(f"SamplingParams.stop_token_ids={ids!r:.60} holds something other than whole numbers; {fix}.") from None
    if ids and min(ids) < 0:
        raise InvalidArgument(f"SamplingParams.stop_token_ids={ids!r:.60} holds a negative id, which no token has (it never stops a turn); {fix}.")
    return ids


def _count(name: str, value: Any) -> int:
    """``value`` as a count of episodes, or the error naming the call."""
    count = _whole(value)
    if count is None or count < 0:
        raise InvalidArgument(f"BatchingPolicy.{name}(count={value!r}): count must be a whole number of at least 0.")
    return count


def _whole(value: Any) -> int | None:
    return int(value) if isinstance(value, numbers.Integral) and not isinstance(value, bool) else None


def _real(value: Any) -> bool:
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


@dataclass(frozen=True)
class Generation:
    """One sampled assistant turn."""

    token_ids: list[int]
    """Exactly the sampled ids, the stop token included if one was sampled."""
    logprobs: list[float] | None
    """Log-probability of each sampled id (one per ``token_ids`` entry), or None if the backend has none."""
    finish_reason: str
    """``"stop"`` (a stop token was sampled), ``"length"`` (hit ``max_new_tokens``) or ``"abort"``."""
    versions: list[int] | None = None
    """The policy version that sampled each id (one per ``token_ids`` entry), or None if the policy carries
    no version (:class:`gem_core.rollout.policy_version.VersionedPolicy` fills it in)."""

    def __post_init__(self) -> None:
        if self.logprobs is not None and len(self.logprobs) != len(self.token_ids):
            raise InvalidArgument(
                f"Generation has {len(self.token_ids)} token ids but {len(self.logprobs)} logprobs; "
                "a policy must return one logprob per sampled token (or None)."
            )
        if self.versions is not None and len(self.versions) != len(self.token_ids):
            raise InvalidArgument(
                f"Generation has {len(self.token_ids)} token ids but {len(self.versions)} versions; "
                "a policy must return one version per sampled token (or None)."
            )
        if self.finish_reason not in ("stop", "length", "abort"):
            raise InvalidArgument(f"finish_reason must be 'stop', 'length' or 'abort', got {self.finish_reason!r}.")


@runtime_checkable
class Policy(Protocol):
    """Anything that samples one assistant turn from a prompt of token ids.

    The runner also reads three optional attributes: ``accepts_images`` (:class:`ImagePolicy`),
    ``borrows_prompt_ids`` (True: the policy is done with ``prompt_ids`` when ``generate`` returns and keeps no
    reference, so it is lent the episode's own context list, not a copy per turn; see :class:`BatchingPolicy`) and
    ``vocab_size`` (the model's ids are below it: a sampled id at or above it is refused; without it only negative
    ids are, since a model may have more rows than its tokenizer and samplers draw them).
    """

    async def generate(self, prompt_ids: list[int], sampling: SamplingParams) -> Generation:
        """Sample one turn's tokens after ``prompt_ids``.

        Args:
            prompt_ids: the whole conversation so far, as token ids.
            sampling: temperature, token limit, stop ids and the other sampling settings.

        Returns:
            The sampled ids, their log-probabilities (one per id) and why sampling stopped (``"stop"`` or
            ``"length"``).
        """
        ...


@runtime_checkable
class ImagePolicy(Policy, Protocol):
    """A :class:`Policy` that also takes the images of a vision env's context; the runner passes them when
    :attr:`accepts_images` is true (:class:`BatchingPolicy` subclasses declare it)."""

    #: Whether :meth:`generate` takes ``images=``.
    accepts_images: bool

    async def generate(self, prompt_ids: list[int], sampling: SamplingParams, *, images: list | None = None) -> Generation:
        """:meth:`Policy.generate`, with ``images`` (:class:`~gem_core.rollout.vision.TrajectoryImage`, in order) the
        images whose placeholder ids ``prompt_ids`` holds.

        Returns:
            As :meth:`Policy.generate`.
        """
        ...


def default_stop_token_ids(tokenizer: Tokenizer, chat_template: Any = None) -> list[int]:
    """The ids that end a turn: ``chat_template``'s end-of-turn ids (by default the tokenizer's own
    template, when usable) plus the tokenizer's eos id.

    The one definition of a turn's stop ids, so the runner, the batch policies and the adapters stop
    a turn at the same tokens.
    """
    from gem_core.rollout.chat_template import ChatTemplate, ChatTemplateError

    ids: list[int] = []
    if chat_template is not None:
        ids.extend(chat_template.end_of_turn_ids)
    else:
        try:
            ids.extend(ChatTemplate.for_tokenizer(tokenizer).end_of_turn_ids)
        except (ChatTemplateError, ValueError):
            pass
    if tokenizer.eos_token_id is not None and tokenizer.eos_token_id not in ids:
        ids.append(int(tokenizer.eos_token_id))
    return ids


def cut_at_stop(token_ids: list[int], logprobs: list[float] | None, stop_ids: list[int], budget: int) -> Generation:
    """The turn a backend sampled, kept up to and including the first stop id and within ``budget`` ids.

    Batch backends sample past a prompt's own end (padding, or up to a shared token limit); a prefix of a
    sample is still a sample, so cutting it changes nothing about its distribution.
    """
    if not isinstance(token_ids, list):  # an array row (what model.generate gives): its ids as ints, in one call
        token_ids = token_ids.tolist() if hasattr(token_ids, "tolist") else list(token_ids)
    if token_ids and not isinstance(token_ids[0], int):  # 0-d tensors hash by identity: no stop id would match them
        token_ids = [operator.index(t) for t in token_ids]
    stop = set(stop_ids)
    end = min(next((i + 1 for i, t in enumerate(token_ids) if t in stop), len(token_ids)), budget)
    ids = [int(t) for t in token_ids[:end]]
    finish = "stop" if ids and ids[-1] in stop else "length"
    return Generation(token_ids=ids, logprobs=None if logprobs is None else [float(x) for x in logprobs[:end]], finish_reason=finish)


@dataclass
class _Request:
    prompt_ids: list[int]
    sampling: SamplingParams
    future: asyncio.Future = field(repr=False)
    images: list | None = None


class BatchingPolicy:
    """A :class:`Policy` whose backend samples a batch of prompts per call; subclasses implement :meth:`sample_batch`.

    Concurrent ``generate`` calls are served in rounds. A round starts once the event loop has let every
    ready episode submit its turn; with ``num_episodes`` it waits until every live episode is waiting
    (call :meth:`episode_finished` when one ends), so the batches of a rollout are the same whatever the
    envs' timing, which backends with collective calls across processes need. Episodes something else holds
    back are not waited for (:meth:`episodes_held`: :func:`~gem_core.rollout.runner.run_episodes` holds those past
    its ``concurrency``, :class:`~gem_core.rollout.policy_version.VersionedPolicy` those at its gate while it updates).
    The policy serves one event loop at a time; kept across loops (an ``asyncio.run`` per eval), it serves the running
    one and drops the requests an earlier loop left pending, which no one is left to await. A round's requests go out
    grouped by sampling settings (temperature, top-p, top-k, stop ids) in chunks of ``max_batch_size``;
    each sample is cut at its stop id and its own ``max_new_tokens`` by :func:`cut_at_stop`.

    Args:
        tokenizer: gives the default stop ids (eos and end-of-turn) for requests without ``stop_token_ids``.
        max_batch_size: most prompts per backend call (None: no limit).
        num_episodes: the episodes that will call this policy; None starts a round at every event-loop tick.
        sample_in_thread: run :meth:`sample_batch` in a worker thread, so the loop keeps stepping envs
            meanwhile (off for backends whose calls must stay on the loop's thread).

    Raises:
        InvalidArgument: if ``max_batch_size`` is below 1.
    """

    def __init__(
        self, tokenizer: Tokenizer | None = None, *, max_batch_size: int | None = None, num_episodes: int | None = None,
        sample_in_thread: bool = True,
    ):
        if max_batch_size is not None and max_batch_size < 1:
            raise InvalidArgument(f"max_batch_size must be at least 1 (or None), got {max_batch_size}.")
        self.tokenizer = text_tokenizer(tokenizer)  # a vision model's processor: its tokenizer
        self.max_batch_size = max_batch_size
        self.live = num_episodes
        self.sample_in_thread = sample_in_thread
        self._default_stop_ids: list[int] | None = None
        self._pending: list[_Request] = []
        self._server: asyncio.Task | None = None  # the running loop's task serving rounds, if any
        self._held = 0  # live episodes that something outside holds back from asking (episodes_held)

    def sample_batch(self, prompts: list[list[int]], sampling: SamplingParams, max_new_tokens: int) -> list[tuple[list[int], list[float] | None]]:
        """Sample up to ``max_new_tokens`` ids for each prompt (blocking); ``(ids, logprobs or None)`` per prompt.

        Ids past a stop token or a request's smaller budget are allowed: :meth:`generate` cuts them.
        """
        raise NotImplementedError

    def stop_token_ids(self, sampling: SamplingParams) -> list[int]:
        """The ids that end a turn: ``sampling.stop_token_ids`` if set, else the tokenizer's defaults (see
        :func:`default_stop_token_ids`).
        """
        if sampling.stop_token_ids is not None:
            return list(sampling.stop_token_ids)
        if self._default_stop_ids is None:
            self._default_stop_ids = default_stop_token_ids(self.tokenizer) if self.tokenizer is not None else []
        return self._default_stop_ids

    #: Whether :meth:`sample_batch` takes ``images=`` (the runner then passes a vision context's images).
    accepts_images = False

    #: The backend's token ids are those below it (the model's embedding rows, which may be more than the tokenizer's
    #: length: Qwen's have padding rows a sampler can draw); None: unknown. :meth:`generate` refuses a prompt holding
    #: an id below 0 or at or above it, and the runner a sampled one; set it where the backend knows its model.
    vocab_size: int | None = None

    #: The most positions a sequence may take, prompt and new tokens together, where the model has a hard bound (a
    #: learned table of positions, as GPT-2's); None: no bound known (rotary positions run on past their configured
    #: length), unchecked.
    max_prompt_tokens: int | None = None

    #: Whether :meth:`sample_batch` is done with its prompts when it returns (it keeps no reference to them). The
    #: runner then lends each episode's own context list rather than a copy per turn, and extends that list once
    #: the turn is sampled. Off here, so a backend written to keep its prompts (say, to log them) stays correct;
    #: :class:`TransformersPolicy` turns it on.
    borrows_prompt_ids = False

    async def generate(self, prompt_ids: list[int], sampling: SamplingParams, *, images: list | None = None) -> Generation:
        """Sample one turn; ``images`` (:class:`~gem_core.rollout.vision.TrajectoryImage`, in order) are the
        images whose placeholder ids ``prompt_ids`` holds, for backends with :attr:`accepts_images`.

        ``prompt_ids`` is read, not copied, until its round is sampled: do not change the list before the call
        returns. A second copy of the whole context per turn, held until the round is served, cost drive mode 16%
        of its instructions at 2,000-id contexts (issue 46).

        A malformed prompt (empty, an id outside :attr:`vocab_size`, with its new tokens past :attr:`max_prompt_tokens`) is refused
        here, before it joins a round: in the round's one backend call it failed every request batched with it.

        Raises:
            InvalidArgument: if ``images`` are given to a backend that does not take them, or the prompt is malformed.
        """
        if sampling.max_new_tokens <= 0:
            return Generation(token_ids=[], logprobs=[], finish_reason="length")
        if images and not self.accepts_images:
            raise InvalidArgument(f"{type(self).__name__} cannot take image inputs; use a backend with accepts_images=True.")
        self._check_prompt(prompt_ids, sampling.max_new_tokens)
        loop = asyncio.get_running_loop()
        request = _Request(prompt_ids, sampling, loop.create_future(), list(images or []) or None)
        self._pending.append(request)
        self._schedule(loop)
        return await request.future

    def _check_prompt(self, prompt_ids: list[int], max_new_tokens: int) -> None:
        """Refuse a prompt the backend cannot sample after. Its ids are read (min and max, ~30 ns an id: 1,000 times
        what the other checks cost at a 2,000-id context) only for a backend that declares :attr:`vocab_size`, as a
        model's does: the runner already refuses a negative sampled id, and the rest of a context is the tokenizer's."""
        name = type(self).__name__
        if len(prompt_ids) == 0:
            raise InvalidArgument(
                f"{name}.generate got an empty prompt: a turn is sampled after at least the chat template's generation "
                "prompt; pass the episode's context ids (EpisodeSession.context_ids)."
            )
        limit = self.max_prompt_tokens
        if limit is not None and len(prompt_ids) + max_new_tokens > limit:
            raise InvalidArgument(
                f"{name}.generate got a prompt of {len(prompt_ids)} ids asking {max_new_tokens} new tokens, past the model's "
                f"{limit} positions; bound the episode with max_total_tokens={limit} (or less) so its context fits."
            )
        vocab = self.vocab_size
        if vocab is None:
            return
        try:
            low, high = min(prompt_ids), max(prompt_ids)
        except TypeError:
            raise InvalidArgument(f"{name}.generate got a prompt holding something other than token ids; pass a list of ints.") from None
        if low < 0 or high >= vocab:
            raise InvalidArgument(
                f"{name}.generate got a prompt holding id {low if low < 0 else high!r}, outside the model's vocabulary (ids "
                f"from 0 to {vocab - 1}); encode the prompt with this model's tokenizer."
            )

    def episode_finished(self) -> None:
        """One of ``num_episodes`` will ask for no more turns (a no-op without ``num_episodes``)."""
        if self.live is not None:
            self.live -= 1
            self._schedule()

    def episodes_held(self, count: int = 1) -> None:
        """``count`` live episodes are held back from asking for a turn by something outside the policy (a runner's
        ``concurrency`` bound, :class:`~gem_core.rollout.policy_version.VersionedPolicy`'s gate while it updates): rounds
        stop waiting for them until :meth:`episodes_released`. Without it, a round that waits for every live episode
        waited for one that waited for the round to end. Counted, and used only with ``num_episodes``.

        Raises:
            InvalidArgument: if ``count`` is not a whole number of at least 0.
        """
        self._held += _count("episodes_held", count)
        self._schedule()

    def episodes_released(self, count: int = 1) -> None:
        """``count`` episodes held back (:meth:`episodes_held`) may ask again: rounds wait for them again.

        Raises:
            InvalidArgument: if ``count`` is not a whole number of at least 0.
            UsageError: if more episodes are released than are held.
        """
        count = _count("episodes_released", count)
        if count > self._held:
            raise UsageError(f"{type(self).__name__}.episodes_released({count}) with {self._held} held: release only episodes held.")
        self._held -= count

    def release_context(self, token_ids: list[int]) -> None:
        """An episode ended with context ``token_ids``: drop what the backend kept for its next turn
        (the episode loop calls it; a no-op for backends that keep nothing)."""

    def invalidate_caches(self) -> None:
        """The backend's weights changed: drop whatever was computed with the old ones
        (:meth:`~gem_core.rollout.policy_version.VersionedPolicy.update` calls it; a no-op here)."""

    def _round_ready(self) -> bool:
        return bool(self._pending) and (self.live is None or len(self._pending) >= self.live - self._held)

    def _schedule(self, loop: asyncio.AbstractEventLoop | None = None) -> None:
        if not self._pending:
            return
        if loop is None:
            try:
                loop = asyncio.get_running_loop()
            except RuntimeError:  # told outside a loop (an episode count changed): the next generate schedules
                return
        server = self._server
        if server is not None and not server.done() and server.get_loop() is loop:
            return  # its next round takes the new request
        if server is not None and server.get_loop() is not loop:
            # A policy kept across event loops (an asyncio.run per eval): the last loop may have closed with a request
            # pending and its server cancelled before it ran (its `finally` never did). Its requests have no one to
            # answer; one of them counted as a waiting episode would start this loop's rounds early.
            self._pending = [request for request in self._pending if request.future.get_loop() is loop]
        self._server = loop.create_task(self._serve_rounds())

    async def _serve_rounds(self) -> None:
        me = asyncio.current_task()
        try:
            await asyncio.sleep(0)  # let the other ready episodes submit their turn
            while self._server is me and self._round_ready():  # (a server another loop replaced serves no more)
                requests, self._pending = self._pending, []
                for batch in self._batches(requests):
                    await self._serve(batch)
                await asyncio.sleep(0)
        finally:
            if self._server is me:
                self._server = None

    def _batches(self, requests: list[_Request]) -> list[list[_Request]]:
        groups: dict[tuple, list[_Request]] = {}
        for request in requests:
            groups.setdefault(_batch_key(request.sampling), []).append(request)
        size = self.max_batch_size or len(requests)
        return [group[i : i + size] for group in groups.values() for i in range(0, len(group), size)]

    async def _sample_in_thread(
        self, batch: list[_Request], prompts: list[list[int]], sampling: SamplingParams, budget: int, extra: dict
    ) -> list[tuple[list[int], list[float] | None]]:
        """:meth:`sample_batch` in a worker thread. Cancelled (the run was, or its loop is closing), it still waits
        for the thread, which samples on and then keeps the round's states, to free those: no caller continues them."""
        # A bare future, not a task (as asyncio.to_thread makes): a closing loop cancels its tasks, not the thread.
        call = functools.partial(contextvars.copy_context().run, self.sample_batch, prompts, sampling, budget, **extra)
        round_ = asyncio.get_running_loop().run_in_executor(None, call)
        try:
            return await asyncio.shield(round_)
        except asyncio.CancelledError:
            try:
                results = await round_
            except Exception:  # noqa: BLE001 - the round failed: it kept nothing; the cancel is what the caller hears
                raise asyncio.CancelledError from None
            for request, (ids, _) in zip(batch, results, strict=False):
                self.release_context(list(request.prompt_ids) + list(ids[:1]))
            raise

    async def _serve(self, batch: list[_Request]) -> None:
        sampling = batch[0].sampling
        budget = max(r.sampling.max_new_tokens for r in batch)
        prompts = [r.prompt_ids for r in batch]
        # Only a batch with images passes `images=`, so backends written for text keep their signature.
        extra = {"images": [r.images or [] for r in batch]} if any(r.images for r in batch) else {}
        try:
            if self.sample_in_thread:
                results = await self._sample_in_thread(batch, prompts, sampling, budget, extra)
            else:
                results = self.sample_batch(prompts, sampling, budget, **extra)
            if len(results) != len(batch):
                raise UsageError(f"{type(self).__name__}.sample_batch returned {len(results)} samples for {len(batch)} prompts.")
            stop_ids = self.stop_token_ids(sampling)
            generations = [cut_at_stop(ids, lps, stop_ids, r.sampling.max_new_tokens) for r, (ids, lps) in zip(batch, results, strict=True)]
        except Exception as error:  # every waiting episode hears about it; none hangs
            for request in batch:
                if not request.future.done():
                    request.future.set_exception(error)
            return
        for request, (ids, _), generation in zip(batch, results, generations, strict=True):
            if not request.future.done():
                request.future.set_result(generation)
            elif request.future.cancelled():
                # Its episode was cancelled mid-round and released what it held before this turn's states were
                # kept: nobody will continue them, so free them now (the same key the episode loop releases with).
                self.release_context(list(request.prompt_ids) + list(ids[:1]))


class TransformersPolicy(BatchingPolicy):
    """A ``transformers`` causal LM, or a vision-language model with its processor, as a :class:`Policy`; works on a CPU.

    Concurrent ``generate`` calls (the episodes of :func:`~gem_core.rollout.run_episodes` or of an
    adapter's batch) are gathered into one left-padded ``model.generate`` call, up to
    ``max_batch_size`` prompts: a tiny model on a CPU spends most of a step in per-call overhead, and a
    large one on a GPU wants the batch. ``model.generate`` runs in a worker thread so the event loop
    keeps stepping other episodes' envs while the model samples.

    Log-probabilities are those of the sampled tokens under ``softmax(logits / temperature)`` of the raw
    model logits (temperature 1 when greedy). This is the distribution trainers recompute (TRL and verl
    divide logits by the temperature), so the numbers are directly usable as "old" log-probs; top-k and
    top-p truncation are not reflected in them. So the sampling settings are the :class:`SamplingParams` alone:
    the processors and decoding settings ``model.generation_config`` sets (a ``repetition_penalty``, as
    Qwen2.5-Instruct ships, ``no_repeat_ngram_size``, ``min_new_tokens``, ``min_p``, beams) are turned off in each
    ``generate`` call. What the caller passes as ``generate_kwargs`` (the TRL adapter passes ``GRPOConfig``'s
    ``repetition_penalty``, ``min_p`` and ``generation_kwargs``) is its explicit choice and applies; the log-probs are
    then after its processors. They are taken during sampling, one value per row and
    step (:class:`SampledLogprobs`): asking ``generate`` for every step's full-vocabulary logits and
    taking a log-softmax over them afterwards held ``batch x new tokens x vocab`` floats (1 GB for 32
    rows of 48 tokens at Qwen's 151,936 ids) and cost TRL's path about a third of its sampling time.
    ``logprobs=False`` skips them (``Generation.logprobs`` is None) for trainers that recompute them.

    Sampling uses torch's global RNG: seed it with ``torch.manual_seed`` for a reproducible run.

    KV reuse between turns: each sampled sequence's attention keys and values are kept
    (:class:`~gem_core.rollout.kv_cache.PrefixKVCache`), so the next turn of the same episode, whose prompt
    extends them, prefills only its new observation tokens instead of the whole context. A prompt reuses
    the longest prefix it shares with a kept sequence; anything else is a miss (a full prefill), never a
    wrong reuse. Bounds: ``kv_cache_sequences`` sequences and ``kv_cache_tokens`` tokens (a token costs
    ``2 x layers x kv_heads x head_dim x dtype bytes``), least recently used out first. A sequence is
    dropped when its episode's next turn extends it, when the episode ends (the runner calls
    :meth:`release_context`), and all of them when the weights change: :meth:`invalidate_caches`
    (``VersionedPolicy.update`` calls it), and, as a guard for trainers that step the optimizer on the same
    model, whenever a parameter was written in place or replaced since the last call (torch's per-tensor
    version counters). With greedy decoding the ids are those of a full prefill and the log-probs equal up
    to float rounding. Batching: the rows of one ``generate`` call each reuse their own prefix; their
    cached parts are right-aligned and padded on the left to the longest, their new tokens right-aligned
    after a second pad run (the attention mask hides both runs; positions come from the mask, so each
    row's positions are those of its unpadded sequence). The tradeoff: a batch mixing a long cached row
    with a long new prompt attends over both widths, and each stored sequence is a copy of its row's
    states (memory traffic of one cache per turn), against a manual decode loop (exact per-row caches, but
    generate's sampling and processors re-implemented) or reuse only for single-row batches (none of the
    batching). Vision-language models, image prompts and models whose cache is not one plain growing
    key/value pair per layer (sliding windows, linear attention) always prefill in full.

    A vision-language model (Qwen2-VL style: ``model.config.image_token_id``) gets each prompt's images
    as ``pixel_values``/``image_grid_thw`` (concatenated over the batch in order) and
    ``mm_token_type_ids`` marking the image placeholders.

    Args:
        model: a ``PreTrainedModel`` with a language-modelling head.
        tokenizer: the tokenizer the prompts were made with (gives pad and default stop ids), or a
            vision model's processor.
        device: where to put the prompt tensors; defaults to ``model.device``.
        max_batch_size: most prompts in one ``model.generate`` call; 1 samples one prompt at a time.
        num_episodes: see :class:`BatchingPolicy`.
        logprobs: return the sampled tokens' log-probabilities (False: ``Generation.logprobs`` is None).
        sample_in_thread: see :class:`BatchingPolicy`.
        kv_cache_sequences: most sequences whose attention states are kept between turns (0: no reuse).
        kv_cache_tokens: most tokens kept, all sequences together (0: no reuse).
        generate_kwargs: more ``model.generate`` keywords for every call (a ``repetition_penalty``, ``min_p``, a
            ``no_repeat_ngram_size``): they win over the model's ``generation_config``; the keywords the policy sets
            for each call (:data:`GENERATE_KEYWORDS_SET_PER_CALL`) are refused. A keyword whose processor may read
            the ids (all but ``min_p``-style warpers) turns KV reuse off: the reuse layout's pads would be context to it.

    Raises:
        InvalidArgument: if ``max_batch_size`` is below 1, or ``generate_kwargs`` is not a dict of keyword names or
            holds a keyword the policy sets for each call.
    """

    def __init__(
        self, model: Any, tokenizer: Tokenizer, *, device: Any = None, max_batch_size: int = 64, num_episodes: int | None = None,
        logprobs: bool = True, sample_in_thread: bool = True, kv_cache_sequences: int = 256, kv_cache_tokens: int = 65_536,
        generate_kwargs: Mapping[str, Any] | None = None,
    ):
        if max_batch_size < 1:
            raise InvalidArgument(f"max_batch_size must be at least 1, got {max_batch_size}.")
        self.generate_kwargs = _checked_generate_kwargs(generate_kwargs)
        """The caller's own ``model.generate`` keywords, passed on every call."""
        self._kwargs_allow_reuse = all(
            key in _SCORES_ONLY_KEYWORDS or _NEUTRAL_GENERATION.get(key, object()) == value for key, value in self.generate_kwargs.items()
        )
        super().__init__(tokenizer, max_batch_size=max_batch_size, num_episodes=num_episodes, sample_in_thread=sample_in_thread)
        self.model = model
        self.logprobs = logprobs
        self.device = device if device is not None else getattr(model, "device", "cpu")
        self._lock = threading.Lock()
        self.kv_cache = PrefixKVCache(kv_cache_sequences, kv_cache_tokens)
        """The attention states kept between turns (see the class docstring)."""
        self.vocab_size, self.max_prompt_tokens = _model_limits(model)
        self._kv_supported: bool | None = None  # decided on first use, from the model's cache layout
        self._weights_seen: tuple | None = None

    def release_context(self, token_ids: list[int]) -> None:
        """An episode ended with context ``token_ids``: free its kept attention states."""
        self.kv_cache.release(token_ids)

    def invalidate_caches(self) -> None:
        """The weights changed: every kept attention state was computed by the old ones."""
        self.kv_cache.clear()

    accepts_images = True
    borrows_prompt_ids = True  # the rows are copied when a round starts (sample_batch), and the kept states' keys are copies

    def sample_batch(
        self, prompts: list[list[int]], sampling: SamplingParams, max_new_tokens: int, images: list[list] | None = None
    ) -> list[tuple[list[int], list[float] | None]]:
        import torch

        # Read three times (lookup, inputs, the kept states' keys) while the event loop runs on: a caller cancelled
        # mid-round may change its list meanwhile, and states must be kept under the ids they were computed from.
        prompts = [list(prompt) for prompt in prompts]
        stop_ids = self.stop_token_ids(sampling)
        pad_id = self.tokenizer.pad_token_id
        if pad_id is None:
            pad_id = stop_ids[0] if stop_ids else 0
        greedy = sampling.temperature <= 0
        gen_kwargs: dict[str, Any] = {
            **_model_defaults_off(self.model, self.generate_kwargs),
            **self.generate_kwargs,
            "max_new_tokens": max_new_tokens,
            "do_sample": not greedy,
            "eos_token_id": stop_ids or None,
            "pad_token_id": pad_id,
        }
        recorder = SampledLogprobs(1.0 if greedy else float(sampling.temperature)) if self.logprobs else None
        if recorder is not None:
            from transformers import LogitsProcessorList

            gen_kwargs["logits_processor"] = LogitsProcessorList([recorder])
        if not greedy:
            gen_kwargs.update(temperature=sampling.temperature, top_p=sampling.top_p, top_k=sampling.top_k)
        else:
            gen_kwargs.update(temperature=None, top_p=None, top_k=None)
        with self._lock, torch.no_grad():
            # The weights' check, the kept states' lookup and generate under one hold of the lock: an update that
            # takes it (VersionedPolicy.update's apply) cannot slip new weights under states of the old ones.
            reuse = not (images and any(images)) and self._kv_reusable()
            reused = [self.kv_cache.lookup(p) for p in prompts] if reuse else []
            input_ids, attention_mask, cache = self._inputs(prompts, reused, pad_id)
            if reuse:
                gen_kwargs.update(_cache_kwarg(cache), use_cache=True)
            width = input_ids.shape[1]
            if images and any(images):
                gen_kwargs.update(self._image_inputs(input_ids, [image for row in images for image in row]))
            config = getattr(self.model, "config", None)
            vision_ids = [getattr(config, k, None) for k in ("image_token_id", "video_token_id")]
            if any(t is not None for t in vision_ids):
                # A sampled placeholder would claim image features that do not exist (the trainer's forward fails).
                suppressed = [int(t) for t in vision_ids if t is not None]
                if recorder is not None:
                    recorder.suppress_ids = suppressed  # after recording: log-probs stay those of the raw logits
                else:
                    gen_kwargs["suppress_tokens"] = suppressed
            sequences = self.model.generate(input_ids=input_ids, attention_mask=attention_mask, **gen_kwargs)
            if reuse:
                self._keep_states(prompts, reused, sequences, attention_mask, cache, stop_ids)
        new_ids = sequences[:, width:]
        ids = new_ids.tolist()
        if recorder is None:
            return [(row, None) for row in ids]
        picked = recorder.result(new_ids).tolist()  # the pads past a stop are cut by the caller
        return list(zip(ids, picked, strict=True))


    def _kv_reusable(self) -> bool:
        """Whether this call may reuse kept states; clears them if the weights changed since the last call."""
        if not self.kv_cache.enabled or not self._kwargs_allow_reuse:
            return False
        if self._kv_supported is None:
            self._kv_supported = _plain_kv_layout(self.model)
        if not self._kv_supported:
            return False
        seen = _weights_fingerprint(self.model)
        if seen != self._weights_seen:
            self.kv_cache.clear()
            self._weights_seen = seen
        return True

    def _inputs(self, prompts: list[list[int]], reused: list[tuple[Any, int]], pad_id: int) -> tuple[Any, Any, Any]:
        """``(input_ids, attention_mask, cache)``. Without reuse (``reused`` empty) the prompts left-padded, so
        each ends where generation starts (the mask hides the pads), and no cache. With reuse, per row
        ``[pads][cached prefix][pads][new tokens]``, the cache holding each row's kept states right-aligned
        in the first part (zeros, masked, before them)."""
        import torch
        from transformers import DynamicCache

        if not reused:
            width = max(len(p) for p in prompts)
            input_ids = torch.tensor([[pad_id] * (width - len(p)) + p for p in prompts], dtype=torch.long, device=self.device)
            attention_mask = torch.tensor([[0] * (width - len(p)) + [1] * len(p) for p in prompts], dtype=torch.long,
                                          device=self.device)
            return input_ids, attention_mask, None
        cached = [n for _, n in reused]
        head = max(cached)
        tail = max(len(p) - n for p, n in zip(prompts, cached, strict=True))
        rows, masks = [], []
        for prompt, n in zip(prompts, cached, strict=True):
            new = len(prompt) - n
            rows.append([pad_id] * (head - n) + prompt[:n] + [pad_id] * (tail - new) + prompt[n:])
            masks.append([0] * (head - n) + [1] * n + [0] * (tail - new) + [1] * new)
        input_ids = torch.tensor(rows, dtype=torch.long, device=self.device)
        attention_mask = torch.tensor(masks, dtype=torch.long, device=self.device)
        if head == 0:
            return input_ids, attention_mask, DynamicCache(config=self.model.config)
        # All layers at once: two copies per row, not two per row and layer (on a GPU each copy is a kernel
        # launch, and 28 layers x 32 rows of them cost more than the prefill they save).
        keys, values = next(entry for entry, n in reused if n > 0).layers
        shape = (keys.shape[0], len(prompts), keys.shape[2], head, keys.shape[4])
        batch_keys, batch_values = keys.new_zeros(shape), values.new_zeros(shape)
        for row, (entry, n) in enumerate(reused):
            if n > 0:
                batch_keys[:, row, :, head - n :] = entry.layers[0][:, 0, :, :n]
                batch_values[:, row, :, head - n :] = entry.layers[1][:, 0, :, :n]
        data = list(zip(batch_keys.unbind(0), batch_values.unbind(0), strict=True))
        return input_ids, attention_mask, DynamicCache(ddp_cache_data=data, config=self.model.config)

    def _keep_states(self, prompts: list[list[int]], reused: list[tuple[Any, int]], sequences: Any, attention_mask: Any,
                     cache: Any, stop_ids: list[int]) -> None:
        """Keep each row's states for its prompt and sampled ids (up to its first stop id; the last sampled
        id was never fed to the model, so it has none)."""
        import torch

        width = attention_mask.shape[1]
        held = cache.get_seq_length()  # width + sampled - 1
        stop = set(stop_ids)
        # One device-to-host read of the mask and the ids, and one gather per row over all layers stacked
        # (not a sync and two gathers per row and layer). Each layer is freed as it is stacked (generate is done
        # with the cache), so the stack replaces the cache rather than doubling it.
        layers = cache.layers
        keys = layers[0].keys.new_empty((len(layers), *layers[0].keys.shape))  # (layers, rows, kv heads, held, head dim)
        values = layers[0].values.new_empty((len(layers), *layers[0].values.shape))
        for i, layer in enumerate(layers):
            keys[i], values[i] = layer.keys, layer.values
            layer.keys = layer.values = None
        masks, sampled_rows = attention_mask.tolist(), sequences[:, width:held].tolist()
        for row, (prompt, (entry, n)) in enumerate(zip(prompts, reused, strict=True)):
            sampled = sampled_rows[row]
            end = next((i + 1 for i, t in enumerate(sampled) if t in stop), len(sampled))
            positions = [i for i, kept in enumerate(masks[row]) if kept] + list(range(width, width + end))
            index = torch.tensor(positions, device=keys.device)
            states = (keys[:, row : row + 1].index_select(3, index), values[:, row : row + 1].index_select(3, index))
            self.kv_cache.store(prompt + sampled[:end], len(prompt), states, extends=entry if entry is not None and n == len(entry) else None)

    def _image_inputs(self, input_ids: Any, images: list) -> dict[str, Any]:
        from gem_core.rollout.vision import multimodal_inputs

        image_token_id = getattr(self.model.config, "image_token_id", None)
        if image_token_id is None:
            raise InvalidArgument(f"{type(self.model).__name__} has no config.image_token_id: it is not a vision-language model.")
        inputs = multimodal_inputs(images)
        inputs["pixel_values"] = inputs["pixel_values"].to(device=self.device, dtype=self.model.dtype)
        inputs["image_grid_thw"] = inputs["image_grid_thw"].to(self.device)
        inputs["mm_token_type_ids"] = (input_ids == image_token_id).long()  # M-RoPE: where the image tokens are
        return inputs


class SampledLogprobs:
    """A ``transformers`` logits processor that keeps only the sampled tokens' log-probabilities.

    ``generate`` calls it once per step with that step's float32 logits, after its own processors (a
    suppressed token, a repetition penalty) and before the temperature and top-k/top-p warpers, before
    the token is drawn; the drawn token is the last
    column of ``input_ids`` at the next call. So each call takes the log-normalizer of this step
    (``logsumexp(logits / temperature)``, one value per row) and keeps a reference to the logits
    ``generate`` made for this step, and the next call (or :meth:`result`, for the last token) picks
    the drawn token's logit out of them: one ``batch``-sized tensor per step is all that accumulates.
    The logits are returned unchanged, so sampling is exactly what it would be without it; except for
    ``suppress_ids``, set to minus infinity after recording (as ``generate(suppress_tokens=...)`` would,
    which runs first and would leave them out of the log-probs' normalizer, unlike a trainer's forward).

    Raises:
        InvalidArgument: if ``temperature`` is not positive.
    """

    def __init__(self, temperature: float = 1.0, suppress_ids: list[int] | None = None):
        if not temperature > 0:
            raise InvalidArgument(f"temperature must be positive (1.0 for greedy decoding), got {temperature}.")
        self.temperature = float(temperature)
        self.suppress_ids = list(suppress_ids or [])
        self._picked: list[Any] = []
        self._last_logits: Any = None
        self._last_normalizer: Any = None

    def __call__(self, input_ids: Any, scores: Any) -> Any:
        """Record this step's normalizer and the previous step's drawn token (``transformers``' logits-processor hook);
        returns ``scores`` unchanged but for ``suppress_ids``.
        """
        if self._last_logits is not None:
            self._picked.append(self._pick(input_ids[:, -1]))
        import torch

        scaled = scores if self.temperature == 1.0 else scores / self.temperature
        self._last_normalizer = torch.logsumexp(scaled.float(), dim=-1)
        self._last_logits = scores  # generate makes a fresh tensor per step; warpers return new ones
        if self.suppress_ids:
            scores = scores.clone()
            scores[:, self.suppress_ids] = -float("inf")
        return scores

    def _pick(self, token_ids: Any) -> Any:
        logit = self._last_logits.gather(1, token_ids.unsqueeze(1)).squeeze(1).float()
        return logit / self.temperature - self._last_normalizer

    def result(self, new_ids: Any) -> Any:
        """The ``(batch, new tokens)`` log-probabilities of ``new_ids`` (what ``generate`` returned past the prompt)."""
        import torch

        steps = new_ids.shape[1]
        picked = list(self._picked[:steps])
        if len(picked) < steps and self._last_logits is not None:
            picked.append(self._pick(new_ids[:, len(picked)]))
        if len(picked) != steps:
            raise RuntimeError(f"SampledLogprobs saw {len(picked)} sampling steps for {steps} new tokens; was it passed to generate()?")
        if not picked:
            return torch.zeros(new_ids.shape, dtype=torch.float32)
        return torch.stack(picked, dim=1).cpu()


#: What ``transformers`` models name a learned table of positions (GPT-2's ``wpe``; OPT's, BART's, Whisper's; BERT's).
_POSITION_TABLES = frozenset({"wpe", "embed_positions", "position_embeddings"})

#: Parts of a vision-language model whose position tables are the image encoder's, not the language model's.
_VISION_PARTS = frozenset({"vision_model", "vision_tower", "visual", "vision_encoder", "qformer", "image_encoder"})


def _model_limits(model: Any) -> tuple[int | None, int | None]:
    """``(embedding rows, positions)`` of a ``transformers`` model, each None where the model does not say (a stand-in
    model in a test): the bounds :meth:`BatchingPolicy.generate` checks a prompt against.

    Positions bound a sequence only where they are a learned table (past its last row, the round's ``generate``
    fails with IndexError for every request in it); rotary positions run on past ``max_position_embeddings`` (YaRN
    and other scalings are configured for it), so a rotary model's prompts are not bounded here."""
    config = getattr(model, "config", None)
    text_config = getattr(config, "get_text_config", None)
    if callable(text_config):  # a vision-language model's limits are its language model's
        config = text_config()
    vocab = None
    try:
        vocab = model.get_input_embeddings().num_embeddings  # the rows, which a resize_token_embeddings may have changed
    except Exception:  # noqa: BLE001 - no embedding module to ask: the config says
        pass
    if type(vocab) is not int:
        vocab = getattr(config, "vocab_size", None)
    positions = None
    named_modules = getattr(model, "named_modules", None)
    for name, module in named_modules() if callable(named_modules) else ():
        rows = getattr(module, "num_embeddings", None)
        if name.rpartition(".")[2] in _POSITION_TABLES and type(rows) is int and not _VISION_PARTS.intersection(name.split(".")):
            configured = getattr(config, "max_position_embeddings", None)  # OPT's table has 2 rows more than it takes
            positions = min(rows, configured) if type(configured) is int and configured > 0 else rows
            break
    return (vocab if type(vocab) is int and vocab > 0 else None), (positions if positions is not None and positions > 0 else None)


def _plain_kv_layout(model: Any) -> bool:
    """A decoder-only text model whose cache is one growing key/value pair per layer (what reuse copies)."""
    try:
        from transformers import DynamicCache
        from transformers.cache_utils import DynamicLayer
    except ImportError:
        return False
    config = getattr(model, "config", None)
    if config is None or getattr(config, "is_encoder_decoder", False):
        return False
    if any(getattr(config, k, None) is not None for k in ("image_token_id", "video_token_id", "vision_config")):
        return False
    try:
        layers = DynamicCache(config=config).layers
    except Exception:  # noqa: BLE001 - an older transformers or an unusual config: prefill in full
        return False
    return bool(layers) and all(type(layer) is DynamicLayer for layer in layers)


def _weights_fingerprint(model: Any) -> tuple:
    """Changes when the weights do, so states computed by old weights are not reused.

    Detected: a tensor written in place through autograd's view of it (torch bumps its version counter: an
    optimizer step, ``load_state_dict``), replaced (another storage), or written where the counter does not see it
    (``p.data.copy_(new)``, a weight sync), which changes the sum of a few strided elements. That probe is
    ``_PROBES`` elements per tensor, read by one small kernel each and synced once, not a pass over the weights:
    any realistic update changes nearly every element, so it changes the probe. Not detected: a write through
    ``.data`` that leaves every probed element as it was (say, a single element edited by hand).
    :meth:`TransformersPolicy.invalidate_caches` is the sure way after an update.
    """
    import torch

    tensors = [*model.parameters(), *model.buffers()]
    with torch.no_grad():
        probes = [t.detach().reshape(-1)[:: max(1, t.numel() // _PROBES)].double().sum() for t in tensors if t.numel()]
        sums = torch.stack([p.to(probes[0].device) for p in probes]).tolist() if probes else []  # one sync
    return (tuple((t.data_ptr(), t._version) for t in tensors), tuple(sums))


#: Elements per weight tensor whose sum is part of the fingerprint (see :func:`_weights_fingerprint`).
_PROBES = 8


#: ``generate`` settings a model's ``generation_config`` may set that change what is sampled, or the log-probs recorded
#: (logits processors run before :class:`SampledLogprobs`), or what ``generate`` returns, each with the value that turns
#: it off. A processor a model ships (Qwen2.5-Instruct's ``repetition_penalty=1.05``) made the log-probs those of
#: penalized logits (1.7e-2 off at 1.05), not the ``softmax(logits / temperature)`` trainers recompute.
_NEUTRAL_GENERATION: dict[str, Any] = {
    # logits processors (before the log-probs are recorded)
    "repetition_penalty": 1.0, "encoder_repetition_penalty": 1.0, "no_repeat_ngram_size": 0, "encoder_no_repeat_ngram_size": 0,
    "min_length": 0, "min_new_tokens": 0, "bad_words_ids": None, "sequence_bias": None, "forced_bos_token_id": None,
    "forced_eos_token_id": None, "exponential_decay_length_penalty": None, "suppress_tokens": None, "begin_suppress_tokens": None,
    "guidance_scale": None, "renormalize_logits": False, "remove_invalid_values": False, "watermarking_config": None,
    # warpers (after them: the distribution sampled from is the SamplingParams' alone)
    "typical_p": 1.0, "epsilon_cutoff": 0.0, "eta_cutoff": 0.0, "min_p": None, "top_h": None,
    # decoding other than one sample per prompt, and a return value other than the ids
    "num_beams": 1, "num_beam_groups": 1, "num_return_sequences": 1, "penalty_alpha": None, "dola_layers": None,
    "prompt_lookup_num_tokens": None, "stop_strings": None, "return_dict_in_generate": False,
    # a cache of generate's own making: the policy passes the one it reuses (both at once is transformers' ValueError)
    "cache_implementation": None,
}

#: ``generate_kwargs`` whose processors read only each step's scores: KV reuse stays on with them. Any other keyword
#: (a repetition penalty, ``no_repeat_ngram_size``, bad words, a minimum length) may read the row's ids, and the reuse
#: layout's pads (between a cached prefix and its new tokens, before rows that need none without reuse) would be
#: context to it: the policy then prefills in full, whose rows are padded only as a plain batch is.
_SCORES_ONLY_KEYWORDS = frozenset({"min_p", "typical_p", "epsilon_cutoff", "eta_cutoff", "top_h", "renormalize_logits",
                                   "remove_invalid_values", "min_new_tokens"})


def _model_defaults_off(model: Any, explicit: Mapping[str, Any]) -> dict[str, Any]:
    """``generate`` keywords that turn off what ``model.generation_config`` sets among :data:`_NEUTRAL_GENERATION`
    (passed explicitly, as only keywords override the model's defaults in every ``transformers`` version); none where
    the model sets nothing there. A keyword in ``explicit`` (the policy's ``generate_kwargs``) is the caller's choice:
    left to it."""
    config = getattr(model, "generation_config", None)
    if config is None:
        return {}
    off = {}
    for name, neutral in _NEUTRAL_GENERATION.items():
        value = getattr(config, name, None)
        if value is not None and value != neutral and name not in explicit:
            off[name] = neutral
    return off


GENERATE_KEYWORDS_SET_PER_CALL = frozenset({
    "input_ids", "attention_mask", "max_new_tokens", "max_length", "do_sample", "temperature", "top_p", "top_k",
    "eos_token_id", "pad_token_id", "logits_processor", "suppress_tokens", "use_cache", "past_key_values", "cache",
    "pixel_values", "image_grid_thw", "mm_token_type_ids", "num_return_sequences", "num_beams", "num_beam_groups",
    "return_dict_in_generate", "generation_config", "cache_implementation",
})
"""``model.generate`` keywords :class:`TransformersPolicy` sets for each call, from its :class:`SamplingParams`, its
inputs and its own bookkeeping (or whose change would break that bookkeeping: one sampled row per prompt, the ids
returned as a tensor): refused in its ``generate_kwargs``."""


def _checked_generate_kwargs(generate_kwargs: Mapping[str, Any] | None) -> dict[str, Any]:
    """A copy of ``TransformersPolicy(generate_kwargs=...)``, or the error naming what it may not hold."""
    if generate_kwargs is None:
        return {}
    if not isinstance(generate_kwargs, Mapping) or not all(isinstance(key, str) for key in generate_kwargs):
        raise InvalidArgument(
            f"TransformersPolicy(generate_kwargs=...) got a {type(generate_kwargs).__name__}"
            f"{'' if not isinstance(generate_kwargs, Mapping) else ' with keys that are not text'}; give a dict of model.generate keyword names to values, "
            "e.g. {'repetition_penalty': 1.1}."
        )
    refused = sorted(GENERATE_KEYWORDS_SET_PER_CALL.intersection(generate_kwargs))
    if refused:
        raise InvalidArgument(
            f"TransformersPolicy(generate_kwargs=...) holds {', '.join(refused)}, which the policy sets for each call; "
            "give sampling settings as SamplingParams (temperature, top_p, top_k, max_new_tokens, stop_token_ids) and "
            "remove the rest from generate_kwargs."
        )
    return dict(generate_kwargs)


def _cache_kwarg(cache: Any) -> dict[str, Any]:
    """``generate``'s keyword for a cache passed in: ``cache`` where transformers renamed ``past_key_values``
    (its output field was renamed with it)."""
    from transformers.generation.utils import GenerateDecoderOnlyOutput

    return {"cache" if "cache" in GenerateDecoderOnlyOutput.__dataclass_fields__ else "past_key_values": cache}


def _batch_key(sampling: SamplingParams) -> tuple:
    """Requests that can share one ``generate`` call (their budgets may differ: each is cut to its own)."""
    # None (the defaults) and [] (no stop id) are different stop ids: one batch is sampled and cut with one set.
    stop = None if sampling.stop_token_ids is None else tuple(sampling.stop_token_ids)
    return (sampling.temperature, sampling.top_p, sampling.top_k, stop)
