"""A loopback stand-in for ``vllm serve``: a ``transformers`` model on CPU behind vLLM's HTTP routes.

Asynchronous trainers (TRL's ``AsyncGRPOTrainer``, verl's fully-async mode) drive a separate vLLM server:
a rollout worker posts prompt token ids to ``/v1/completions`` and reads back token ids and their
log-probs, and the trainer pauses the server, streams new weights into it and resumes it. vLLM needs a
GPU. :class:`GenerationServer` answers the same routes with the same JSON, sampling with
:class:`~gem_core.rollout.policy.TransformersPolicy` (concurrent requests batched into one
``generate`` call), so those trainers' own rollout code runs unchanged on a CPU against a small model.

Routes (as vLLM 0.28 with ``VLLM_SERVER_DEV_MODE=1`` answers them, only the fields callers read):

- ``GET /health`` → 200; ``GET /v1/models`` → ``{"data": [{"id", "max_model_len"}]}``;
  ``GET /server_info`` → ``{"vllm_config": {"model_config": {"dtype"}, "lora_config": null, ...}}``;
  ``GET /get_world_size`` → ``{"world_size": 1}``
- ``POST /v1/completions`` ``{"prompt": [ids], "max_tokens", "temperature", "top_p", "top_k", "n": 1,
  "logprobs": 0, "return_token_ids": true, ...}`` → ``{"choices": [{"text", "token_ids",
  "logprobs": {"token_logprobs"}, "finish_reason"}]}``. One sample per request; a per-request ``seed``
  is accepted and not used (one CPU engine draws from torch's global RNG; vLLM's seeds keep samples of
  data-parallel engines apart). ``repetition_penalty`` other than 1 and ``min_p`` are refused (400)
  rather than silently ignored.
- ``POST /pause`` (any ``mode``): new completions wait; answers once the ones in flight are done.
  vLLM's ``mode=keep`` freezes a request mid-sequence and finishes it under the new weights; here a
  request in flight when the pause arrives finishes under the old ones. ``POST /resume`` lets them go.
- Weight update, vLLM's sequence: ``POST /init_weight_transfer_engine`` ``{"init_info":
  {"master_address", "master_port", ...}}``, then per update ``/start_weight_update``,
  ``/update_weights`` ``{"update_info": {"names", "dtype_names", "shapes"}}`` (answers once every tensor
  has arrived and been copied into the model) and ``/finish_weight_update``. **Only the transport
  differs from vLLM:** where vLLM joins an NCCL group at ``master_address:master_port`` and receives a
  broadcast, this server joins a :class:`~gem_core.serve.weight_stream.WeightSender` there and reads
  the tensors from a TCP stream (:mod:`gem_core.serve.weight_stream`); the trainer side must send with
  that class instead of NCCL.

Every request is bounded (body size and arrival time, headers and connections through
:class:`~gem_core.serve.connections.ConnectionGuard`, ``max_tokens`` capped by ``max_model_len``), and
the server listens on 127.0.0.1 only. Errors are ``{"error": {"message", "type", "code"}}`` with a 4xx.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import threading
import time
from dataclasses import dataclass
from typing import Any

from gem_core.errors import UsageError
from gem_core.protocols import Tokenizer
from gem_core.rollout.policy import SamplingParams, TransformersPolicy
from gem_core.serve.asgi import RequestError, json_bytes, json_route
from gem_core.serve.loopback import LoopbackServer
from gem_core.serve.weight_stream import WeightReceiver, WeightStreamError

__all__ = ["GenerationServer", "GenerationServerConfig", "main"]


@dataclass(frozen=True)
class GenerationServerConfig:
    """Limits of a :class:`GenerationServer`."""

    model_name: str = "gem-policy"
    """The name ``/v1/models`` reports (requests may name any model: one is served)."""
    max_model_len: int = 4096
    """Most prompt plus completion tokens of one request (``/v1/models`` reports it; longer prompts get a 400)."""
    max_batch_size: int = 64
    """Most requests sampled in one ``generate`` call."""
    max_body_bytes: int = 4 << 20
    """Largest request body in bytes (a 413 past it)."""
    body_timeout: float = 30.0
    """Seconds a client has to send its body (a 408 after)."""
    weight_timeout: float = 600.0
    """Seconds to join the trainer's weight stream, and to receive one update."""


