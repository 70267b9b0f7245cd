"""An OpenAI-compatible endpoint on loopback that answers agent programs with the policy being trained.

An agent that already talks to an OpenAI-style URL (its own loop, mini-swe-agent, an Agents SDK graph) is
pointed at ``http://127.0.0.1:PORT/v1`` with a per-episode API key, or at ``.../episodes/KEY/v1`` with any
key. Each ``/v1/chat/completions`` call is rendered with the policy tokenizer's chat template, sampled by
any :class:`~gem_core.rollout.policy.Policy`, and recorded in the episode's
:class:`~gem_core.agent.episode.AgentEpisode`, which stitches the calls into token trajectories.
``/v1/completions`` takes a raw prompt (text or token ids) and extends a branch when the prompt starts
with an earlier call's prompt and completion.

Errors are OpenAI-shaped (``{"error": {"message", "type", "code"}}``) so clients raise them as such:
400 malformed request (or one the policy cannot honour: ``n`` other than 1, ``stop`` sequences, a ``seed`` unless the
trainer's sampling wins, ``/v1/completions``' ``echo`` and ``suffix``), 401 missing
or unknown key, 404 unknown episode path or route, 405 a method a route does not take, 409 the episode is over,
413 body over ``max_body_bytes``, 408 a body too slow to arrive, 429 an episode over ``max_open_requests``,
502 the policy failed or overran ``call_timeout``, 503 all agents together over ``max_connections``.
A call whose client disconnects before its answer (an HTTP client's timeout, before its retry) is dropped, waiting
for its turn or mid-sample: nobody reads its answer, so it is neither sampled on nor recorded, and the retry takes
its place.
``stream=true`` is answered as server-sent events holding the whole answer in one chunk. Every request is
bounded (body size, body time, headers and connections through
:class:`~gem_core.serve.connections.ConnectionGuard`), and the server listens on 127.0.0.1 only.

Every agent connects from 127.0.0.1, so a cap per client address would let one agent's flood refuse all the
others: each episode's open requests are capped instead (its excess answered 429 at once, its connection
closed), and the guard's total cap is the last resort.

Calls of one episode are served one at a time in arrival order (its lock); calls of different episodes
run concurrently, on the endpoint's own event loop thread, so one policy object serves them all (a
:class:`~gem_core.rollout.policy.BatchingPolicy` batches their turns).
"""

from __future__ import annotations

import asyncio
import collections
import dataclasses
import json
import secrets
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

from gem_core.agent.episode import AgentCall, AgentEpisode, EpisodeOver, MessageError, normalize_messages
from gem_core.errors import InvalidArgument, InvalidArgumentType, UsageError, refuse_unknown_keywords
from gem_core.protocols import Tokenizer
from gem_core.rollout.policy import Generation, Policy, SamplingParams, default_stop_token_ids
from gem_core.serve.asgi import RequestError, json_bytes, json_route
from gem_core.serve.loopback import LoopbackServer, check_port
from gem_core.tools.calls import call_format_for, parse_native_calls
from gem_core.tools.tool import check_count_from_zero
from gem_core.vector.calls import check_amount, check_count

__all__ = ["AgentEndpoint", "AgentEndpointConfig"]

T = TypeVar("T")


