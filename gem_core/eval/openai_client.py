"""The chat API of OpenAI-compatible servers (vLLM, SGLang, hosted APIs) through the ``openai`` package.

The ``openai`` client does the HTTP work: retries with exponential backoff and jitter on timeouts,
connection errors, 408/409/429 and 5xx answers (honouring ``Retry-After``), and error types per failure.
Two things it does not do are added here:

* **a deadline per request**: httpx's timeouts (and so openai's) bound each read, so a server that
  trickles one byte a second never trips them; :class:`DeadlineTransport` bounds the whole answer.
* **a cap on the answer's decoded size**: httpx inflates each received chunk whole, so a 2 KB answer
  marked ``Content-Encoding: gzip, gzip`` becomes a gigabyte; :class:`DeadlineTransport` decodes the
  body itself under ``max_response_bytes`` (:mod:`gem_core.transport.http_limits`) and refuses stacked encodings.
* **a checked reply**: the SDK builds its response objects without validating them, so a server that
  sends ``"usage": "abc"`` or ``"content": 5`` would surface later as an ``AttributeError``; the reply's
  JSON is checked here and a malformed one raises :class:`EndpointError` naming the field.

A bound on requests in flight keeps a large ``--concurrency`` from flooding a server. When openai's
retries are spent this raises :class:`EndpointError`; the evaluation records it on the episode and goes on.
"""

from __future__ import annotations

import asyncio
import json
import logging
import socket
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import httpx
import openai

from gem_core.errors import GemError, InvalidArgument, causes
from gem_core.transport.http_limits import ResponseTooLarge, UnsupportedEncoding, accept_encoding, read_capped
from gem_core.transport.url_secrets import has_user_info, redact_user_info, without_user_info

__all__ = ["ChatEndpoint", "ChatReply", "DeadlineTransport", "EndpointError", "connection_failure"]


class EndpointError(GemError, RuntimeError):
    """The endpoint gave no usable answer (after all retries, or a non-retryable HTTP error)."""


@dataclass(frozen=True)
class ChatReply:
    """One chat completion: the reply ``text``, the server's ``finish_reason`` (``"stop"``, ``"length"``, ...) and
    the token counts the server reported for the prompt and the completion.
    """
    text: str
    finish_reason: str
    prompt_tokens: int
    completion_tokens: int


class DeadlineTransport(httpx.AsyncBaseTransport):
    """Wraps a transport so that the whole answer (headers and body) must arrive within ``seconds``
    and decode to at most ``max_bytes``.

    Past the deadline it raises ``httpx.ReadTimeout``, which openai counts as a timeout and retries. An
    answer over ``max_bytes`` decoded, or with a stacked or unknown ``Content-Encoding``, raises
    ``httpx.DecodingError`` naming the cause (openai retries it as a connection error, then
    :class:`EndpointError` names it).

    Args:
        inner: the transport that sends the requests (httpx's default one, or a mock in tests).
        seconds: the deadline for a whole answer.
        max_bytes: the largest answer accepted, decoded.
    """

    def __init__(self, inner: httpx.AsyncBaseTransport, seconds: float, max_bytes: int = 64 << 20):
        self.inner, self.seconds, self.max_bytes = inner, seconds, max_bytes

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        """Send ``request`` and read its whole answer within the deadline and the size limit (httpx's transport hook)."""
        async def whole_answer() -> httpx.Response:
            request.headers["Accept-Encoding"] = accept_encoding()
            response = await self.inner.handle_async_request(request)
            try:
                if response.is_stream_consumed:  # an in-memory answer (httpx.MockTransport), decoded already
                    body = response.content
                    if len(body) > self.max_bytes:
                        raise ResponseTooLarge(f"the answer is over the cap of {self.max_bytes} bytes decoded; it was dropped")
                else:  # raw bytes decoded here under the cap; the client gets the decoded body and no encoding
                    body = await read_capped(response.aiter_raw(), response.headers.get("content-encoding"), self.max_bytes)
            except (ResponseTooLarge, UnsupportedEncoding) as error:
                raise httpx.DecodingError(str(error), request=request) from error
            finally:
                await response.aclose()
            headers = [(k, v) for k, v in response.headers.multi_items() if k.lower() not in ("content-encoding", "content-length")]
            return httpx.Response(response.status_code, headers=headers, content=body, extensions=response.extensions)

        try:
            return await asyncio.wait_for(whole_answer(), self.seconds)
        except asyncio.TimeoutError:
            raise httpx.ReadTimeout(f"no complete answer within {self.seconds:g} s", request=request) from None

    async def aclose(self) -> None:
        """Close the wrapped transport."""
        await self.inner.aclose()