def _manifest_problem(info: dict, targets: dict[str, Any]) -> str | None:
    """What in a weight manifest the model's parameters cannot take (an unknown name, another shape, a dtype
    that does not cast to the parameter's), checked before any byte is read; None if it fits."""
    import torch

    unknown = [name for name in info["names"] if name not in targets]
    if unknown:
        return f"the model has no parameter {unknown[0]!r} ({len(unknown)} unknown names in the manifest)"
    for name, dtype_name, shape in zip(info["names"], info["dtype_names"], info["shapes"], strict=True):
        target = targets[name]
        if not isinstance(shape, list) or shape != list(target.shape) or any(isinstance(d, bool) for d in shape):
            return f"{name!r} has shape {list(target.shape)}; the manifest says {shape!r}"
        dtype = getattr(torch, dtype_name.removeprefix("torch."), None) if isinstance(dtype_name, str) else None
        # A float parameter takes any float dtype (cast on copy, as vLLM loads weights); nothing else casts safely.
        if not isinstance(dtype, torch.dtype) or (dtype != target.dtype and not (dtype.is_floating_point and target.dtype.is_floating_point)):
            return f"{name!r} is {target.dtype}; the manifest says {dtype_name!r}"
    return None


def _error(status: int, message: str) -> Any:
    from starlette.responses import Response

    codes = {400: "invalid_request", 404: "not_found", 408: "body_timeout", 409: "conflict", 413: "request_too_large"}
    body = {"error": {"message": message, "type": "invalid_request_error" if status < 500 else "server_error",
                      "code": codes.get(status, "error")}}
    return Response(json_bytes(body), status, media_type="application/json")


def _error_response(error: Exception) -> Any:
    """A refused request's status (:class:`RequestError`), else a 500 naming the failure."""
    if isinstance(error, RequestError):
        return _error(error.status, str(error))
    return _error(500, f"the generation server raised {type(error).__name__}: {error}")


