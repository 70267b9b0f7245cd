"""verifiers' own rollout driven by GEM's policy: the harness's model calls are answered by GEM's actions.

In verifiers 0.4.0 a harness (a chat loop, an agent) plays a task and calls the model through the
rollout's interception server; the task's rewards score the finished trace. :class:`HarnessRelay` runs
that rollout (``SingleAgentEnv.run_episode``) on an event loop of its own, with the model endpoint a
loopback OpenAI-compatible server that hands each request to GEM as an observation and answers it with
GEM's next action. So multi-turn tasksets and tools (the harness runs them) play through every GEM
adapter; the reward arrives when the rollout ends, at the last turn.

Actions may call the tools a request offers in a native format (``call_format``, Hermes
``<tool_call>{"name": ..., "arguments": {...}}</tool_call>`` by default, see :mod:`gem_core.tools.calls`):
they are sent back as OpenAI ``tool_calls`` for the harness to run.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from typing import Any

from gem_core.errors import GemError

__all__ = ["HarnessRelay", "RelayError"]

#: The most bytes one chat request from the harness may hold (a whole conversation with its tool specs).
MAX_REQUEST_BYTES = 8 << 20
_API_KEY_VAR = "GEM_VERIFIERS_RELAY_KEY"  # the loopback endpoint checks nothing; verifiers reads a key from the environment


class RelayError(GemError, RuntimeError):
    """The relayed verifiers rollout could not start or went silent (no model call and no end in time)."""


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    return "\n".join(str(part.get("text", "")) for part in content or () if isinstance(part, dict))


def _tool_lines(tools: list[dict[str, Any]]) -> str:
    specs = [t.get("function", t) for t in tools]
    return "Tools (call one as <tool_call>{\"name\": ..., \"arguments\": {...}}</tool_call>):\n" + "\n".join(
        json.dumps({"name": s.get("name"), "description": s.get("description", ""), "parameters": s.get("parameters", {})}) for s in specs
    )


class HarnessRelay:
    """One verifiers env (``SingleAgentEnv`` over ``module``'s taskset and ``harness``) relayed to GEM.

    Args:
        module: the taskset module (as for ``verifiers:<module>``).
        taskset_config: the taskset config's fields.
        harness: the harness id (a verifiers built-in or a top-level module exporting a ``Harness``).
        call_format: how actions write tool calls (:data:`gem_core.tools.calls.CALL_FORMATS`).
        timeout: seconds to wait for the harness's next model call or the rollout's end.

    Raises:
        InvalidArgument: ``call_format`` is not a known format name or a parser, or ``timeout`` is not a finite
            number of seconds above 0 (checked before the server starts: a bad format otherwise failed the
            harness's first model call as an HTTP 500).
    """

    def __init__(self, module: str, taskset_config: dict[str, Any], harness: str, *, call_format: str = "hermes", timeout: float = 120.0):
        import os

        from gem_core.errors import InvalidArgument
        from gem_core.tools.calls import CALL_FORMATS
        from gem_core.vector.calls import check_amount

        if not callable(call_format) and not (isinstance(call_format, str) and call_format in CALL_FORMATS):
            raise InvalidArgument(f"call_format={call_format!r:.80}: expected one of {sorted(CALL_FORMATS)} or a parser (a callable).")
        timeout = check_amount("relay_timeout", timeout, "seconds")

        from starlette.applications import Starlette
        from starlette.responses import JSONResponse
        from starlette.routing import Route
        from verifiers.v1 import EvalClientConfig, ModelContext
        from verifiers.v1.envs.single_agent import SingleAgentEnv, SingleAgentEnvConfig

        from gem_core.serve.asgi import RequestError, read_json
        from gem_core.serve.loopback import LoopbackServer

        self.name, self.call_format, self.timeout = f"verifiers:{module}", call_format, timeout
        self.env = SingleAgentEnv(SingleAgentEnvConfig(
            taskset={**taskset_config, "id": module}, agent={"harness": {"id": harness}, "runtime": {"type": "subprocess"}},
        ))
        self._requests: asyncio.Queue | None = None
        self._pending: asyncio.Future | None = None
        self._episode: asyncio.Task | None = None
        self._seen = 0

        async def chat(request: Any) -> Any:
            try:
                body = await read_json(request, max_bytes=MAX_REQUEST_BYTES, timeout=self.timeout)
            except RequestError as error:
                return JSONResponse({"error": {"message": str(error), "type": "invalid_request_error"}}, error.status)
            if not isinstance(body, dict) or self._requests is None:
                return JSONResponse({"error": {"message": "a chat request is a JSON object", "type": "invalid_request_error"}}, 400)
            answer = asyncio.get_running_loop().create_future()
            await self._requests.put((body, answer))
            return JSONResponse(self._completion(body, await answer))

        self._http: LoopbackServer | None = LoopbackServer(
            "gem-verifiers-relay", Starlette(routes=[Route("/v1/chat/completions", chat, methods=["POST"])]), body_timeout=timeout
        )
        port = self._http.start(before_serving=self._start)
        os.environ.setdefault(_API_KEY_VAR, "gem-relay")
        self.ctx = ModelContext(model="gem-policy", client=EvalClientConfig(base_url=f"http://127.0.0.1:{port}/v1", api_key_var=_API_KEY_VAR))

    async def _start(self) -> None:
        self._requests = asyncio.Queue()
        await self.env.start()

    def _run(self, coroutine: Any) -> Any:
        assert self._http is not None
        return self._http.run(lambda: coroutine)

    def _completion(self, body: dict[str, Any], action: str) -> dict[str, Any]:
        from gem_core.tools.calls import parse_native_calls

        calls = [c for c in parse_native_calls(self.call_format, action) if c.error is None] if body.get("tools") else []
        message: dict[str, Any] = {"role": "assistant", "content": action}
        if calls:
            message["tool_calls"] = [
                {"id": f"call_{uuid.uuid4().hex[:12]}", "type": "function", "function": {"name": c.name, "arguments": json.dumps(c.arguments)}}
                for c in calls
            ]
        return {
            "id": f"gem-{uuid.uuid4().hex[:12]}", "object": "chat.completion", "created": 0, "model": body.get("model", ""),
            "choices": [{"index": 0, "finish_reason": "tool_calls" if calls else "stop", "message": message}],
            "usage": {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0},
        }

    async def _next(self) -> tuple[str, Any]:
        """The rollout's next model request, or its end."""
        assert self._requests is not None and self._episode is not None
        getter = asyncio.ensure_future(self._requests.get())
        done, _ = await asyncio.wait({getter, self._episode}, timeout=self.timeout, return_when=asyncio.FIRST_COMPLETED)
        if getter in done:
            body, self._pending = getter.result()
            return "request", body
        getter.cancel()
        if self._episode in done:
            return "end", self._episode.result()
        raise RelayError(f"{self.name}: the harness made no model call and did not end within {self.timeout:g}s.")

    def _observation(self, body: dict[str, Any]) -> str:
        messages = body.get("messages") or []
        new = [m for m in messages[self._seen:] if m.get("role") != "assistant"]
        first = self._seen == 0
        self._seen = len(messages) + 1  # the reply this request gets is the next assistant message
        parts = [_text(m.get("content")) for m in new]
        if first and body.get("tools"):
            parts.append(_tool_lines(body["tools"]))
        return "\n\n".join(p for p in parts if p)

    def begin(self, task: Any) -> tuple[str, Any]:
        """Start ``task``'s rollout; its first model request as observation text, or ("", episode) if it ended."""
        self.cancel()
        self._seen = 0

        async def start() -> tuple[str, Any]:
            self._episode = asyncio.ensure_future(self.env.run_episode(task, self.ctx))
            return await self._next()

        kind, value = self._run(start())
        return (self._observation(value), None) if kind == "request" else ("", value)

    def answer(self, action: str) -> tuple[str, Any]:
        """Answer the pending model request with ``action``: the next request's new messages, or ("", episode)."""

        async def reply() -> tuple[str, Any]:
            if self._pending is None:  # no rollout begun, or it ended: nothing waits for an answer
                raise RelayError(f"{self.name}: no model call of the harness is waiting for an answer; call reset() first.")
            self._pending.set_result(action)
            self._pending = None
            return await self._next()

        kind, value = self._run(reply())
        return (self._observation(value), None) if kind == "request" else ("", value)

    def cancel(self) -> None:
        """Abandon a rollout in flight (a new reset, or GEM's turn limit ended the episode first)."""

        async def stop() -> None:
            if self._pending is not None and not self._pending.done():
                self._pending.cancel()
            if self._episode is not None and not self._episode.done():
                self._episode.cancel()
                await asyncio.gather(self._episode, return_exceptions=True)
            self._pending = self._episode = None
            while self._requests is not None and not self._requests.empty():
                _, answer = self._requests.get_nowait()
                answer.cancel()

        if self._http is not None:
            self._run(stop())

    def close(self) -> None:
        """Stop the rollout in flight, verifiers' env and the loopback server; safe to call twice."""
        if self._http is None:
            return
        self.cancel()

        async def shutdown() -> None:
            await self.env.stop()

        try:
            self._run(shutdown())
        finally:
            self._http.stop()
            self._http = None