class ChatEndpoint:
    """``POST {base_url}/chat/completions`` with a deadline per request, retries and bounded concurrency.

    Args:
        base_url: the API root, e.g. ``http://127.0.0.1:8000/v1`` (vLLM's ``vllm serve`` default).
        model: the ``model`` field of each request (the name the server serves).
        api_key: sent as ``Authorization: Bearer``; local servers usually ignore it. With a key, user info in
            ``base_url`` (``http://user:password@host``) is not sent (it would replace the key's header).
        timeout: seconds for one whole request (connect to last byte); each retry gets its own.
        max_retries: extra attempts after the first, on timeouts, connection errors, 408/409/429 and 5xx
            (openai's backoff: about 0.5 s doubling, at most 8 s, or the server's ``Retry-After``).
        max_in_flight: requests open at once; more wait their turn.
        extra_body: merged into every request (e.g. ``{"top_k": 20}`` for vLLM, or
            ``{"chat_template_kwargs": {"enable_thinking": False}}``).
        transport: the httpx transport under the deadline (tests pass ``httpx.MockTransport``).
        max_response_bytes: the largest answer accepted, counted decoded (a compression bomb stops there).

    Raises:
        InvalidArgument: if ``timeout`` is not positive, ``max_retries`` is negative or ``max_in_flight`` is below 1.
    """

    def __init__(
        self,
        base_url: str,
        model: str,
        *,
        api_key: str | None = None,
        timeout: float = 60.0,
        max_retries: int = 3,
        max_in_flight: int = 32,
        extra_body: dict[str, Any] | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
        max_response_bytes: int = 64 << 20,
    ):
        if max_in_flight < 1:
            raise InvalidArgument(f"max_in_flight must be at least 1, got {max_in_flight}.")
        if max_retries < 0:
            raise InvalidArgument(f"max_retries must be 0 or more, got {max_retries}.")
        if timeout <= 0:
            raise InvalidArgument(f"timeout must be positive, got {timeout}.")
        # Messages name the server without a password in its URL; with an api_key, the URL's user info is
        # not sent either: httpx would turn it into a Basic Authorization header that replaces the key.
        self.base_url = redact_user_info(base_url.rstrip("/"), api_key)
        self.url = f"{self.base_url}/chat/completions"
        send_url = base_url.rstrip("/")
        if api_key and has_user_info(send_url):
            send_url = without_user_info(send_url)
            logging.getLogger(__name__).warning(
                "%s: the URL's user and password are not sent; the API key is (one Authorization header holds one of them).",
                self.base_url,
            )
        self.model = model
        self.max_retries = max_retries
        self.extra_body = dict(extra_body or {})
        inner = transport or httpx.AsyncHTTPTransport(limits=httpx.Limits(max_connections=max_in_flight))
        self._client = openai.AsyncOpenAI(
            base_url=send_url,
            api_key=api_key or "EMPTY",  # openai requires a key; local servers ignore it (vLLM's docs use "EMPTY")
            timeout=timeout,
            max_retries=max_retries,
            http_client=httpx.AsyncClient(transport=DeadlineTransport(inner, timeout, max_response_bytes), timeout=timeout),
        )
        self._in_flight = asyncio.Semaphore(max_in_flight)

    async def chat(
        self,
        messages: Sequence[dict[str, str]],
        *,
        max_tokens: int,
        temperature: float = 1.0,
        top_p: float = 1.0,
        top_k: int = 0,
        seed: int | None = None,
    ) -> ChatReply:
        """One assistant message for ``messages``; raises :class:`EndpointError` when none comes.

        Raises:
            EndpointError: if no reply comes: an HTTP error that is not retried, or the retries ran out (HTTP
                errors, connection failures, timeouts).
        """
        # top_k is not in OpenAI's API (vLLM and SGLang accept it): sent only when asked for.
        extra_body = {**({"top_k": top_k} if top_k > 0 else {}), **self.extra_body}
        try:
            async with self._in_flight:
                raw = await self._client.chat.completions.with_raw_response.create(
                    model=self.model,
                    messages=list(messages),
                    max_tokens=max_tokens,
                    temperature=temperature,
                    top_p=top_p,
                    **({"seed": seed} if seed is not None else {}),
                    extra_body=extra_body or None,
                )
        except openai.APITimeoutError as exc:
            raise EndpointError(f"POST {self.url} failed after {_attempts(exc, self.max_retries)}; last: timed out.") from None
        except openai.APIConnectionError as exc:
            raise EndpointError(connection_failure(self.base_url, exc, _attempts(exc, self.max_retries))) from None
        except openai.APIStatusError as exc:
            status, text = exc.status_code, exc.response.text[:300]
            if _retryable(status):
                raise EndpointError(f"POST {self.url} failed after {_attempts(exc, self.max_retries)}; last: HTTP {status}: {text}") from None
            raise EndpointError(
                f"POST {self.url} answered HTTP {status}: {text} (not retried: check --model and the request settings)."
            ) from None
        return parse_reply(raw.http_response.text, self.url)

    async def aclose(self) -> None:
        """Close the HTTP client and its connections."""
        await self._client.close()

    async def __aenter__(self) -> ChatEndpoint:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()


