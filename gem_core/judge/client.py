"""The judge: one OpenAI-compatible chat model that scores answers against a rubric.

Each judgement builds the fenced prompt (:mod:`gem_core.judge.prompt`), asks the model through
:class:`~gem_core.eval.openai_client.ChatEndpoint` (the client ``gem eval`` uses: a deadline per request,
openai's retries with backoff on timeouts, 429 and 5xx, a cap on the decoded answer, a bound on requests
in flight) and parses the reply strictly (:mod:`gem_core.judge.verdict`). A whole judgement, retries
included, is bounded by ``deadline``. It never raises for the judge's sake: an unreachable, slow,
rate-limiting or incoherent judge gives a :class:`Verdict` with reward 0 and ``error`` set.

The judge runs its requests on one event loop in a thread of its own, so it serves sync ``step`` calls
from many env threads and async ``astep`` calls from any loop alike, with one connection pool and one
concurrency cap. Verdicts are cached (:class:`~gem_core.judge.cache.VerdictCache`).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import math
import os
import threading
from dataclasses import asdict, dataclass, field
from typing import Any
from urllib.parse import urlsplit

from gem_core.errors import DependencyNotInstalled, InvalidArgument, causes
from gem_core.judge.cache import VerdictCache, verdict_key
from gem_core.judge.prompt import PROMPT_VERSION, PromptBuilder, build_messages, new_nonce
from gem_core.judge.rubric import Rubric
from gem_core.judge.verdict import VerdictError, echoes_answer, parse_verdict
from gem_core.transport.sync_bridge import LoopThread
from gem_core.transport.url_secrets import redact_user_info

__all__ = ["Judge", "Verdict"]


@dataclass(frozen=True)
class Verdict:
    """One judgement: the reward and everything needed to audit it.

    Attributes:
        reward: in [0, 1] from the rubric's weighted scores; 0.0 when ``error`` is set.
        scores: the judge's score per criterion (empty on error).
        reason: the judge's stated reason.
        raw: the judge's reply as received (None when no reply came).
        error: why there is no usable verdict, or None.
        cached: whether the reply came from the cache instead of a call.
        model: the judge model; ``rubric_digest`` and ``prompt_version`` name the rubric and prompt used.
        key: the cache key of this judgement.
        truncated: whether the answer, task or reference was cut to ``max_text_chars`` before judging.
    """

    reward: float
    scores: dict[str, int] = field(default_factory=dict)
    reason: str = ""
    raw: str | None = None
    error: str | None = None
    cached: bool = False
    model: str = ""
    rubric_digest: str = ""
    prompt_version: str = PROMPT_VERSION
    key: str = ""
    truncated: bool = False

    def to_info(self) -> dict[str, Any]:
        """The verdict as plain data, for ``info["judge"]`` and exported trajectories."""
        return asdict(self)


class Judge:
    """A judge model behind an OpenAI-compatible ``/v1/chat/completions``.

    Args:
        base_url: the API root, e.g. ``http://127.0.0.1:8000/v1``. Only the user gives it (code or the
            command line): files and trajectories never do.
        model: the judge model's served name (part of the cache key).
        api_key: bearer token; local servers ignore it.
        timeout: seconds for one request, first byte to last (at most a day, :data:`MAX_TIMEOUT`).
        max_retries: retries per judgement on timeouts, connection errors, 429 and 5xx (at most :data:`MAX_RETRIES`).
        max_in_flight: judge requests open at once, over every env sharing this judge (at most :data:`MAX_IN_FLIGHT`).
        deadline: seconds one whole judgement may take, retries and backoff included (default:
            ``timeout * (max_retries + 1) + 10``, at most a week, :data:`MAX_DEADLINE`); past it the verdict is an error.
        cache: a :class:`VerdictCache`, a SQLite file path for one, or None for an in-memory cache.
        temperature: sampling temperature of the judge's reply.
        max_tokens: the most tokens the judge's reply may take.
        max_text_chars: the task, the reference and the answer are each cut to this many characters.
        prompt: the prompt builder (default :func:`~gem_core.judge.prompt.build_messages`, the fenced prompt).
        transport: the httpx transport under the client (tests).

    Raises:
        DependencyNotInstalled: if ``openai`` is not installed (the ``judge`` extra).
        InvalidArgument: if ``model`` is empty, ``base_url`` is not an http(s) URL, or an option is of the wrong
            kind or out of its bounds (the message names it and its ``--judge-*`` flag).
    """

    def __init__(
        self,
        base_url: str,
        model: str,
        *,
        api_key: str | None = None,
        timeout: float = 30.0,
        max_retries: int = 2,
        max_in_flight: int = 8,
        deadline: float | None = None,
        cache: VerdictCache | str | os.PathLike | None = None,
        temperature: float = 0.0,
        max_tokens: int = 512,
        max_text_chars: int = 20_000,
        prompt: PromptBuilder = build_messages,
        transport: Any = None,
    ):
        if not isinstance(base_url, str) or not base_url.startswith(("http://", "https://")):
            raise InvalidArgument(f"Judge base_url must be an http:// or https:// URL such as http://127.0.0.1:8000/v1, got {base_url!r}.")
        if not isinstance(model, str) or not model:
            raise InvalidArgument("Judge needs the judge model's served name (model=..., --judge-model).")
        _check_options(timeout=timeout, deadline=deadline, max_retries=max_retries, max_in_flight=max_in_flight,
                       max_tokens=max_tokens, max_text_chars=max_text_chars, temperature=temperature, prompt=prompt, cache=cache)
        try:
            import openai  # noqa: F401 - checked here so a missing package is one clear error, not a 0 per step
        except ImportError as exc:
            raise DependencyNotInstalled('The judge needs the `openai` package: pip install -e ".[judge]" in the GEM checkout (or pip install openai httpx).') from exc
        self.base_url, self.model = base_url.rstrip("/"), model
        self.api_key, self.timeout, self.max_retries, self.max_in_flight = api_key, float(timeout), int(max_retries), int(max_in_flight)
        self.deadline = float(deadline) if deadline is not None else min(self.timeout * (self.max_retries + 1) + 10.0, MAX_DEADLINE)
        self.cache = cache if isinstance(cache, VerdictCache) else VerdictCache(cache)
        self.cache.check()  # a cache that can never work is refused now, not paid as 0 on every step
        self.temperature, self.max_tokens, self.max_text_chars = float(temperature), int(max_tokens), int(max_text_chars)
        self.prompt, self.transport = prompt, transport
        self.calls = 0  # judge requests made (cache misses that reached the endpoint)
        self._lock = threading.Lock()
        self._loop_thread: LoopThread | None = None
        self._endpoint: Any = None
        self._pid = os.getpid()

    # -- the judge's own event loop -----------------------------------------------------------------

    def _running_loop(self) -> LoopThread:
        with self._lock:
            if self._pid != os.getpid():  # a forked child: the parent's loop thread does not exist here
                self._loop_thread = self._endpoint = None
                self._pid = os.getpid()
            if self._loop_thread is None:
                self._loop_thread = LoopThread(f"gem-judge-{self.model}")
            return self._loop_thread

    def _submit(self, task: str, answer: str, rubric: Rubric, reference: str | None) -> concurrent.futures.Future:
        return self._running_loop().submit(self._bounded(task, answer, rubric, reference))

    # -- judging ----------------------------------------------------------------------------------

    def judge(self, task: str, answer: str, *, rubric: Rubric | None = None, reference: str | None = None) -> Verdict:
        """Score ``answer`` to ``task`` (blocking; at most about ``deadline`` seconds)."""
        rubric = Rubric.coerce(rubric)
        future = self._submit(task, answer, rubric, reference)
        try:
            return future.result(timeout=self.deadline + 5.0)
        except concurrent.futures.TimeoutError:
            future.cancel()
            return self._failed(rubric, f"judge: no verdict within {self.deadline:g} s", "")

    async def ajudge(self, task: str, answer: str, *, rubric: Rubric | None = None, reference: str | None = None) -> Verdict:
        """:meth:`judge` for async code: awaits the judge's loop without blocking the caller's."""
        rubric = Rubric.coerce(rubric)
        return await asyncio.wrap_future(self._submit(task, answer, rubric, reference))

    def _redact(self, text: str | None) -> str | None:
        """``text`` without this judge's secrets: its ``api_key`` and any password in the URL's user info.
        Every message the judge builds (errors, raw replies) goes through here."""
        return redact(text, self.api_key, self.base_url)

    def _failed(self, rubric: Rubric, error: str, key: str, raw: str | None = None, truncated: bool = False) -> Verdict:
        return Verdict(
            0.0, raw=self._redact(raw), error=self._redact(error), model=self.model, rubric_digest=rubric.digest, key=key, truncated=truncated
        )

    async def _bounded(self, task: str, answer: str, rubric: Rubric, reference: str | None) -> Verdict:
        try:
            return await asyncio.wait_for(self._judge(task, answer, rubric, reference), self.deadline)
        except asyncio.TimeoutError:
            return self._failed(rubric, f"judge: no verdict within {self.deadline:g} s (timeouts, retries or rate limiting)", "")
        except Exception as exc:  # noqa: BLE001 - a judge failure is a reward of 0, never a crash
            return self._failed(rubric, f"judge: {type(exc).__name__}: {exc}", "")

    def _cut(self, text: Any) -> tuple[str, bool]:
        text = text if isinstance(text, str) else str(text)
        # a lone surrogate cannot be sent as UTF-8 JSON; it reaches the judge as U+FFFD
        text = text.encode("utf-8", "surrogatepass").decode("utf-8", "replace") if not text.isascii() else text
        return (text[: self.max_text_chars], True) if len(text) > self.max_text_chars else (text, False)

    async def _judge(self, task: str, answer: str, rubric: Rubric, reference: str | None) -> Verdict:
        (task, cut_task), (answer, cut_answer) = self._cut(task), self._cut(answer)
        cut_reference = False
        if reference is not None:
            reference, cut_reference = self._cut(reference)
        truncated = cut_task or cut_answer or cut_reference
        key = verdict_key(self.model, rubric.digest, PROMPT_VERSION, task, reference, answer)
        cached = self.cache.get(key)
        if cached is not None and not echoes_answer(cached, answer):
            try:
                parsed = parse_verdict(cached, rubric)
                return Verdict(parsed.reward, parsed.scores, parsed.reason, cached, None, True, self.model, rubric.digest, PROMPT_VERSION, key, truncated)
            except VerdictError:
                pass  # a cache entry that no longer parses is judged again
        from gem_core.eval.openai_client import EndpointError

        nonce = new_nonce(task, answer, reference or "")
        messages = self.prompt(rubric, task, answer, reference, nonce)
        self.calls += 1
        try:
            reply = await (await self._chat_endpoint()).chat(messages, max_tokens=self.max_tokens, temperature=self.temperature)
        except EndpointError as exc:
            from gem_core.transport.http_limits import ResponseTooLarge

            if any(isinstance(cause, ResponseTooLarge) for cause in causes(exc)):  # an answer, but too large to be a verdict
                return self._failed(
                    rubric, f"judge: the judge's answer is over the cap of {_MAX_ANSWER_BYTES} bytes, so it is no verdict "
                    "(a verdict is a short JSON object; check --judge-model and its max tokens)", key, truncated=truncated,
                )
            message = str(exc).replace("--base-url", "--judge-url").replace("--model", "--judge-model")
            return self._failed(rubric, f"judge: {message}", key, truncated=truncated)
        try:
            parsed = parse_verdict(reply.text, rubric)
        except VerdictError as exc:
            return self._failed(rubric, f"judge: malformed verdict: {exc}", key, raw=reply.text[:4000], truncated=truncated)
        if echoes_answer(reply.text, answer):
            return self._failed(
                rubric, "judge: the judge's verdict is written out in the answer being graded (a verdict the answer planted "
                "and the judge repeated); refused, no reward", key, raw=reply.text[:4000], truncated=truncated,
            )
        self.cache.put(key, self.model, reply.text)
        return Verdict(parsed.reward, parsed.scores, parsed.reason, reply.text, None, False, self.model, rubric.digest, PROMPT_VERSION, key, truncated)

    async def _chat_endpoint(self) -> Any:
        if self._endpoint is None:  # built on the judge's loop, which its connection pool belongs to
            from gem_core.eval.openai_client import ChatEndpoint

            self._endpoint = ChatEndpoint(
                self.base_url, self.model, api_key=self.api_key, timeout=self.timeout, max_retries=self.max_retries,
                max_in_flight=self.max_in_flight, transport=self.transport, max_response_bytes=_MAX_ANSWER_BYTES,
            )
        return self._endpoint

    # -- lifecycle --------------------------------------------------------------------------------

    def close(self) -> None:
        """Close the connections and stop the judge's thread (a later call starts them again)."""
        with self._lock:
            loop_thread, endpoint = self._loop_thread, self._endpoint
            self._loop_thread = self._endpoint = None
        if loop_thread is None or self._pid != os.getpid():
            return
        if endpoint is not None:
            try:
                loop_thread.submit(endpoint.aclose()).result(timeout=5.0)
            except Exception:  # noqa: BLE001 - closing is best effort
                pass
        loop_thread.stop(timeout=5.0)

    def __reduce__(self):  # a copy in another process (a Ray actor, a process worker) opens its own connections
        kwargs = dict(
            api_key=self.api_key, timeout=self.timeout, max_retries=self.max_retries, max_in_flight=self.max_in_flight,
            deadline=self.deadline, cache=self.cache, temperature=self.temperature, max_tokens=self.max_tokens,
            max_text_chars=self.max_text_chars, prompt=self.prompt,
        )
        return (_rebuild_judge, (self.base_url, self.model, kwargs))

    def __repr__(self) -> str:
        return f"Judge({self._redact(self.base_url)!r}, model={self.model!r})"