@dataclass(frozen=True)
class AgentEndpointConfig:
    """Limits and defaults of an :class:`AgentEndpoint`.

    Raises:
        InvalidArgument: a value is out of range (a count below 1, a time not above 0, an empty model name).
        InvalidArgumentType: a keyword it does not take, or a value of the wrong kind.
    """

    max_body_bytes: int = 8 << 20
    """Largest request body in bytes (an agent resends its whole history each call); larger is a 413."""
    body_timeout: float = 30.0
    """Seconds a client has to send a request body (408 after)."""
    call_timeout: float = 600.0
    """Seconds one policy call may take (502 after; the episode goes on)."""
    default_max_tokens: int = 1024
    """Tokens sampled per call when the request gives no ``max_tokens``."""
    max_tokens_cap: int = 32768
    """Most tokens one call may ask for (a larger ``max_tokens`` is lowered to this)."""
    chat_template_kwargs: dict = field(default_factory=dict)
    """Extra chat-template variables (e.g. ``{"enable_thinking": False}``), as the trainer passes them."""
    model_name: str = "gem-policy"
    """The model name reported in answers and ``/v1/models`` (requests may name any model)."""
    max_closed_keys: int = 4096
    """Ended episodes remembered, so their late calls get 409 "over" rather than 401 "unknown"."""
    max_open_requests: int = 16
    """Requests one episode may have open at once (its calls are answered one at a time, the rest wait); more are
    answered 429 at once and their connections closed, so one agent cannot hold the connections all agents share."""
    max_connections: int = 1024
    """Connections all agents together may hold (lowered to fit the open-file limit); more are answered 503. The
    last resort: ``max_open_requests`` bounds each episode first."""
    sampling: SamplingParams | None = None
    """The trainer's sampling, which then wins over the agent's: its temperature, top-p and top-k replace the
    request's (the samples stay on-policy whatever the agent asks for), a request's ``seed`` is ignored like its
    temperature, and its ``max_new_tokens`` caps the request's ``max_tokens``. None: each request's own (an agent
    evaluated, not trained; a ``seed`` is then refused, since the policy samples the calls of all episodes together)."""

    def __new__(cls, *args: Any, **kwargs: Any) -> AgentEndpointConfig:
        refuse_unknown_keywords(cls, kwargs)
        return super().__new__(cls)

    def __post_init__(self) -> None:
        # A bad value would otherwise surface only when an agent calls: a 500, or a 502 on every call.
        owner = "AgentEndpointConfig: "
        for name in ("max_body_bytes", "default_max_tokens", "max_tokens_cap", "max_open_requests", "max_connections"):
            check_count(owner + name, getattr(self, name))
        for name in ("body_timeout", "call_timeout"):
            check_amount(owner + name, getattr(self, name), "seconds")
        check_count_from_zero(owner + "max_closed_keys", self.max_closed_keys)
        kwargs = self.chat_template_kwargs
        if not isinstance(kwargs, Mapping) or not all(isinstance(key, str) for key in kwargs):
            raise InvalidArgumentType(f"{owner}chat_template_kwargs={kwargs!r:.80} must be a dict of template variable names to values.")
        if not isinstance(self.model_name, str) or not self.model_name:
            raise InvalidArgument(f"{owner}model_name={self.model_name!r:.80} must be a non-empty string.")
        if not isinstance(self.sampling, (SamplingParams, type(None))):
            raise InvalidArgumentType(f"{owner}sampling={self.sampling!r:.80} must be a gem_core.rollout.SamplingParams, or None.")


def _error_body(status: int, message: str, code: str) -> bytes:
    kind = {401: "authentication_error", 404: "not_found_error", 409: "conflict_error", 429: "rate_limit_error"}.get(status, "invalid_request_error")
    if status >= 500:
        kind = "server_error"
    return json_bytes({"error": {"message": message, "type": kind, "code": code}})


def _error(status: int, message: str, code: str, headers: dict[str, str] | None = None) -> Any:
    from starlette.responses import Response

    return Response(_error_body(status, message, code), status, headers=headers, media_type="application/json")


def _guard_error_body(status: int, detail: str) -> bytes:
    """The connection guard's own 503 and 408, OpenAI-shaped like every other answer (clients raise them as such)."""
    return _error_body(status, detail, {503: "too_many_connections", 408: "header_timeout"}.get(status, "error"))


_REQUEST_ERROR_CODES = {400: "invalid_request", 401: "invalid_api_key", 404: "unknown_episode", 408: "body_timeout",
                        413: "request_too_large", 499: "client_disconnected", 502: "policy_error"}


def _bearer(request: Any) -> str:
    header = request.headers.get("authorization", "")
    return header[7:].strip() if header[:7].lower() == "bearer " else ""