def _attempts(exc: openai.APIError, max_retries: int) -> str:
    """"N attempts": the requests openai really sent (it numbers each in ``x-stainless-retry-count``, and gives
    up early on a ``Retry-After`` too long to wait), else the most it may send."""
    request: Any = getattr(getattr(exc, "response", None), "request", None) or getattr(exc, "request", None)  # read in the try
    try:
        made = int(request.headers["x-stainless-retry-count"]) + 1
    except (AttributeError, KeyError, TypeError, ValueError):
        made = max_retries + 1
    return f"{made} attempt{'s' if made != 1 else ''}"


def connection_failure(base_url: str, exc: BaseException, attempts: str) -> str:
    """One line saying why ``base_url`` could not be reached, from the innermost cause that says it
    (``attempts``: how many were made, e.g. ``"4 attempts"``)."""
    found = causes(exc)
    tries = f" ({attempts})"
    if any(isinstance(c, ConnectionRefusedError) for c in found):
        return f"cannot connect to {base_url}: connection refused; is the server running? (--base-url){tries}"
    if any(isinstance(c, socket.gaierror) for c in found):
        return f"cannot connect to {base_url}: its host name does not resolve; check --base-url{tries}"
    if any(isinstance(c, (httpx.UnsupportedProtocol, httpx.InvalidURL)) for c in found):
        return f"cannot connect to {base_url!r}: not an http:// or https:// URL; check --base-url{tries}"
    innermost = next((c for c in reversed(found) if not hasattr(c, "exceptions") and str(c)), found[-1])
    return f"cannot connect to {base_url}: {type(innermost).__name__}: {innermost}; check --base-url and the server{tries}"


def _retryable(status: int) -> bool:
    return status in (408, 409, 429) or status >= 500


def parse_reply(text: str, url: str) -> ChatReply:
    """The reply in a chat-completion body, every field checked (a bad one raises :class:`EndpointError`)."""

    def bad(what: str) -> EndpointError:
        return EndpointError(f"POST {url} answered something that is not a chat completion ({what}): {text[:300]}")

    try:
        data = json.loads(text)
    except (ValueError, RecursionError):  # a body nested deeper than the interpreter's stack is no completion either
        raise bad("not JSON") from None
    if not isinstance(data, Mapping):
        raise bad("not a JSON object")
    choices = data.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], Mapping):
        raise bad("no choices[0]")
    message = choices[0].get("message")
    if not isinstance(message, Mapping):
        raise bad("choices[0].message is not an object")
    content = message.get("content")
    if content is not None and not isinstance(content, str):
        raise bad(f"choices[0].message.content is {type(content).__name__}, not a string")
    finish_reason = choices[0].get("finish_reason")
    if finish_reason is not None and not isinstance(finish_reason, str):
        raise bad(f"choices[0].finish_reason is {type(finish_reason).__name__}, not a string")
    usage = data.get("usage")
    if usage is not None and not isinstance(usage, Mapping):
        raise bad(f"usage is {type(usage).__name__}, not an object")
    counts = {}
    for key in ("prompt_tokens", "completion_tokens"):
        value = (usage or {}).get(key)
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 0):
            raise bad(f"usage.{key} is {value!r}, not a token count")
        counts[key] = value or 0
    return ChatReply(text=content or "", finish_reason=finish_reason or "stop", **counts)
