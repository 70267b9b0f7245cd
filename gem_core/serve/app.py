"""The ASGI app of ``gem serve`` (Starlette): routes, the bearer-token check and the idle-session reaper.

Every request is bounded: its body size and arrival time, the env's step time, and what comes back
is plain JSON (the connection itself, headers included, is bounded by :mod:`gem_core.serve.connections`).
A bad request is a 4xx with ``{"detail": ...}`` (a step or sample before the first reset is a 409); an
env that raises, or answers what JSON cannot hold (a circular or absurdly deep info), is a 500 for that
request only. Every env call (building, reset, step, sample, close) runs in the env threads under
``step_timeout``: one that overruns it is a 504 and counts in ``/health``'s ``stuck_steps`` until it
returns, and a reset, step or sample that overruns it ends its session (the env is in an unknown
state). An ended session's env is closed only once no call of it runs, and a request that was waiting
for the session gets a 404, never the closed env. A float that is not finite (NaN, infinity) is sent
as ``null``: JSON has no such numbers.

An action is model output, and a malformed one is part of the game: a step whose action is over
``max_action_bytes`` (unread) steps the env with an empty action instead, so that the env's own rules
apply (its format penalty, the turn it costs, the truncation at the last one), and its info says
``"action_too_large": true``; not a 413 that the client would have to turn into a truncation.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from gem_core.env import ENV_THREADS
from gem_core.errors import InvalidArgument
from gem_core.serve.asgi import RequestError, json_bytes, parse_json, read_json
from gem_core.serve.sessions import Session, SessionLimitError, SessionStore

__all__ = ["ServeConfig", "check_token", "create_app"]


def check_token(token: str | None, name: str = "token") -> str | None:
    """``token``, checked: None (no authentication) or printable ASCII text to send as ``Authorization: Bearer``.

    An empty token is refused, not read as "no token": ``--token "$GEM_TOKEN"`` with the variable unset served
    without any authentication, and a client given one sent no header at all. A non-ASCII or control character
    cannot travel in an HTTP header (httpx raised a bare UnicodeEncodeError at the first request).

    Raises:
        InvalidArgument: if ``token`` is empty, not text, or not printable ASCII.
    """
    if token is None:
        return None
    if not isinstance(token, str) or not token:
        raise InvalidArgument(f"{name} is {'empty' if token == '' else type(token).__name__}: an empty token would turn "
                              "authentication off; give the token's text, or none at all (None) for no authentication.")
    if not (token.isascii() and token.isprintable()):
        raise InvalidArgument(f"{name} holds a character that is not printable ASCII (a non-English letter, a newline): "
                              "it is sent in an HTTP header, which carries only those; choose an ASCII token.")
    return token


@dataclass(frozen=True)
class ServeConfig:
    """Limits and access of a ``gem serve`` server; checked when made (the flags of ``gem serve`` are checked the
    same way), so a nonsense limit fails here, naming the field, not every request afterwards with a misleading answer.

    Raises:
        InvalidArgument: if a limit is not a positive finite number (a count: a whole one), or ``token`` is empty
            or not printable ASCII.
    """

    #: Sessions held at once.
    max_sessions: int = 256
    #: Seconds without a request after which a session is ended.
    idle_timeout: float = 300.0
    #: Seconds between two sweeps for idle sessions.
    reap_interval: float = 10.0
    #: Largest request body (or WebSocket message) in bytes, steps aside; a larger one is refused with 413.
    max_body_bytes: int = 256 * 1024
    #: Largest step body in bytes (the action, JSON-escaped); a larger action gets the env's malformed-action
    #: answer. Over WebSocket, a step message up to twice this gets that answer; a larger one closes the socket.
    max_action_bytes: int = 4 << 20
    #: Seconds a client has to send a request body.
    body_timeout: float = 10.0
    #: Seconds one env call (building, reset, step, sample, close) may take.
    step_timeout: float = 60.0
    #: When set, every request needs ``Authorization: Bearer <token>``.
    token: str | None = None

    def __post_init__(self) -> None:
        from gem_core.vector.calls import check_amount, check_count

        for name in ("max_sessions", "max_body_bytes", "max_action_bytes"):
            check_count(name, getattr(self, name))
        for name in ("idle_timeout", "reap_interval", "body_timeout", "step_timeout"):
            check_amount(name, getattr(self, name), "seconds")
        check_token(self.token, "token (--token)")


#: The fields of a reset request (a WebSocket one has its "op" too).
_RESET_FIELDS = ("seed", "options")


def _reset_args(body: Any, also: tuple[str, ...] = ()) -> dict[str, Any]:
    body = {} if body is None else body
    if not isinstance(body, dict):
        raise RequestError(422, 'expected a JSON object like {"seed": 0, "options": null}')
    accepted = (*also, *_RESET_FIELDS)
    unknown = sorted(str(key) for key in body if key not in accepted)
    if unknown:  # e.g. "Seed": silently dropping it would play an unseeded episode, not the one the client asked for
        fields = ", ".join(repr(key[:100]) for key in unknown[:5])
        raise RequestError(422, f"unknown field{'s' if len(unknown) > 1 else ''} {fields} in the reset request; "
                                f"the accepted fields are {', '.join(repr(key) for key in accepted)}")
    seed, options = body.get("seed"), body.get("options")
    if seed is not None and (not isinstance(seed, int) or isinstance(seed, bool) or seed < 0):
        raise RequestError(422, '"seed" must be a non-negative integer or null')
    if options is not None and not isinstance(options, dict):
        raise RequestError(422, '"options" must be a JSON object or null')
    return {"seed": seed, "options": options}


def _create_args(body: Any) -> None:
    expected = 'expected a JSON object like {"env_id": "game:GuessTheNumber-v0"} ({} serves the server\'s env)'
    if not isinstance(body, dict):
        raise RequestError(422, expected)
    if "env_id" in body and body["env_id"] is not None and not isinstance(body["env_id"], str):
        raise RequestError(422, f'"env_id" must be a string; {expected}')
    unknown = sorted(str(key) for key in body if key != "env_id")
    if unknown:  # e.g. "kwargs": silently ignoring it would serve an env the client did not ask for
        fields = ", ".join(repr(key[:100]) for key in unknown[:5])
        raise RequestError(422, f"unknown field{'s' if len(unknown) > 1 else ''} {fields} in the session request; the accepted field is 'env_id'")


def _step_action(body: Any) -> str:
    if not isinstance(body, dict) or not isinstance(body.get("action"), str):
        raise RequestError(422, 'expected a JSON object like {"action": "your move"}')
    return body["action"]


class _Operations:
    """What a session can be asked, shared by the HTTP routes and the WebSocket loop."""

    def __init__(self, env_id: str, store: SessionStore, config: ServeConfig):
        self.env_id, self.store, self.config = env_id, store, config

    def stuck_steps(self) -> int:
        """Env calls that outlived ``step_timeout`` and still hold their thread (a thread cannot be killed)."""
        return ENV_THREADS.running_longer_than(self.config.step_timeout)

    def stuck_error(self) -> str | None:
        """Why the server cannot serve (None while it can): hung env calls hold every env thread, so new
        work would only queue behind them and time out."""
        stuck = self.stuck_steps()
        if stuck and stuck >= ENV_THREADS.max_workers:
            return f"{stuck} env threads are stuck in steps that never returned; restart the server"
        return None

    def _refuse_if_stuck(self) -> None:
        error = self.stuck_error()
        if error:
            raise RequestError(503, error)

    async def create(self, body: Any) -> Session:
        _create_args(body)
        self._refuse_if_stuck()
        requested = body.get("env_id")
        if requested is not None and requested != self.env_id:
            raise RequestError(404, f"this server serves {self.env_id!r}, not {requested!r}")
        try:
            return await self.store.create()
        except SessionLimitError as error:
            raise RequestError(429, str(error)) from None
        except TimeoutError as error:
            raise RequestError(504, f"{error} (--step-timeout); the session was not created") from None

    def session(self, session_id: str) -> Session:
        session = self.store.get(session_id)
        if session is None:
            raise RequestError(404, self._gone(session_id))
        return session

    def _gone(self, session_id: str) -> str:
        return f"no session {session_id!r} (ended, reaped after {self.config.idle_timeout:g} s idle, or the server restarted); create one with POST /sessions"

    def _started(self, session: Session) -> None:
        if not session.started:
            raise RequestError(409, "the session has no episode yet: reset it first (POST /sessions/ID/reset, or {\"op\": \"reset\"} on /ws)")

    async def _run(self, session: Session, call: Callable[[], Awaitable[Any]]) -> Any:
        self._refuse_if_stuck()
        async with session.lock:
            if session.ended:  # while this request waited: the env is closed, or in a call given up on
                raise RequestError(404, self._gone(session.id))
            with ENV_THREADS.watching() as threads:
                task = asyncio.ensure_future(call())
            timed_out = True
            try:
                timed_out = not (await asyncio.wait({task}, timeout=self.config.step_timeout))[0]
            finally:
                session.touch()
                # On a timeout a native async call is cancelled; a call in an env thread goes on (a thread
                # cannot be stopped) and counts in stuck_steps() until it returns: the session ends, and
                # its env is closed once the call is over.
                if not task.done():
                    task.cancel()
                parts: list[Any] = [task, *threads]
                await self.store.after_call(session, [part for part in parts if not part.done()])
            if timed_out:
                raise RequestError(504, f"the env took over {self.config.step_timeout:g} s; the session was ended")
            return task.result()

    async def reset(self, session: Session, body: Any, also: tuple[str, ...] = ()) -> dict[str, Any]:
        """Start an episode; ``also``: the request's fields besides the reset's own (a WebSocket message's "op")."""
        args = _reset_args(body, also)
        try:
            observation, info = await self._run(session, lambda: session.env.areset(**args))
        except RequestError:
            raise
        except (ValueError, TypeError) as error:  # the env refuses these arguments: retrying cannot help
            raise RequestError(422, f"the env refused the reset arguments (seed={args['seed']!r}, options): {type(error).__name__}: {error}") from None
        session.started = True
        return {"observation": observation, "info": info}

    async def step(self, session: Session, body: Any) -> dict[str, Any]:
        action = _step_action(body)  # a malformed request is a 422 whatever the session's state
        self._started(session)
        return _step_answer(await self._run(session, lambda: session.env.astep(action)))

    async def oversized_step(self, session: Session) -> dict[str, Any]:
        """The env's answer to a step body over ``max_action_bytes`` (unread): the env stepped with an empty
        action, which it answers as any action it cannot use, by its own rules (the turn it costs included)."""
        self._started(session)
        answer = _step_answer(await self._run(session, lambda: session.env.astep("")))
        if isinstance(answer["info"], dict):
            answer["info"] = {**answer["info"], "action_too_large": True, "max_action_bytes": self.config.max_action_bytes}
        return answer

    async def sample(self, session: Session) -> dict[str, Any]:
        self._started(session)
        return {"action": await self._run(session, lambda: ENV_THREADS.run(session.env.sample_random_action))}


def _encoded(payload: Any) -> bytes:
    """``payload`` as JSON, or a 500 that names the env's answer: an info JSON cannot hold must fail its
    own request with a reason, not the connection with a traceback."""
    try:
        return json_bytes(payload)
    except (ValueError, TypeError, RecursionError) as error:
        raise RequestError(
            500, f"the env's answer cannot be sent as JSON ({type(error).__name__}: {error}); its info must be plain data, not circular nor nested hundreds of levels deep"
        ) from None


def _step_answer(result: Any) -> dict[str, Any]:
    observation, reward, terminated, truncated, info = result
    return {"observation": observation, "reward": float(reward), "terminated": bool(terminated), "truncated": bool(truncated), "info": info}


def _check_servable(env_id: str, make_env: Callable[[], Any]) -> None:
    """Build one env and close it, so that an env the server could never serve is refused at start-up: a
    multi-agent one (every reset was a 500 "no attribute 'areset'"), or one that cannot be built (an upstream id
    not shipped, a missing extra or dataset: every ``POST /sessions`` was a 500).

    Raises:
        StartFailed: if building fails or builds something that is not a single-agent GEM env; one line,
            naming ``env_id`` and why.
    """
    from gem_core.errors import StartFailed
    from gem_core.multi_agent import MultiAgentEnv

    try:
        env = make_env()
    except Exception as error:
        reason = " ".join(str(error).split())[:500]
        raise StartFailed(f"gem serve: cannot serve {env_id!r}: building it failed: {type(error).__name__}: {reason}") from error
    try:
        if isinstance(getattr(env, "unwrapped", env), MultiAgentEnv):
            raise StartFailed(f"gem serve: cannot serve {env_id!r}: it is a multi-agent env (its actions and results are "
                              "per-agent dicts) and a session plays one single-agent env; run it in-process instead")
        missing = [name for name in ("areset", "astep", "sample_random_action") if not callable(getattr(env, name, None))]
        if missing:
            raise StartFailed(f"gem serve: cannot serve {env_id!r}: it builds a {type(env).__name__}, not a gem_core.Env "
                              f"(it has no {', '.join(missing)})")
    finally:
        with contextlib.suppress(Exception):
            env.close()


def create_app(env_id: str, config: ServeConfig = ServeConfig(), *, make_env: Any = None) -> Any:
    """The Starlette app serving ``env_id`` (built with :func:`gem_core.make`, or ``make_env()``).

    One env is built and closed here: an env that can never be served fails now, not every session.

    Raises:
        UnknownEnvError: if ``env_id`` is not registered (and no ``make_env`` is given).
        StartFailed: if the env cannot be built, or is not a single-agent GEM env (a multi-agent one).
    """
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

    _check_servable(env_id, make_env)
    store = SessionStore(make_env, max_sessions=config.max_sessions, idle_timeout=config.idle_timeout, call_timeout=config.step_timeout)
    ops = _Operations(env_id, store, config)

    def reply(status: int, payload: Any) -> Response:
        return Response(_encoded(payload), status, media_type="application/json")

    def handler(work: Any, max_bytes: int = config.max_body_bytes, oversized: Any = None) -> Any:
        """An endpoint running ``work(request, body)``; ``oversized(request)`` answers a body over ``max_bytes``."""

        async def endpoint(request: Request) -> Response:
            try:
                body = None
                if request.method == "POST":
                    try:
                        body = await read_json(request, max_bytes=max_bytes, timeout=config.body_timeout)
                    except RequestError as error:
                        if error.status != 413 or oversized is None:
                            raise
                        return reply(200, await oversized(request))
                status, payload = await work(request, body)
                return reply(status, payload)
            except RequestError as error:
                return reply(error.status, {"detail": str(error)})
            except Exception as error:  # the env raised: this request fails, the server and session live on
                return reply(500, {"detail": f"the env raised {type(error).__name__}: {error}"})

        return endpoint

    async def create(request: Request, body: Any) -> tuple[int, Any]:
        session = await ops.create(body)
        return 201, {"session_id": session.id, "env_id": env_id}

    async def reset(request: Request, body: Any) -> tuple[int, Any]:
        return 200, await ops.reset(ops.session(request.path_params["sid"]), body)

    async def step(request: Request, body: Any) -> tuple[int, Any]:
        return 200, await ops.step(ops.session(request.path_params["sid"]), body)

    async def oversized_step(request: Request) -> Any:
        return await ops.oversized_step(ops.session(request.path_params["sid"]))

    async def sample(request: Request, body: Any) -> tuple[int, Any]:
        return 200, await ops.sample(ops.session(request.path_params["sid"]))

    async def end(request: Request, body: Any) -> tuple[int, Any]:
        if not await store.end(request.path_params["sid"]):
            raise RequestError(404, f"no session {request.path_params['sid']!r}")
        return 200, {"ended": request.path_params["sid"]}

    async def health(request: Request, body: Any) -> tuple[int, Any]:
        answer = {"status": "ok", "env_id": env_id, "sessions": len(store), "stuck_steps": ops.stuck_steps()}
        stuck = ops.stuck_error()
        if stuck:
            return 503, {**answer, "status": "stuck", "detail": stuck}
        return 200, answer

    async def websocket_session(websocket: WebSocket) -> None:
        # The session comes before the handshake is accepted: one the server cannot serve (no session slot,
        # stuck env threads) is refused with an HTTP answer and its connection ends at once. Accepted and
        # then closed, it held its connection through the WebSocket close handshake (10 s with a client
        # that never answers): ~900 raw handshakes from loopback filled the per-client connection cap and
        # /health answered 503 for 10-15 s.
        try:
            session = await ops.create({})
        except RequestError as error:
            await _refuse_handshake(websocket, error)
            return
        try:
            await websocket.accept()
        except BaseException:  # the client left while its env was built
            await store.end(session.id)
            raise

        async def send(answer: Any) -> None:
            await websocket.send_text(json_bytes(answer).decode("ascii"))

        try:
            while True:
                try:
                    received = await asyncio.wait_for(websocket.receive(), config.idle_timeout)
                except asyncio.TimeoutError:
                    await send({"error": f"no message for {config.idle_timeout:g} s (--idle-timeout); the session ended", "status": 408})
                    await websocket.close(code=1000)
                    return
                if received["type"] == "websocket.disconnect":
                    return
                message = received.get("text")
                if store.get(session.id) is None:  # reaped while idle, or ended by a step timeout
                    await send({"error": "the session ended (idle or timed out); reconnect", "status": 404})
                    await websocket.close(code=1000)
                    return
                try:
                    if message is None:
                        raise RequestError(400, 'binary frames are not read: send each request as a JSON text frame, e.g. {"op": "reset"}')
                    if len(message) > max(config.max_body_bytes, 2 * config.max_action_bytes):
                        raise RequestError(413, f"message over {config.max_body_bytes} bytes")
                    body = parse_json(message)
                    op = body.get("op") if isinstance(body, dict) else None
                    if op != "step" and len(message) > config.max_body_bytes:
                        raise RequestError(413, f"message over {config.max_body_bytes} bytes")
                    if op == "reset":
                        answer = await ops.reset(session, body, also=("op",))
                    elif op == "step" and len(message) > config.max_action_bytes:
                        answer = await ops.oversized_step(session)
                    elif op == "step":
                        answer = await ops.step(session, body)
                    elif op == "sample":
                        answer = await ops.sample(session)
                    else:
                        raise RequestError(422, 'expected {"op": "reset" | "step" | "sample", ...}')
                    text = _encoded(answer)
                except RequestError as error:
                    text = json_bytes({"error": str(error), "status": error.status})
                except Exception as error:
                    text = json_bytes({"error": f"the env raised {type(error).__name__}: {error}", "status": 500})
                await websocket.send_text(text.decode("ascii"))
        except WebSocketDisconnect:
            pass
        finally:
            await store.end(session.id)

    async def _refuse_handshake(websocket: WebSocket, error: RequestError) -> None:
        """Answer a WebSocket handshake with ``error``'s status and JSON detail (HTTP 403 where the server
        cannot send an HTTP answer to a handshake), and close the connection without upgrading it."""
        if "websocket.http.response" in websocket.scope.get("extensions", {}):
            await websocket.send_denial_response(reply(error.status, {"detail": str(error)}))
        else:
            await websocket.close(code=1013)

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
        Route("/sessions/{sid}/step", handler(step, config.max_action_bytes, oversized_step), methods=["POST"]),
        Route("/sessions/{sid}/sample", handler(sample), methods=["POST"]),
        Route("/sessions/{sid}", handler(end), methods=["DELETE"]),
        WebSocketRoute("/ws", websocket_session),
    ]
    app = Starlette(routes=routes, exception_handlers={404: not_found, 405: wrong_method}, lifespan=lifespan)
    app.state.sessions = store
    return _BearerToken(app, config.token) if config.token is not None else app


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