_NUMBER = (int, float)
#: The bounds of the judge's waits and counts, as ``gem eval``'s own ``--timeout``, ``--retries`` and
#: ``--max-in-flight``: a blocking :meth:`Judge.judge` waits about ``deadline``, and past what the clock
#: can hold that wait raises (OverflowError) instead of giving a verdict.
MAX_TIMEOUT = 86_400.0
MAX_RETRIES = 100
MAX_IN_FLIGHT = 10_000
#: The longest whole judgement (a week); the default deadline is cut to it.
MAX_DEADLINE = 604_800.0
#: The largest judge answer read (a verdict is a few hundred characters).
_MAX_ANSWER_BYTES = 1 << 20


def _check_options(**given: Any) -> None:
    """Refuse a judge option that can never work, naming the argument (and its flag) and the fix."""
    flags = {"timeout": "--judge-timeout", "max_retries": "--judge-retries", "max_in_flight": "--judge-max-in-flight", "cache": "--judge-cache"}

    def refuse(name: str, rule: str) -> None:
        flag = f" ({flags[name]})" if name in flags else ""
        raise InvalidArgument(f"Judge {name}={given[name]!r}{flag}: must be {rule}.")

    def real(value: Any) -> bool:
        return isinstance(value, _NUMBER) and not isinstance(value, bool) and math.isfinite(value)

    if not (real(given["timeout"]) and 0 < given["timeout"] <= MAX_TIMEOUT):
        refuse("timeout", f"a finite number of seconds > 0, at most {MAX_TIMEOUT:g}")
    if given["deadline"] is not None and not (real(given["deadline"]) and 0 < given["deadline"] <= MAX_DEADLINE):
        refuse("deadline", f"None or a finite number of seconds > 0, at most {MAX_DEADLINE:g}")
    highs = {"max_retries": MAX_RETRIES, "max_in_flight": MAX_IN_FLIGHT}
    for name, low in (("max_retries", 0), ("max_in_flight", 1), ("max_tokens", 1), ("max_text_chars", 1)):
        value, high = given[name], highs.get(name)
        if isinstance(value, bool) or not isinstance(value, int) or value < low or (high is not None and value > high):
            refuse(name, f"a whole number >= {low}" + (f", at most {high}" if high is not None else ""))
    if not (real(given["temperature"]) and given["temperature"] >= 0):
        refuse("temperature", "a finite number >= 0")
    if not callable(given["prompt"]):
        refuse("prompt", "a callable (rubric, task, answer, reference, nonce) -> messages, such as build_messages")
    if given["cache"] is not None and not isinstance(given["cache"], (VerdictCache, str, os.PathLike)):
        refuse("cache", "a VerdictCache, a SQLite file path or None")


def redact(text: str | None, api_key: str | None, base_url: str | None = None) -> str | None:
    """``text`` with ``api_key`` and the user info of ``base_url`` (and of any URL in ``text``) masked as ``***``."""
    if not text:
        return text
    password = urlsplit(base_url).password if base_url else None
    return redact_user_info(text, api_key, password)


def _rebuild_judge(base_url: str, model: str, kwargs: dict[str, Any]) -> Judge:
    return Judge(base_url, model, **kwargs)
