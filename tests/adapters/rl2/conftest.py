"""A fake SGLang router for the RL2 adapter tests, backed by a gem_core Policy.

RL2 talks to SGLang over HTTP (``POST {router_url}/generate`` with ``input_ids`` and
``sampling_params``, ``return_logprob: true``). SGLang needs CUDA, so :func:`fake_router` serves an
aiohttp app on loopback that samples from an in-process Policy (the tiny model or a scripted one)
and answers in SGLang's format: ``text``, ``output_ids`` and ``meta_info`` with
``output_token_logprobs`` as ``(logprob, token_id, None)``, ``finish_reason: {"type": ...}`` and
``completion_tokens``. ``abort_first=True`` makes the first request return half its tokens with
``finish_reason: abort``, as SGLang does when RL2 pauses generation for partial rollout.
"""

from __future__ import annotations

import contextlib

import pytest

from gem_core.rollout.policy import SamplingParams
from gem_core.testing import make_tokenizer


@pytest.fixture(scope="session")
def tokenizer():
    return make_tokenizer("chatml")


@pytest.fixture
def fake_router(tokenizer):
    pytest.importorskip("aiohttp", reason="the fake SGLang router needs aiohttp (nox -s rl2)")
    from aiohttp import web
    from aiohttp.test_utils import TestServer

    @contextlib.asynccontextmanager
    async def serve(policy, *, abort_first: bool = False):
        requests: list[dict] = []
        held: list[tuple] = []  # the rest of an aborted generation, served on resume as a real engine would continue

        async def generate(request: web.Request) -> web.Response:
            body = await request.json()
            requests.append(body)
            params = body["sampling_params"]
            if held:
                ids, logps, finish = held.pop()
            else:
                gen = await policy.generate(
                    body["input_ids"],
                    SamplingParams(max_new_tokens=params["max_new_tokens"], temperature=params.get("temperature", 1.0),
                                   stop_token_ids=params.get("stop_token_ids")),
                )
                ids, logps, finish = list(gen.token_ids), list(gen.logprobs), gen.finish_reason
            if abort_first and len(requests) == 1:
                half = len(ids) // 2
                held.append((ids[half:], logps[half:], finish))
                ids, logps, finish = ids[:half], logps[:half], "abort"
            return web.json_response({
                "text": tokenizer.decode(ids, skip_special_tokens=True),
                "output_ids": ids,
                "meta_info": {
                    "output_token_logprobs": [[lp, t, None] for lp, t in zip(logps, ids)],
                    "finish_reason": {"type": finish},
                    "completion_tokens": len(ids),
                },
            })

        app = web.Application()
        app.router.add_post("/generate", generate)
        server = TestServer(app, host="127.0.0.1")
        await server.start_server()
        try:
            yield str(server.make_url("")).rstrip("/"), requests
        finally:
            await server.close()

    return serve


@pytest.fixture
def open_envs(monkeypatch):
    """Counts envs ``gem_core.registry.make`` built and how many are not closed yet."""
    from gem_core.testing import EnvLifecycles

    return EnvLifecycles().install(monkeypatch)
