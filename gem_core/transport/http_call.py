"""One HTTP call with a deadline for the whole exchange, a cap on the answer's size and bounded retries.

httpx's timeouts apply to each network operation: a server that trickles one byte per second never
trips a read timeout and holds the caller for as long as it likes. Here one ``asyncio`` deadline covers
connecting, sending, every read and the retries, so ``timeout=3`` means three seconds. The answer is
read as raw bytes and decoded here under ``max_bytes`` (:mod:`gem_core.transport.http_limits`), so neither a huge
body nor a compression bomb ever lands in memory, and stacked encodings are refused.

The search tool and :class:`gem_core.serve.remote.RemoteEnv` share this one retry loop (connection errors and
5xx answers are retried with exponential backoff while the deadline allows; 4xx answers are returned).
"""

from __future__ import annotations

import asyncio
import functools
import json
import ssl
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from gem_core.errors import GemError
from gem_core.transport.http_limits import ResponseTooLarge, UnsupportedEncoding, accept_encoding, read_capped

__all__ = ["Reply", "CallFailed", "arequest", "async_client"]


@dataclass(frozen=True)
class Reply:
    """A complete HTTP answer: its status and body (at most ``max_bytes``)."""

    status: int
    body: bytes
    #: The ``Location`` header (a redirect's target), when the answer has one.
    location: str | None = None

    @property
    def text(self) -> str:
        """The body decoded as UTF-8 (undecodable bytes replaced)."""
        return self.body.decode("utf-8", "replace")

    def json(self) -> Any:
        """The body parsed as JSON; raises ValueError (or RecursionError for absurd nesting)."""
        return json.loads(self.body)


class CallFailed(GemError, Exception):
    """The call got no usable answer before its deadline; ``reason`` says why, for a person.

    Args:
        reason: why the call failed, for a person.
        timed_out: whether the deadline passed (not a refused or broken answer).
    """

    def __init__(self, reason: str, *, timed_out: bool = False):
        super().__init__(reason)
        self.reason = reason
        self.timed_out = timed_out


def encode_json(payload: Any) -> bytes:
    """JSON with every non-ASCII character escaped: lone surrogates from model text cannot fail encoding."""
    return json.dumps(payload, ensure_ascii=True).encode("ascii")


async def _exchange(client: Any, method: str, url: str, content: bytes | None, headers: Mapping[str, str], max_bytes: int) -> Reply:
    async with client.stream(method, url, content=content, headers=dict(headers)) as response:
        declared = response.headers.get("content-length", "")
        if declared.isdigit() and int(declared) > max_bytes:
            raise ResponseTooLarge(f"the answer declares {int(declared)} bytes, over the cap of {max_bytes}; it was dropped")
        # Raw bytes, decoded here under the cap: httpx's own decoding inflates a whole chunk before any check.
        body = await read_capped(response.aiter_raw(), response.headers.get("content-encoding"), max_bytes)
        return Reply(response.status_code, body, response.headers.get("location"))


@functools.cache
def _tls_context() -> ssl.SSLContext:
    # httpx builds (and loads CA files into) a new SSL context per client: ~100 ms of CPU each, which
    # dominated opening 200 remote envs. One shared context serves every client.
    return ssl.create_default_context()


def async_client(timeout: float, **kwargs: Any) -> Any:
    """An ``httpx.AsyncClient`` sharing the process's one TLS context (cheap to create)."""
    import httpx

    return httpx.AsyncClient(timeout=timeout, verify=_tls_context(), **kwargs)


def _describe(error: BaseException, url: str) -> str:
    import httpx

    if isinstance(error, httpx.TimeoutException):
        return f"{url} did not answer in time ({type(error).__name__})"
    if isinstance(error, httpx.TransportError):
        return f"{url} is unreachable ({type(error).__name__}: {error})" if str(error) else f"{url} is unreachable ({type(error).__name__})"
    return f"{type(error).__name__}: {error}"


async def arequest(
    method: str,
    url: str,
    *,
    payload: Any = None,
    headers: Mapping[str, str] | None = None,
    timeout: float,
    retries: int = 2,
    backoff: float = 0.2,
    max_bytes: int = 1 << 20,
    client: Any = None,
    retry_if: Callable[[Reply], bool] = lambda reply: reply.status >= 500,
    idempotent: bool = True,
) -> Reply:
    """``method url`` with ``payload`` as a JSON body; the first answer that needs no retry.

    Args:
        timeout: seconds for the whole call, retries and backoff included.
        retries: further attempts after a connection error or an answer ``retry_if`` accepts.
        backoff: seconds before the first retry, doubled for each next one.
        max_bytes: the longest body accepted, counted decoded; a longer one (or a stacked or unknown
            ``Content-Encoding``) fails the call, never retried.
        client: an ``httpx.AsyncClient`` to reuse (its connection pool); a fresh one by default.
        retry_if: which answers are retried (5xx by default).
        idempotent: False for a request that must not run twice (an env step): it is then retried only
            when the connection failed before anything was sent, and never after an answer.

    Raises:
        CallFailed: no usable answer before the deadline, or the answer was too large.
    """
    import httpx

    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    content = None if payload is None else encode_json(payload)
    all_headers = {"accept-encoding": accept_encoding(), **({"content-type": "application/json"} if content is not None else {}), **(headers or {})}
    own_client = client is None
    if own_client:
        client = async_client(timeout)
    reason = "no attempt made"
    try:
        for attempt in range(retries + 1):
            if attempt:
                pause = backoff * 2 ** (attempt - 1)
                if loop.time() + pause >= deadline:
                    break
                await asyncio.sleep(pause)
            remaining = deadline - loop.time()
            if remaining <= 0:
                break
            try:
                reply = await asyncio.wait_for(_exchange(client, method, url, content, all_headers, max_bytes), remaining)
            except asyncio.TimeoutError:
                raise CallFailed(f"{url} gave no complete answer within {timeout:g} s", timed_out=True) from None
            except (ResponseTooLarge, UnsupportedEncoding) as error:  # the server's choice: a retry gets the same
                raise CallFailed(f"{url}: {error}") from None
            except httpx.HTTPError as error:
                reason = _describe(error, url)
                if idempotent or isinstance(error, (httpx.ConnectError, httpx.ConnectTimeout)):
                    continue
                break
            if idempotent and retry_if(reply):
                reason = f"{url} answered HTTP {reply.status}: {reply.text[:200]}"
                continue
            return reply
        raise CallFailed(reason)
    finally:
        if own_client:
            await client.aclose()

