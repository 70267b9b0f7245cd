"""A fake SGLang router for the RL2 adapter tests, backed by a gem_core Policy.

RL2 talks to SGLang over HTTP (``POST {router_url}/generate`` with ``input_ids`` and
``sampling_params``, ``return_logprob: true``). SGLang needs CUDA, so :func:`fake_router` serves an
aiohttp app on loopback that samples from an in-process Policy (the tiny model or a scripted one)
and answers in SGLang's format: ``text``, ``output_ids`` and ``meta_info`` with
``output_token_logprobs`` as ``(logprob, token_id, None)``, ``finish_reason: {"type": ...}`` and
``completion_tokens``. ``abort_first=True`` makes the first request return half its tokens with
``finish_reason: abort``, as SGLang does when RL2 pauses generation for partial rollout.

:func:`rl_square_rollout` is rl-square 0.0.2's own ``Rollout`` class. Its module imports SGLang (CUDA only)
and wandb at the top, so the fixture puts stand-in modules in ``sys.modules`` for ``sglang.*``, ``wandb``
and ``RL2.utils.sglang``, and loads ``RL2/workers/rollout.py`` without ``RL2/workers/__init__.py`` (which
imports the FSDP actor). The stand-in ``async_generate(url, states, sampling_params)`` POSTs to the fake
router exactly as the real one does. :func:`rl_square` builds one without its ``__init__`` (which launches
SGLang servers).
"""

from __future__ import annotations

import contextlib
import sys
import types
from pathlib import Path

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


@pytest.fixture
def rl_square_rollout(monkeypatch):
    """rl-square's ``Rollout`` class, imported with stand-ins for its GPU-only imports."""
    pytest.importorskip("RL2.datasets", reason="needs rl-square==0.0.2 (nox -s rl2)")

    async def async_generate(url, states, sampling_params):
        import aiohttp

        payload = {"input_ids": states, "sampling_params": sampling_params, "return_logprob": True}
        async with aiohttp.ClientSession() as session, session.post(f"{url}/generate", json=payload) as response:
            return await response.json(content_type=None)

    stubs = {
        "sglang": {}, "sglang.srt": {}, "sglang.srt.utils": {"MultiprocessingSerializer": object},
        "sglang.srt.model_executor": {}, "sglang.srt.model_executor.model_runner": {"LocalSerializedTensor": object},
        "wandb": {"log": lambda *a, **k: None},
        "RL2.utils.sglang": {"prepare_environment_variables": None, "launch_server_process": None,
                             "launch_router_process": None, "make_request": None, "async_generate": async_generate},
    }
    for name, attrs in stubs.items():
        module = types.ModuleType(name)
        module.__dict__.update(attrs)
        monkeypatch.setitem(sys.modules, name, module)
    # RL2/workers/__init__.py also imports the FSDP actor (flash-attn era transformers); load only the rollout module.
    import RL2

    workers = types.ModuleType("RL2.workers")
    workers.__path__ = [str(Path(RL2.__file__).parent / "workers")]
    monkeypatch.setitem(sys.modules, "RL2.workers", workers)
    monkeypatch.delitem(sys.modules, "RL2.workers.rollout", raising=False)
    from RL2.workers.rollout import Rollout

    return Rollout


@pytest.fixture
def rl_square(rl_square_rollout, tokenizer):
    """``rl_square(router_url, env, max_turns=20, max_new_tokens=64)``: an rl-square ``Rollout`` whose env is ``env``."""

    def build(url: str, env, *, max_turns: int = 20, max_new_tokens: int = 64):
        from omegaconf import OmegaConf

        rollout = rl_square_rollout.__new__(rl_square_rollout)  # __init__ launches SGLang servers
        rollout.config = OmegaConf.create({"max_turns": max_turns})
        rollout.tokenizer, rollout.router_url, rollout.env = tokenizer, url, env
        rollout.train_sampling_params = {"max_new_tokens": max_new_tokens, "temperature": 1.0}
        return rollout

    return build