class GenerationServer:
    """Serves ``model`` on vLLM's routes on 127.0.0.1 (see the module docstring).

    Args:
        model: a ``transformers`` causal LM; weight updates are copied into its parameters in place.
        tokenizer: its tokenizer (default stop ids: eos and the chat template's end of turn).
        config: limits and the reported model name.
        port: the loopback port (0 picks a free one; :attr:`port` says which).

    Use as a context manager, or :meth:`start` and :meth:`stop`::

        with GenerationServer(model, tokenizer) as server:
            ...  # point the rollout worker at server.url
    """

    def __init__(self, model: Any, tokenizer: Tokenizer, config: GenerationServerConfig = GenerationServerConfig(), *, port: int = 0):
        self.model = model
        self.tokenizer = tokenizer
        self.config = config
        self.port = port
        self.policy = TransformersPolicy(model, tokenizer, max_batch_size=config.max_batch_size)
        #: Weight updates finished so far (``/finish_weight_update`` adds one).
        self.weight_version = 0
        #: Requests answered by ``/v1/completions``.
        self.completions_served = 0
        self._open: asyncio.Event | None = None
        self._in_flight = 0
        self._idle: asyncio.Event | None = None
        self._receiver: WeightReceiver | None = None
        self._update_lock = threading.Lock()
        self._http: LoopbackServer | None = None

    @property
    def url(self) -> str:
        """The base URL (``http://127.0.0.1:PORT``), what TRL's ``vllm_server_base_url`` takes."""
        return f"http://127.0.0.1:{self.port}"

    # -- serving -------------------------------------------------------------------------------

    def start(self) -> GenerationServer:
        """Listen on 127.0.0.1 and serve on a thread of the server's own; returns self.

        Raises:
            StartFailed: the server did not listen within 30 s.
        """
        if self._http is None:
            http = LoopbackServer("gem-generation-server", self.app(), port=self.port, body_timeout=self.config.body_timeout)
            self.port = http.start(before_serving=self._make_gates)
            self._http = http
        return self

    async def _make_gates(self) -> None:
        self._open, self._idle = asyncio.Event(), asyncio.Event()
        self._open.set()
        self._idle.set()

    def _gates(self) -> tuple[asyncio.Event, asyncio.Event]:
        """The open and idle events, made on the serving loop by :meth:`start`."""
        if self._open is None or self._idle is None:
            raise UsageError("the generation server is not serving: call start() first")
        return self._open, self._idle

    def stop(self) -> None:
        """Stop serving; safe to call twice."""
        if self._http is None:
            return
        self._http.stop()
        self._http = None
        if self._receiver is not None:
            self._receiver.close()
            self._receiver = None

    def __enter__(self) -> GenerationServer:
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    # -- generation ------------------------------------------------------------------------------

    def _sampling(self, body: dict, prompt_len: int) -> SamplingParams:
        def number(name: str, default: float, low: float, high: float) -> float:
            value = body.get(name, default)
            if value is None:
                value = default
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not low <= value <= high:
                raise RequestError(400, f"{name!r} must be a number in [{low}, {high}], got {value!r}")
            return float(value)

        if body.get("n", 1) != 1:
            raise RequestError(400, "'n' must be 1: send one request per sample")
        if number("repetition_penalty", 1.0, 0.0, 100.0) != 1.0:
            raise RequestError(400, "'repetition_penalty' other than 1.0 is not supported by this stand-in server")
        if body.get("min_p") not in (None, 0, 0.0):
            raise RequestError(400, "'min_p' is not supported by this stand-in server; leave it unset")
        room = self.config.max_model_len - prompt_len
        if room < 1:
            raise RequestError(400, f"the prompt has {prompt_len} tokens; this server's max_model_len is {self.config.max_model_len}")
        limit = body.get("max_tokens")
        limit = room if limit is None else limit
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
            raise RequestError(400, "'max_tokens' must be a positive integer")
        top_k = body.get("top_k", 0)
        if isinstance(top_k, bool) or not isinstance(top_k, int):
            raise RequestError(400, "'top_k' must be an integer (0 or -1: off)")
        return SamplingParams(max_new_tokens=min(limit, room), temperature=number("temperature", 1.0, 0.0, 100.0),
                              top_p=number("top_p", 1.0, 0.0, 1.0), top_k=max(top_k, 0))

    async def _completion(self, request: Any, body: Any) -> dict[str, Any]:
        if not isinstance(body, dict):
            raise RequestError(400, "expected a JSON object like {'model': ..., 'prompt': [token ids]}")
        prompt = body.get("prompt")
        vocab = len(self.tokenizer)
        if isinstance(prompt, str) and prompt:
            prompt = self.tokenizer.encode(prompt, add_special_tokens=False)
        elif not (isinstance(prompt, list) and prompt
                  and all(isinstance(t, int) and not isinstance(t, bool) and 0 <= t < vocab for t in prompt)):
            raise RequestError(400, "'prompt' must be a non-empty string or a list of this model's token ids")
        sampling = self._sampling(body, len(prompt))
        await self._gates()[0].wait()  # paused for a weight update: wait for /resume
        self._in_flight += 1
        self._gates()[1].clear()
        try:
            generation = await self.policy.generate(prompt, sampling)
        finally:
            self._in_flight -= 1
            if self._in_flight == 0:
                self._gates()[1].set()
        self.completions_served += 1
        choice: dict[str, Any] = {
            "index": 0, "text": self.tokenizer.decode(generation.token_ids), "token_ids": list(generation.token_ids),
            "finish_reason": "length" if generation.finish_reason == "length" else "stop",
        }
        if body.get("logprobs") is not None:
            choice["logprobs"] = {"tokens": self.tokenizer.convert_ids_to_tokens(list(generation.token_ids)),
                                  "token_logprobs": list(generation.logprobs or [])}
        if body.get("return_token_ids"):
            choice["prompt_token_ids"] = list(prompt)
        return {
            "id": f"cmpl-{self.completions_served}", "object": "text_completion", "created": int(time.time()),
            "model": self.config.model_name, "choices": [choice],
            "usage": {"prompt_tokens": len(prompt), "completion_tokens": len(generation.token_ids),
                      "total_tokens": len(prompt) + len(generation.token_ids)},
        }

    # -- pause, resume and weight updates ------------------------------------------------------

    async def _pause(self, request: Any, body: Any) -> dict[str, Any]:
        self._gates()[0].clear()
        await self._gates()[1].wait()
        return {}

    async def _resume(self, request: Any, body: Any) -> dict[str, Any]:
        self._gates()[0].set()
        return {}

    async def _init_weight_transfer(self, request: Any, body: Any) -> dict[str, Any]:
        info = body.get("init_info") if isinstance(body, dict) else None
        if not isinstance(info, dict) or not isinstance(info.get("master_port"), int):
            raise RequestError(400, "expected {'init_info': {'master_address': ..., 'master_port': int, ...}}")
        host = str(info.get("master_address") or "127.0.0.1")
        if self._receiver is not None:
            self._receiver.close()
        self._receiver = await asyncio.to_thread(WeightReceiver.connect, host, info["master_port"], timeout=self.config.weight_timeout)
        return {}

    async def _start_weight_update(self, request: Any, body: Any) -> dict[str, Any]:
        if self._receiver is None:
            raise RequestError(409, "no weight stream: call /init_weight_transfer_engine first")
        self._gates()[0].clear()  # a client that skipped /pause still gets no sample from half-copied weights
        await self._gates()[1].wait()
        return {}

    async def _update_weights(self, request: Any, body: Any) -> dict[str, Any]:
        info = body.get("update_info") if isinstance(body, dict) else None
        if not isinstance(info, dict) or not all(isinstance(info.get(k), list) for k in ("names", "dtype_names", "shapes")):
            raise RequestError(400, "expected {'update_info': {'names': [...], 'dtype_names': [...], 'shapes': [...]}}")
        if not len(info["names"]) == len(info["dtype_names"]) == len(info["shapes"]):
            raise RequestError(400, "'names', 'dtype_names' and 'shapes' must have one entry per tensor")
        if self._receiver is None:
            raise RequestError(409, "no weight stream: call /init_weight_transfer_engine first")
        if self._gates()[0].is_set() or not self._gates()[1].is_set():
            raise RequestError(409, "call /start_weight_update (or /pause) before /update_weights")
        targets = dict(self.model.named_parameters())
        try:
            problem = _manifest_problem(info, targets)
            if problem is not None:
                raise WeightStreamError(problem)
            await asyncio.to_thread(self._receive_into_model, self._receiver, info, targets)
        except Exception as error:
            # The stream's position is unknown after a refused manifest (the trainer sends beside its request)
            # or a bad frame: the trainer must join again, or its next update would read this one's leftovers.
            self._receiver.close()
            self._receiver = None
            if isinstance(error, WeightStreamError):
                raise RequestError(400, f"{error}; the weight stream is closed, call /init_weight_transfer_engine again") from None
            raise
        return {}

    def _receive_into_model(self, receiver: WeightReceiver, info: dict, targets: dict[str, Any]) -> None:
        import torch

        with self._update_lock, torch.no_grad():
            for name, tensor in receiver.receive(info["names"], info["dtype_names"], info["shapes"]):
                targets[name].copy_(tensor)

    async def _finish_weight_update(self, request: Any, body: Any) -> dict[str, Any]:
        self.weight_version += 1
        return {}

    # -- the app -------------------------------------------------------------------------------

    def app(self) -> Any:
        """The Starlette app (built once per :meth:`start`)."""
        from starlette.applications import Starlette
        from starlette.routing import Route

        def endpoint(work: Any) -> Any:
            return json_route(work, max_bytes=self.config.max_body_bytes, timeout=self.config.body_timeout,
                              error_response=_error_response)

        async def health(request: Any, body: Any) -> dict[str, Any]:
            return {"status": "ok", "weight_version": self.weight_version}

        async def models(request: Any, body: Any) -> dict[str, Any]:
            return {"object": "list", "data": [{"id": self.config.model_name, "object": "model", "owned_by": "gem",
                                                "max_model_len": self.config.max_model_len}]}

        async def server_info(request: Any, body: Any) -> dict[str, Any]:
            dtype = str(next(self.model.parameters()).dtype)
            return {"vllm_config": {"model_config": {"dtype": dtype, "max_model_len": self.config.max_model_len},
                                    "lora_config": None, "parallel_config": {"data_parallel_size": 1}}}

        async def world_size(request: Any, body: Any) -> dict[str, Any]:
            return {"world_size": 1}

        get, post = ["GET"], ["POST"]
        return Starlette(routes=[
            Route("/health", endpoint(health), methods=get),
            Route("/v1/models", endpoint(models), methods=get),
            Route("/server_info", endpoint(server_info), methods=get),
            Route("/get_world_size", endpoint(world_size), methods=get),
            Route("/v1/completions", endpoint(self._completion), methods=post),
            Route("/pause", endpoint(self._pause), methods=post),
            Route("/resume", endpoint(self._resume), methods=post),
            Route("/init_weight_transfer_engine", endpoint(self._init_weight_transfer), methods=post),
            Route("/start_weight_update", endpoint(self._start_weight_update), methods=post),
            Route("/update_weights", endpoint(self._update_weights), methods=post),
            Route("/finish_weight_update", endpoint(self._finish_weight_update), methods=post),
        ])


