"""The ASGI app of ``gem serve`` (Starlette): routes, the bearer-token check and the idle-session reaper.

Every request is bounded: its body size and arrival time, the env's step time, and what comes back
is plain JSON. A bad request is a 4xx with ``{"detail": ...}``; an env that raises is a 500 for that
request only, and a step that overruns ``step_timeout`` ends its session (the env is in an unknown
state) with a 504.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
from dataclasses import dataclass
from typing import Any

from gem_core.serve.asgi import RequestError, json_bytes, parse_json, read_json
from gem_core.serve.sessions import Session, SessionLimitError, SessionStore

__all__ = ["ServeConfig", "create_app"]


@dataclass(frozen=True)
class ServeConfig:
    """Limits and access of a ``gem serve`` server."""

    #: Sessions held at once.
    max_sessions: int = 256
    #: Seconds without a request after which a session is ended.
    idle_timeout: float = 300.0
    #: Seconds between two sweeps for idle sessions.
    reap_interval: float = 10.0
    #: Largest request body (or WebSocket message) in bytes; a 1 MB action is refused with 413.
    max_body_bytes: int = 256 * 1024
    #: Seconds a client has to send a request body.
    body_timeout: float = 10.0
    #: Seconds one reset or step may take.
    step_timeout: float = 60.0
    #: When set, every request needs ``Authorization: Bearer <token>``.
    token: str | None = None


def _reset_args(body: Any) -> dict[str, Any]:
    body = {} if body is None else body
    if not isinstance(body, dict):
        raise RequestError(422, 'expected a JSON object like {"seed": 0, "options": null}')
    seed, options = body.get("seed"), body.get("options")
    if seed is not None and (not isinstance(seed, int) or isinstance(seed, bool) or seed < 0):
        raise RequestError(422, '"seed" must be a non-negative integer or null')
    if options is not None and not isinstance(options, dict):
        raise RequestError(422, '"options" must be a JSON object or null')
    return {"seed": seed, "options": options}


def _step_action(body: Any) -> str:
    if not isinstance(body, dict) or not isinstance(body.get("action"), str):
        raise RequestError(422, 'expected a JSON object like {"action": "your move"}')
    return body["action"]


class _Operations:
    """What a session can be asked, shared by the HTTP routes and the WebSocket loop."""

    def __init__(self, env_id: str, store: SessionStore, config: ServeConfig):
        self.env_id, self.store, self.config = env_id, store, config

    async def create(self, body: Any) -> Session:
        requested = body.get("env_id") if isinstance(body, dict) else None
        if requested is not None and requested != self.env_id:
            raise RequestError(404, f"this server serves {self.env_id!r}, not {requested!r}")
        try:
            return await self.store.create()
        except SessionLimitError as error:
            raise RequestError(429, str(error)) from None

    def session(self, session_id: str) -> Session:
        session = self.store.get(session_id)
        if session is None:
            raise RequestError(404, f"no session {session_id!r} (ended, reaped after {self.config.idle_timeout:g} s idle, or the server restarted); create one with POST /sessions")
        return session

    async def _run(self, session: Session, call: Any) -> Any:
        async with session.lock:
            try:
                result = await asyncio.wait_for(call, self.config.step_timeout)
            except asyncio.TimeoutError:
                await self.store.end(session.id)
                raise RequestError(504, f"the env took over {self.config.step_timeout:g} s; the session was ended") from None
            finally:
                session.touch()
        return result

    async def reset(self, session: Session, body: Any) -> dict[str, Any]:
        observation, info = await self._run(session, session.env.areset(**_reset_args(body)))
        return {"observation": observation, "info": info}

    async def step(self, session: Session, body: Any) -> dict[str, Any]:
        observation, reward, terminated, truncated, info = await self._run(session, session.env.astep(_step_action(body)))
        return {"observation": observation, "reward": float(reward), "terminated": bool(terminated), "truncated": bool(truncated), "info": info}

    async def sample(self, session: Session) -> dict[str, Any]:
        return {"action": await self._run(session, asyncio.to_thread(session.env.sample_random_action))}


def create_app(env_id: str, config: ServeConfig = ServeConfig(), *, make_env: Any = None) -> Any:
    """The Starlette app serving ``env_id`` (built with :func:`gem_core.make`, or ``make_env()``)."""
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import Response
    from starlette.routing import Route, WebSocketRoute
    from starlette.websockets import WebSocket, WebSocketDisconnect

    if make_env is None:
        from gem_core.registry import make, spec

        spec(env_id)  # an unknown id fails here, at startup, naming the closest ids

        def make_env() -> Any:
            return make(env_id)

    store = SessionStore(make_env, max_sessions=config.max_sessions, idle_timeout=config.idle_timeout)
    ops = _Operations(env_id, store, config)

    def reply(status: int, payload: Any) -> Response:
        return Response(json_bytes(payload), status, media_type="application/json")

    def handler(work: Any) -> Any:
        async def endpoint(request: Request) -> Response:
            try:
                body = None
                if request.method == "POST":
                    body = await read_json(request, max_bytes=config.max_body_bytes, timeout=config.body_timeout)
                status, payload = await work(request, body)
            except RequestError as error:
                return reply(error.status, {"detail": str(error)})
            except Exception as error:  # the env raised: this request fails, the server and session live on
                return reply(500, {"detail": f"the env raised {type(error).__name__}: {error}"})
            return reply(status, payload)

        return endpoint

    async def create(request: Request, body: Any) -> tuple[int, Any]:
        session = await ops.create(body)
        return 201, {"session_id": session.id, "env_id": env_id}

    async def reset(request: Request, body: Any) -> tuple[int, Any]:
        return 200, await ops.reset(ops.session(request.path_params["sid"]), body)

    async def step(request: Request, body: Any) -> tuple[int, Any]:
        return 200, await ops.step(ops.session(request.path_params["sid"]), body)

    async def sample(request: Request, body: Any) -> tuple[int, Any]:
        return 200, await ops.sample(ops.session(request.path_params["sid"]))

    async def end(request: Request, body: Any) -> tuple[int, Any]:
        if not await store.end(request.path_params["sid"]):
            raise RequestError(404, f"no session {request.path_params['sid']!r}")
        return 200, {"ended": request.path_params["sid"]}

    async def health(request: Request, body: Any) -> tuple[int, Any]:
        return 200, {"status": "ok", "env_id": env_id, "sessions": len(store)}

    async def websocket_session(websocket: WebSocket) -> None:
        await websocket.accept()
        try:
            session = await ops.create({})
        except RequestError as error:
            await websocket.send_text(json_bytes({"error": str(error), "status": error.status}).decode("ascii"))
            await websocket.close(code=1013)
            return
        try:
            while True:
                message = await websocket.receive_text()
                if store.get(session.id) is None:  # reaped while idle, or ended by a step timeout
                    await websocket.send_text(json_bytes({"error": "the session ended (idle or timed out); reconnect", "status": 404}).decode("ascii"))
                    await websocket.close(code=1000)
                    return
                try:
                    if len(message) > config.max_body_bytes:
                        raise RequestError(413, f"message over {config.max_body_bytes} bytes")
                    body = parse_json(message)
                    op = body.get("op") if isinstance(body, dict) else None
                    if op == "reset":
                        answer = await ops.reset(session, body)
                    elif op == "step":
                        answer = await ops.step(session, body)
                    elif op == "sample":
                        answer = await ops.sample(session)
                    else:
                        raise RequestError(422, 'expected {"op": "reset" | "step" | "sample", ...}')
                except RequestError as error:
                    answer = {"error": str(error), "status": error.status}
                except Exception as error:
                    answer = {"error": f"the env raised {type(error).__name__}: {error}", "status": 500}
                await websocket.send_text(json_bytes(answer).decode("ascii"))
        except WebSocketDisconnect:
            pass
        finally:
            await store.end(session.id)

    async def not_found(request: Request, exc: Exception) -> Response:
        return reply(404, {"detail": f"no route {request.method} {request.url.path}; see `gem serve --help` for the protocol"})

    async def wrong_method(request: Request, exc: Exception) -> Response:
        return reply(405, {"detail": f"{request.method} is not allowed on {request.url.path}"})

    @contextlib.asynccontextmanager
    async def lifespan(app: Any) -> Any:
        interval = min(config.reap_interval, max(config.idle_timeout / 2, 0.05))

        async def reaper() -> None:
            while True:
                await asyncio.sleep(interval)
                await store.reap()

        task = asyncio.create_task(reaper())
        try:
            yield
        finally:
            task.cancel()
            await store.end_all()

    routes = [
        Route("/health", handler(health), methods=["GET"]),
        Route("/sessions", handler(create), methods=["POST"]),
        Route("/sessions/{sid}/reset", handler(reset), methods=["POST"]),
        Route("/sessions/{sid}/step", handler(step), methods=["POST"]),
        Route("/sessions/{sid}/sample", handler(sample), methods=["POST"]),
        Route("/sessions/{sid}", handler(end), methods=["DELETE"]),
        WebSocketRoute("/ws", websocket_session),
    ]
    app = Starlette(routes=routes, exception_handlers={404: not_found, 405: wrong_method}, lifespan=lifespan)
    app.state.sessions = store
    return _BearerToken(app, config.token) if config.token else app


class _BearerToken:
    """ASGI middleware: every HTTP request and WebSocket handshake must carry ``Authorization: Bearer <token>``."""

    def __init__(self, app: Any, token: str):
        self.app = app
        self._expected = f"Bearer {token}".encode()

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] in ("http", "websocket"):
            given = dict(scope.get("headers") or []).get(b"authorization", b"")
            if not hmac.compare_digest(given, self._expected):
                if scope["type"] == "websocket":
                    await send({"type": "websocket.close", "code": 1008})
                    return
                body = json_bytes({"detail": "missing or wrong bearer token: send 'Authorization: Bearer <token>'"})
                headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()), (b"www-authenticate", b"Bearer")]
                await send({"type": "http.response.start", "status": 401, "headers": headers})
                await send({"type": "http.response.body", "body": body})
                return
        await self.app(scope, receive, send)