def _error_response(error: Exception) -> Any:
    """OpenAI's error body for a failed request; a bug here fails this request only (a 500)."""
    if isinstance(error, RequestError):
        return _error(error.status, str(error), _REQUEST_ERROR_CODES.get(error.status, "error"))
    if isinstance(error, EpisodeOver):
        return _error(409, str(error), "episode_over")
    if isinstance(error, MessageError):
        return _error(400, str(error), "invalid_messages")
    return _error(500, f"the endpoint raised {type(error).__name__}: {error}", "internal_error")


def _number(body: dict, name: str, default: float, low: float, high: float) -> float:
    value = body.get(name)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not low <= value <= high:
        raise RequestError(400, f"'{name}' must be a number from {low:g} to {high:g}")
    return float(value)


def _flag(value: Any, name: str) -> None:
    if value is not None and not isinstance(value, bool):
        raise RequestError(400, f"{name} must be true, false or null")


def _check_answer_options(body: dict, *, logprobs_count: bool) -> None:
    """Check the options read only once the call is sampled (how its answer is sent): one found bad after would
    fail the request with the call already recorded, costing the episode a turn. ``logprobs_count``: ``logprobs``
    is /v1/completions' count of alternatives per token (0 to 5), not chat's true or false."""
    _flag(body.get("stream"), "'stream'")
    options = body.get("stream_options")
    if options is not None and not isinstance(options, dict):
        raise RequestError(400, "'stream_options' must be an object like {\"include_usage\": true}, or null")
    _flag((options or {}).get("include_usage"), "'include_usage' in 'stream_options'")
    logprobs = body.get("logprobs")
    if not logprobs_count:
        _flag(logprobs, "'logprobs'")
    elif logprobs is not None and not (isinstance(logprobs, int) and 0 <= logprobs <= 5):
        raise RequestError(400, "'logprobs' must be a whole number from 0 to 5, or null")


async def _disconnect(receive: Any) -> None:
    """Returns once the client is gone (the request's body is read: what comes next is its disconnect)."""
    while (await receive())["type"] != "http.disconnect":
        pass


async def _while_connected(request: Any, work: Awaitable[T]) -> T:
    """``work``'s result, or ``work`` cancelled and a 499 if the client disconnects first.

    An HTTP client that gives up on a call (its timeout) and retries never reads the first answer; the server
    is not told otherwise, so the call went on waiting for its turn and sampling, was recorded as a turn, and
    the retry waited behind it (then forked as a repeated call, or was refused at the turn limit).
    """
    job = asyncio.ensure_future(work)
    gone = asyncio.ensure_future(_disconnect(request.receive))
    try:
        await asyncio.wait((job, gone), return_when=asyncio.FIRST_COMPLETED)
    except BaseException:  # the server is stopping: the call's own cleanup runs in its cancellation
        job.cancel()
        raise
    finally:
        gone.cancel()
    disconnected = gone.done() and not gone.cancelled() and gone.exception() is None  # (a receive that failed is no answer)
    if disconnected and not job.done():
        job.cancel()
        await asyncio.wait((job,))  # its call abandoned (not recorded) and its lock released, for the retry
        raise RequestError(499, "the client disconnected before its answer; the call was dropped, not recorded")
    return await job


def _within(sampling: SamplingParams, call: AgentCall) -> SamplingParams:
    """``sampling`` lowered to what the episode's response budget leaves this call."""
    if call.max_new_tokens is None or call.max_new_tokens >= sampling.max_new_tokens:
        return sampling
    return dataclasses.replace(sampling, max_new_tokens=call.max_new_tokens)


def _event_stream(payload: dict[str, Any], body: dict[str, Any]) -> bytes:
    """A whole answer as server-sent events (one chunk, then ``[DONE]``) for clients that ask to stream.

    The answer is sampled in full before it is sent (the episode records it whole); clients that only
    know how to stream (Agents SDK, LangGraph defaults) read it like any stream.
    """
    choice = payload["choices"][0]
    if payload["object"] == "chat.completion":
        delta = dict(choice["message"])
        if "tool_calls" in delta:
            delta["tool_calls"] = [{"index": i, **call} for i, call in enumerate(delta["tool_calls"])]
        chunk_choice = {"index": 0, "delta": delta, "finish_reason": choice["finish_reason"]}
        kind = "chat.completion.chunk"
    else:
        chunk_choice, kind = dict(choice), "text_completion"
    chunk = {key: payload[key] for key in ("id", "created", "model")} | {"object": kind, "choices": [chunk_choice]}
    events = [chunk]
    if (body.get("stream_options") or {}).get("include_usage"):
        events.append({**{key: payload[key] for key in ("id", "created", "model")}, "object": kind, "choices": [], "usage": payload["usage"]})
    return b"".join(b"data: " + json_bytes(event) + b"\n\n" for event in events) + b"data: [DONE]\n\n"