def main(argv: list[str] | None = None) -> int:
    """``python -m gem_core.serve.generation_server --model DIR [--port N]``: serve a local model until Ctrl-C."""
    parser = argparse.ArgumentParser(prog="python -m gem_core.serve.generation_server", description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", required=True, help="a local model directory (weights and tokenizer)")
    parser.add_argument("--port", type=int, default=8000, help="loopback port (0: any free one; the URL is printed)")
    parser.add_argument("--max-model-len", type=int, default=GenerationServerConfig.max_model_len)
    args = parser.parse_args(argv)
    if not os.path.isdir(args.model):
        print(f"error: --model {args.model!r} is not a directory; give a local model directory (weights and tokenizer)", file=sys.stderr)
        return 2
    try:
        from transformers import AutoModelForCausalLM, AutoTokenizer

        tokenizer = AutoTokenizer.from_pretrained(args.model, local_files_only=True)
        model = AutoModelForCausalLM.from_pretrained(args.model, local_files_only=True)
    except (OSError, ValueError) as error:
        print(f"error: cannot load a model from {args.model!r}: {error}", file=sys.stderr)
        return 2
    server = GenerationServer(model, tokenizer, GenerationServerConfig(max_model_len=args.max_model_len), port=args.port)
    try:
        server.start()
    except OSError as error:
        print(f"error: cannot listen on 127.0.0.1:{args.port}: {error}", file=sys.stderr)
        return 2
    print(f"serving {args.model} at {server.url}", flush=True)
    try:
        threading.Event().wait()
    except KeyboardInterrupt:
        pass
    finally:
        server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
