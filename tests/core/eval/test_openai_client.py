"""gem_core/eval/openai_client.py: request shape, retries, non-retryable errors, bounded concurrency."""

from __future__ import annotations

import asyncio
import json

import httpx
import pytest

from gem_core.eval.openai_client import ChatEndpoint, EndpointError


def _completion(text="hi", finish="stop", usage=True):
    body = {"choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": finish}]}
    if usage:
        body["usage"] = {"prompt_tokens": 11, "completion_tokens": 3, "total_tokens": 14}
    return body


def _endpoint(handler, **kwargs):
    return ChatEndpoint("http://testserver/v1/", "m", transport=httpx.MockTransport(handler), **kwargs)


async def test_chat_posts_openai_request_and_parses_reply():
    seen = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append((request.url.path, request.headers.get("authorization"), json.loads(request.content)))
        return httpx.Response(200, json=_completion("\\boxed{5}", "length"))

    async with _endpoint(handler, api_key="sk-test", extra_body={"chat_template_kwargs": {"enable_thinking": False}}) as ep:
        reply = await ep.chat([{"role": "user", "content": "go"}], max_tokens=7, temperature=0.5, top_p=0.9, top_k=4)
    assert (reply.text, reply.finish_reason, reply.prompt_tokens, reply.completion_tokens) == ("\\boxed{5}", "length", 11, 3)
    path, auth, body = seen[0]
    assert path == "/v1/chat/completions" and auth == "Bearer sk-test"
    assert body["model"] == "m" and body["max_tokens"] == 7 and body["temperature"] == 0.5 and body["top_p"] == 0.9
    assert body["top_k"] == 4 and body["chat_template_kwargs"] == {"enable_thinking": False}
    assert body["messages"] == [{"role": "user", "content": "go"}]


async def test_top_k_is_left_out_when_off_and_missing_usage_counts_zero():
    bodies = []

    def handler(request):
        bodies.append(json.loads(request.content))
        return httpx.Response(200, json=_completion(usage=False))

    async with _endpoint(handler) as ep:
        reply = await ep.chat([{"role": "user", "content": "go"}], max_tokens=4)
    assert "top_k" not in bodies[0]
    assert reply.prompt_tokens == reply.completion_tokens == 0


@pytest.mark.parametrize("failure", [503, 429, "timeout", "connect"])
async def test_transient_failures_are_retried_until_an_answer_comes(failure):
    calls = 0

    def handler(request):
        nonlocal calls
        calls += 1
        if calls < 3:
            if failure == "timeout":
                raise httpx.ReadTimeout("slow", request=request)
            if failure == "connect":
                raise httpx.ConnectError("refused", request=request)
            return httpx.Response(failure, text="busy")
        return httpx.Response(200, json=_completion("ok"))

    async with _endpoint(handler, max_retries=2) as ep:
        reply = await ep.chat([{"role": "user", "content": "go"}], max_tokens=4)
    assert reply.text == "ok" and calls == 3


async def test_spent_retries_raise_endpoint_error_naming_the_last_problem():
    calls = 0

    def handler(request):
        nonlocal calls
        calls += 1
        return httpx.Response(500, text="kaput")

    async with _endpoint(handler, max_retries=2) as ep:
        with pytest.raises(EndpointError, match="3 attempts.*HTTP 500: kaput"):
            await ep.chat([{"role": "user", "content": "go"}], max_tokens=4)
    assert calls == 3


async def test_a_retry_after_too_long_to_wait_counts_the_one_attempt_made():
    """openai does not wait out a Retry-After over a minute: the request was made once, and the message says so."""
    calls = 0

    def handler(request):
        nonlocal calls
        calls += 1
        return httpx.Response(429, headers={"Retry-After": "3600"}, text="slow down")

    async with _endpoint(handler, max_retries=2) as ep:
        with pytest.raises(EndpointError, match=r"failed after 1 attempt; last: HTTP 429: slow down"):
            await ep.chat([{"role": "user", "content": "go"}], max_tokens=4)
    assert calls == 1


async def test_client_errors_are_not_retried():
    calls = 0

    def handler(request):
        nonlocal calls
        calls += 1
        return httpx.Response(404, json={"error": "model not found"})

    async with _endpoint(handler, max_retries=5) as ep:
        with pytest.raises(EndpointError, match="HTTP 404.*not retried"):
            await ep.chat([{"role": "user", "content": "go"}], max_tokens=4)
    assert calls == 1


async def test_a_body_that_is_not_a_completion_raises_endpoint_error():
    async with _endpoint(lambda request: httpx.Response(200, text="<html>")) as ep:
        with pytest.raises(EndpointError, match="not a chat completion"):
            await ep.chat([{"role": "user", "content": "go"}], max_tokens=4)


async def test_a_deeply_nested_body_raises_endpoint_error_not_recursion_error():
    body = "[" * 100_000 + "]" * 100_000  # json.loads recurses once per bracket
    async with _endpoint(lambda request: httpx.Response(200, text=body)) as ep:
        with pytest.raises(EndpointError, match=r"^POST http://testserver/v1/chat/completions answered .*not a chat completion"):
            await ep.chat([{"role": "user", "content": "go"}], max_tokens=4)


async def test_requests_in_flight_never_exceed_the_bound():
    in_flight = peak = 0

    async def handler(request):
        nonlocal in_flight, peak
        in_flight += 1
        peak = max(peak, in_flight)
        await asyncio.sleep(0.01)
        in_flight -= 1
        return httpx.Response(200, json=_completion())

    async with _endpoint(handler, max_in_flight=3) as ep:
        await asyncio.gather(*(ep.chat([{"role": "user", "content": str(i)}], max_tokens=2) for i in range(12)))
    assert peak == 3