class AgentEndpoint:
    """The OpenAI-compatible server for agent episodes; see the module docstring.

    Args:
        policy: samples every call (any :class:`~gem_core.rollout.policy.Policy`); used only on the
            endpoint's event loop.
        tokenizer: the policy's tokenizer with its chat template.
        config: limits and defaults.
        port: the loopback port (0 picks a free one; :attr:`port` says which).

    Use as a context manager, or :meth:`start` and :meth:`stop`::

        with AgentEndpoint(policy, tokenizer) as endpoint:
            episode = endpoint.open_episode(max_turns=20)
            # run the agent with OPENAI_BASE_URL=endpoint.base_url, OPENAI_API_KEY=episode.key
            trajectories = endpoint.close_episode(episode.key).trajectories(reward)

    Raises:
        InvalidArgument: ``port`` is not a whole number from 0 to 65535.
    """

    def __init__(self, policy: Policy, tokenizer: Tokenizer, config: AgentEndpointConfig = AgentEndpointConfig(), *, port: int = 0):
        self.policy = policy
        self.tokenizer = tokenizer
        self.config = config
        self.port = check_port(port, "AgentEndpoint")
        self.episodes: dict[str, AgentEpisode] = {}
        self._closed: dict[str, str] = {}
        self._locks: dict[str, asyncio.Lock] = {}
        self._sampling_now: dict[str, asyncio.Future] = {}
        self._open_requests: collections.Counter[str] = collections.Counter()
        self._stop_ids = default_stop_token_ids(tokenizer)
        self._call_format = call_format_for(tokenizer)
        self._http: LoopbackServer | None = None
        self._refusing: str | None = None  # why no episode opens (a batch cancelled), till the next start

    # -- episodes (thread-safe: each runs on the endpoint's loop) --------------------------------

    def _on_loop(self, function: Any) -> Any:
        if self._http is None:
            return function()

        async def call() -> Any:
            return function()

        return self._http.run(call)

    def open_episode(self, key: str | None = None, *, max_turns: int | None = None, max_response_tokens: int | None = None) -> AgentEpisode:
        """A new episode reachable with ``key`` (a fresh random key when None) as API key or URL path.

        ``max_turns`` and ``max_response_tokens`` bound it (:class:`~gem_core.agent.episode.AgentEpisode`).

        Raises:
            ValueError: ``key`` is in use, or is not URL-safe.
            InvalidArgument: ``max_turns`` or ``max_response_tokens`` is not a positive whole number or None.
            UsageError: the endpoint is not serving (never started, or stopped), or a batch that owns it was cancelled:
                no agent could reach the episode, and a run of one would be an empty episode.
        """
        key = key or secrets.token_urlsafe(18)
        if not key.replace("-", "").replace("_", "").isalnum():
            raise MessageError(f"episode key {key!r} must hold only letters, digits, '-' and '_' (it is a URL path segment)")
        episode = AgentEpisode(
            key, self.tokenizer, chat_template_kwargs=self.config.chat_template_kwargs, max_turns=max_turns,
            max_response_tokens=max_response_tokens,
        )
        if self._http is None:
            raise UsageError("AgentEndpoint is not serving, so no agent could reach an episode of it: start the endpoint "
                             "first: `with AgentEndpoint(...) as endpoint:` (or endpoint.start()).")

        def add() -> AgentEpisode:
            if self._refusing is not None:
                raise UsageError(f"AgentEndpoint opens no new episode: {self._refusing}")
            if key in self.episodes or key in self._closed:
                raise MessageError(f"episode key {key!r} is already in use; open each episode with a new key")
            self.episodes[key] = episode
            self._locks[key] = asyncio.Lock()
            return episode

        return self._on_loop(add)

    def close_episode(self, key: str, reason: str = "closed by its owner", *, truncated: bool = False) -> AgentEpisode:
        """End episode ``key`` (later calls get 409) and return it for its trajectories.

        Raises:
            KeyError: no open episode has this key.
        """

        def remove() -> AgentEpisode:
            episode = self.episodes.pop(key)
            self._locks.pop(key, None)
            episode.end(reason, truncated=truncated)
            sampling = self._sampling_now.pop(key, None)
            if sampling is not None:  # the agent is gone or over its limit: stop sampling for it
                sampling.cancel()
            self._closed[key] = episode.ended or reason
            while len(self._closed) > self.config.max_closed_keys:
                self._closed.pop(next(iter(self._closed)))
            return episode

        return self._on_loop(remove)

    def _end_every_episode(self, reason: str) -> None:
        """End every open episode and open no new one until the next :meth:`start` (a cancelled batch: each run's
        program is killed within a poll, and a run still in its setup finds its episode ended or none to open)."""

        def end() -> None:
            self._refusing = reason
            for episode in list(self.episodes.values()):
                episode.end(reason, truncated=True)

        self._on_loop(end)

    @property
    def base_url(self) -> str:
        """The OpenAI base URL (``http://127.0.0.1:PORT/v1``); the API key picks the episode."""
        return f"http://127.0.0.1:{self.port}/v1"

    def episode_url(self, key: str) -> str:
        """A base URL that picks episode ``key`` by its path (for clients whose API key is fixed)."""
        return f"http://127.0.0.1:{self.port}/episodes/{key}/v1"

    # -- serving -------------------------------------------------------------------------------

    def start(self) -> AgentEndpoint:
        """Listen on 127.0.0.1 and serve on a thread of the endpoint's own; returns self.

        Raises:
            StartFailed: the port is in use (the message suggests ``port=0``), or the server did not listen within 30 s.
        """
        if self._http is None:
            http = LoopbackServer(
                "gem-agent-endpoint", self.app(), port=self.port, body_timeout=self.config.body_timeout,
                max_connections=self.config.max_connections, error_body=_guard_error_body,
                max_connections_setting="AgentEndpointConfig.max_connections",
            )
            self.port = http.start()
            self._http = http
            self._refusing = None
        return self

    def stop(self) -> None:
        """Stop serving (open episodes stay readable); safe to call twice."""
        if self._http is not None:
            self._http.stop()
            self._http = None

    def __enter__(self) -> AgentEndpoint:
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    # -- the app -------------------------------------------------------------------------------

    def _episode(self, request: Any) -> AgentEpisode:
        path_key = request.path_params.get("key")
        bearer = _bearer(request)
        if path_key is not None:
            if path_key in self._closed:
                raise EpisodeOver(f"episode {path_key!r} is over ({self._closed[path_key]}); start a new episode")
            if path_key not in self.episodes:
                raise RequestError(404, f"no episode {path_key!r} at this endpoint; open one with AgentEndpoint.open_episode()")
            if bearer and bearer != path_key and (bearer in self.episodes or bearer in self._closed):
                raise RequestError(400, "the URL path and the API key name two different episodes; use one of them")
            return self.episodes[path_key]
        if not bearer:
            raise RequestError(401, "no API key: send the episode's key as 'Authorization: Bearer KEY' (OPENAI_API_KEY)")
        if bearer in self._closed:
            raise EpisodeOver(f"episode {bearer!r} is over ({self._closed[bearer]}); start a new episode")
        if bearer not in self.episodes:
            raise RequestError(401, "unknown episode key: use the key AgentEndpoint.open_episode() returned (OPENAI_API_KEY)")
        return self.episodes[bearer]

    def _sampling(self, body: dict) -> SamplingParams:
        n = body.get("n")  # a null is the default, 1
        if n is not None and (isinstance(n, bool) or n != 1):
            raise RequestError(400, "'n' must be 1 (or null): each call samples one answer")
        if body.get("seed") is not None and self.config.sampling is None:  # the trainer's sampling ignores it, as the temperature
            raise RequestError(
                400, "'seed' is not supported: the policy samples the calls of all episodes together, so a seed cannot make "
                "one call's sample reproducible; leave 'seed' out",
            )
        if body.get("stop") not in (None, "", []):  # ignored, the answer ran on past it (a ReAct agent's "Observation:")
            raise RequestError(
                400, "'stop' sequences are not supported: each call samples until the chat template's end-of-turn token, "
                "and an answer cut at a sequence would be trained on as sampled, past what the agent read; leave 'stop' out "
                "and cut the answer in the agent",
            )
        name = "max_completion_tokens" if body.get("max_completion_tokens") is not None else "max_tokens"  # a null is not given
        limit = body.get(name)
        if limit is None:
            limit = self.config.default_max_tokens
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
            raise RequestError(400, f"'{name}' must be a positive integer")
        temperature, top_p = _number(body, "temperature", 1.0, 0.0, 100.0), _number(body, "top_p", 1.0, 0.0, 1.0)
        trainer = self.config.sampling
        if trainer is not None:
            return SamplingParams(
                max_new_tokens=min(limit, self.config.max_tokens_cap, trainer.max_new_tokens), temperature=trainer.temperature,
                top_p=trainer.top_p, top_k=trainer.top_k, stop_token_ids=list(self._stop_ids),
            )
        return SamplingParams(
            max_new_tokens=min(limit, self.config.max_tokens_cap), temperature=temperature, top_p=top_p,
            stop_token_ids=list(self._stop_ids),
        )

    async def _generate(self, episode: AgentEpisode, prompt_ids: list[int], sampling: SamplingParams) -> Generation:
        task = asyncio.ensure_future(asyncio.wait_for(self.policy.generate(list(prompt_ids), sampling), self.config.call_timeout))
        self._sampling_now[episode.key] = task
        try:
            return await task
        except asyncio.CancelledError:
            if task.cancelled() and episode.ended is not None:  # cancelled by close_episode, not by a shutdown
                raise EpisodeOver(f"episode {episode.key!r} ended while this call was sampled ({episode.ended})") from None
            raise
        except asyncio.TimeoutError:
            raise RequestError(502, f"the policy took over {self.config.call_timeout:g} s for this call") from None
        except (RequestError, EpisodeOver):
            raise
        except Exception as error:
            raise RequestError(502, f"the policy failed: {type(error).__name__}: {error}") from None
        finally:
            if self._sampling_now.get(episode.key) is task:
                del self._sampling_now[episode.key]

    def _text(self, generation: Generation) -> str:
        ids = list(generation.token_ids)
        while ids and ids[-1] in self._stop_ids:
            ids.pop()
        return self.tokenizer.decode(ids, skip_special_tokens=True)

    def _reply(self, text: str, tools: Any) -> tuple[dict[str, Any], list[dict[str, Any]]]:
        """(the reply as the episode records it, the tool calls as OpenAI sends them)."""
        calls = []
        content = text
        if tools and self._call_format is not None:
            found = [c for c in parse_native_calls(self._call_format, text) if c.error is None]
            for call in sorted(found, key=lambda c: c.span[0], reverse=True):
                content = content[: call.span[0]] + content[call.span[1] :]
            calls = sorted(found, key=lambda c: c.span[0])
            content = content.strip() if calls else content
        reply: dict[str, Any] = {"role": "assistant", "content": content}
        wire = []
        if calls:
            # The arguments as sent, not as parsed: JSON has no NaN or infinity (sent as null), and the agent's next
            # call, echoing its reply, must match the reply recorded, or the episode forks.
            sent = [json_bytes(c.arguments).decode() for c in calls]
            reply["tool_calls"] = [
                {"id": f"call_{secrets.token_hex(6)}", "type": "function", "function": {"name": c.name, "arguments": json.loads(arguments)}}
                for c, arguments in zip(calls, sent, strict=True)
            ]
            wire = [
                {"id": c["id"], "type": "function", "function": {"name": c["function"]["name"], "arguments": arguments}}
                for c, arguments in zip(reply["tool_calls"], sent, strict=True)
            ]
        return reply, wire

    def _logprobs(self, generation: Generation) -> dict[str, Any]:
        tokens = self.tokenizer.convert_ids_to_tokens(list(generation.token_ids))
        values = generation.logprobs or [0.0] * len(tokens)
        return {"content": [{"token": t, "logprob": lp, "bytes": None, "top_logprobs": []} for t, lp in zip(tokens, values, strict=True)]}

    async def _answer(
        self, request: Any, episode: AgentEpisode, begin: Callable[[], AgentCall], sampling: SamplingParams,
        record: Callable[[AgentCall, Generation, str], T],
    ) -> tuple[AgentCall, Generation, T]:
        """One call of ``episode`` under its lock: begun, sampled, recorded (``record``, given the text); abandoned, not
        recorded, if the sampling fails or the client disconnects first (:func:`_while_connected`)."""

        async def answer() -> tuple[AgentCall, Generation, T]:
            async with self._locks[episode.key]:
                call = begin()
                try:
                    generation = await self._generate(episode, call.prompt_ids, _within(sampling, call))
                except BaseException:
                    episode.abandon_call(call)
                    raise
                return call, generation, record(call, generation, self._text(generation))

        return await _while_connected(request, answer())

    async def _chat(self, request: Any, body: Any) -> dict[str, Any]:
        if not isinstance(body, dict):
            raise RequestError(400, "expected a JSON object like {'model': ..., 'messages': [...]}")
        messages = normalize_messages(body.get("messages"))
        tools = body.get("tools") or None
        if tools is not None and not isinstance(tools, list):
            raise RequestError(400, "'tools' must be a list of tool definitions")
        _check_answer_options(body, logprobs_count=False)
        sampling = self._sampling(body)
        episode = self._episode(request)

        def record(call: AgentCall, generation: Generation, text: str) -> tuple[dict[str, Any], list[dict[str, Any]]]:
            reply, wire_calls = self._reply(text, tools)
            episode.finish_call(call, generation, reply, text)
            return reply, wire_calls

        call, generation, (reply, wire_calls) = await self._answer(
            request, episode, lambda: episode.begin_call(messages, tools), sampling, record
        )
        message: dict[str, Any] = {"role": "assistant", "content": reply["content"] if not wire_calls or reply["content"] else None}
        if wire_calls:
            message["tool_calls"] = wire_calls
        finish = "tool_calls" if wire_calls else ("length" if generation.finish_reason == "length" else "stop")
        choice: dict[str, Any] = {"index": 0, "message": message, "finish_reason": finish}
        if body.get("logprobs"):
            choice["logprobs"] = self._logprobs(generation)
        return {
            "id": f"chatcmpl-{episode.key[:8]}-{call.index}", "object": "chat.completion", "created": int(time.time()),
            "model": self.config.model_name, "choices": [choice],
            "usage": {"prompt_tokens": len(call.prompt_ids), "completion_tokens": len(generation.token_ids),
                      "total_tokens": len(call.prompt_ids) + len(generation.token_ids)},
        }

    async def _completion(self, request: Any, body: Any) -> dict[str, Any]:
        if not isinstance(body, dict):
            raise RequestError(400, "expected a JSON object like {'model': ..., 'prompt': '...'}")
        prompt = body.get("prompt")
        vocab = len(self.tokenizer)
        if isinstance(prompt, list) and prompt and all(isinstance(t, int) and not isinstance(t, bool) and 0 <= t < vocab for t in prompt):
            pass
        elif not (isinstance(prompt, str) and prompt):
            raise RequestError(400, "'prompt' must be a non-empty string or a list of token ids of this model")
        _flag(body.get("echo"), "'echo'")
        if body.get("echo"):
            raise RequestError(400, "'echo' is not supported: the answer holds the completion only; prepend the prompt in the agent")
        if body.get("suffix") not in (None, ""):
            raise RequestError(400, "'suffix' (fill-in-the-middle) is not supported: each call extends its prompt only; leave 'suffix' out")
        _check_answer_options(body, logprobs_count=True)
        sampling = self._sampling(body)
        episode = self._episode(request)

        def record(call: AgentCall, generation: Generation, text: str) -> str:
            episode.finish_completion(call, generation, text)
            return text

        call, generation, text = await self._answer(request, episode, lambda: episode.begin_completion(prompt), sampling, record)
        choice: dict[str, Any] = {"index": 0, "text": text, "finish_reason": "length" if generation.finish_reason == "length" else "stop"}
        if body.get("logprobs"):
            choice["logprobs"] = {"tokens": self.tokenizer.convert_ids_to_tokens(list(generation.token_ids)),
                                  "token_logprobs": list(generation.logprobs or [])}
        return {
            "id": f"cmpl-{episode.key[:8]}-{call.index}", "object": "text_completion", "created": int(time.time()),
            "model": self.config.model_name, "choices": [choice],
            "usage": {"prompt_tokens": len(call.prompt_ids), "completion_tokens": len(generation.token_ids),
                      "total_tokens": len(call.prompt_ids) + len(generation.token_ids)},
        }

    def _per_episode(self, handle: Any) -> Any:
        """``handle``, with the request's episode found before its body is read and its open requests capped.

        An unknown key is answered at once (a flood of made-up keys holds no connection for its body), and an
        episode's requests past ``max_open_requests`` get 429 with their connections closed, freeing the slots
        every agent shares. Only ``/v1/models`` asked without a key names no episode.
        """
        limit = self.config.max_open_requests

        async def bounded(request: Any) -> Any:
            if request.method == "GET" and request.path_params.get("key") is None and not request.headers.get("authorization"):
                return await handle(request)
            try:
                key = self._episode(request).key
            except Exception as error:  # noqa: BLE001 - answered as the route would answer it
                return _error_response(error)
            if self._open_requests[key] >= limit:
                return _error(
                    429, f"this episode already has {limit} requests open (AgentEndpointConfig.max_open_requests); its calls "
                    "are answered one at a time, so send the next one when an answer comes", "rate_limit_exceeded",
                    headers={"Connection": "close"},
                )
            self._open_requests[key] += 1
            try:
                return await handle(request)
            finally:
                self._open_requests[key] -= 1
                if not self._open_requests[key]:
                    del self._open_requests[key]

        return bounded

    def app(self) -> Any:
        """The Starlette app (built once per :meth:`start`)."""
        from starlette.applications import Starlette
        from starlette.exceptions import HTTPException
        from starlette.routing import Route

        def endpoint(work: Any) -> Any:
            return self._per_episode(json_route(work, max_bytes=self.config.max_body_bytes, timeout=self.config.body_timeout,
                                                error_response=_error_response, stream=_event_stream))

        async def models(request: Any, body: Any) -> dict[str, Any]:
            return {"object": "list", "data": [{"id": self.config.model_name, "object": "model", "owned_by": "gem"}]}

        async def no_route(request: Any, error: HTTPException) -> Any:
            # Starlette's own 404 and 405 are plain text, which OpenAI clients report as an unreadable answer.
            if error.status_code == 405:
                allowed = (error.headers or {}).get("Allow", "")
                return _error(405, f"{request.method} is not allowed here; this route takes {allowed}", "method_not_allowed", error.headers)
            return _error(error.status_code, "no such route: the OpenAI API is at /v1 (chat/completions, completions, models), "
                          "or at /episodes/KEY/v1", "unknown_route" if error.status_code == 404 else "error", error.headers)

        routes = []
        for prefix in ("", "/episodes/{key}"):
            routes += [
                Route(prefix + "/v1/chat/completions", endpoint(self._chat), methods=["POST"]),
                Route(prefix + "/v1/completions", endpoint(self._completion), methods=["POST"]),
                Route(prefix + "/v1/models", endpoint(models), methods=["GET"]),
            ]
        return Starlette(routes=routes, exception_handlers={HTTPException: no_route})

