"""A GEM env that lives behind ``gem serve``: :class:`RemoteEnv`, a :class:`gem_core.Env` like any other.

``make("remote:http://127.0.0.1:8765/game:Wordle-v0")`` builds one, so every adapter, the vector env
and ``gem eval`` use remote envs unchanged. Each call has one deadline for the whole exchange and
bounded retries (:mod:`gem_core.transport.http_call`); a step is never retried once sent (it must not run twice).
A step that cannot reach the server ends the episode as a truncation with ``info["error"]``; the next
:meth:`RemoteEnv.reset` opens a new session (after a server restart too).
"""

from __future__ import annotations

import asyncio
import atexit
import math
import os
import re
import threading
import time
import weakref
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar
from urllib.parse import urlsplit

from gem_core.env import Env, StepResult
from gem_core.errors import DependencyNotInstalled, GemError, InvalidArgument, InvalidArgumentType, UsageError
from gem_core.registry import REMOTE_PREFIX, parse_remote_id
from gem_core.transport.http_call import CallFailed, arequest, async_client
from gem_core.transport.sync_bridge import LoopThread, run_sync

__all__ = ["RemoteEnv", "RemoteEnvError", "parse_remote_id", "REMOTE_PREFIX"]

T = TypeVar("T")

#: Seconds for the best-effort DELETE of a session this client abandons (after a failed step, at close, at exit).
END_SESSION_TIMEOUT = 2.0
#: The default ``timeout``: above ``gem serve``'s default ``--step-timeout`` (60 s), so a slow step gets the
#: server's answer (a 504 that ends the session) instead of the client giving up while the server still works.
DEFAULT_TIMEOUT = 90.0
#: What a session id from the server must look like (``gem serve`` gives 32 hex digits). It goes into this
#: client's request paths, token attached: a hostile server's "../../admin/wipe?x=#" would steer them elsewhere.
_SESSION_ID = re.compile(r"[0-9A-Za-z_-]{1,128}")


class RemoteEnvError(GemError, ConnectionError):
    """The server refused a request (``status``) or could not be reached; the message says why."""

    def __init__(self, message: str, status: int | None = None):
        super().__init__(message)
        self.status = status


class RemoteEnv(Env):
    """An env served by ``gem serve``, one server session per instance.

    Args:
        url: the server's base address, e.g. ``http://127.0.0.1:8765``.
        env_id: the id the server serves (checked when the session opens).
        token: the server's ``--token``, sent as ``Authorization: Bearer``.
        timeout: seconds for each whole call (retries included); keep it above the server's ``--step-timeout``
            (default 60 s) so that the server, not the client, decides when a step took too long.
        retries: further attempts after a connection error or a 5xx (steps: connection errors only).
        backoff: seconds before the first retry, doubled for each next one.
        max_response_bytes: the largest answer accepted.

    Raises:
        DependencyNotInstalled: if ``httpx`` is not installed (the ``serve`` extra).
        InvalidArgument: if a setting is out of range (checked here, not at the first reset): ``token`` empty
            or not printable ASCII, ``timeout`` not above 0, ``retries`` not a whole number from 0, the
            ``url``'s port not 1 to 65535.
    """

    def __init__(
        self,
        url: str,
        env_id: str,
        *,
        token: str | None = None,
        timeout: float = DEFAULT_TIMEOUT,
        retries: int = 2,
        backoff: float = 0.2,
        max_response_bytes: int = 8 << 20,
    ):
        try:  # fail at construction, not at the first step, without the serve extra
            import httpx  # noqa: F401
        except ImportError as exc:
            raise DependencyNotInstalled('remote: envs need httpx: pip install -e ".[serve]" in the GEM checkout (or pip install httpx).') from exc

        from gem_core.serve.app import check_token
        from gem_core.vector.calls import check_amount, check_count

        # Checked here: a bad one failed only at the first reset, as a raw UnicodeEncodeError, ValueError or
        # ExceptionGroup, or as "no attempt made" naming no setting.
        check_token(token)
        check_amount("timeout", timeout, "seconds")
        check_count("retries", retries, least=0)
        check_amount("backoff", backoff, "seconds", zero_allowed=True)
        check_count("max_response_bytes", max_response_bytes)
        try:
            port = urlsplit(url).port
        except ValueError:
            port = -1
        if port is not None and not 1 <= port <= 65535:
            raise InvalidArgument(f"RemoteEnv: the port of {url[:200]!r} is out of range: expected 1 to 65535.")
        self.url = url.rstrip("/")
        #: The id the server serves (``env_id`` is the registry's name for this env, set by ``make``).
        self.served_id = env_id
        self.env_id = env_id
        self.max_step_seconds = timeout
        self.token = token
        self.timeout = timeout
        self.retries = retries
        self.backoff = backoff
        self.max_response_bytes = max_response_bytes
        self._session = _Session()
        self._init_transport()

    def _init_transport(self) -> None:
        self._pid = os.getpid()
        self._loop_thread: LoopThread | None = None
        self._finalizer: weakref.finalize | None = None
        #: The finalizer of a session opened through the async API alone (no loop thread, so no ``_finalizer``).
        self._session_finalizer: weakref.finalize | None = None
        self._clients: dict[int, tuple[asyncio.AbstractEventLoop, Any]] = {}
        self._transport_lock = threading.Lock()

    @property
    def _session_id(self) -> str | None:
        return self._session.id

    @_session_id.setter
    def _session_id(self, session_id: str | None) -> None:
        self._session.id = session_id

    # Connections, the session and the private loop stay in this process; a copy (process backends) opens its own.
    def __getstate__(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items() if not k.startswith("_")}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._session = _Session()
        self._init_transport()

    def __repr__(self) -> str:
        return f"RemoteEnv({self.url!r}, {self.served_id!r})"

    # --- snapshots: refused -----------------------------------------------------------------------

    _NO_SNAPSHOTS = ("a remote env keeps its state on its server; it cannot be snapshotted or spawned (gem serve has "
                     "no snapshot route). Branch from a reset seed instead: make another remote env and reset it with the same seed.")

    def get_state(self) -> dict[str, Any]:
        """Refused: the episode lives on the server, and copying this client would copy its connections and
        private event loop, not the episode.

        Raises:
            UsageError: always.
        """
        raise UsageError(f"RemoteEnv.get_state(): {self._NO_SNAPSHOTS}")

    def set_state(self, state: dict[str, Any]) -> None:
        """Refused, as :meth:`get_state`.

        Raises:
            UsageError: always.
        """
        raise UsageError(f"RemoteEnv.set_state(): {self._NO_SNAPSHOTS}")

    def spawn(self, same_state: bool = True, *, seed: int | None = None) -> RemoteEnv:
        """Refused, as :meth:`get_state` (``EpisodeSession.fork`` and branched episodes spawn).

        Raises:
            UsageError: always.
        """
        raise UsageError(f"RemoteEnv.spawn(): {self._NO_SNAPSHOTS}")

    # --- transport -------------------------------------------------------------------------------

    def _client(self) -> Any:
        """This event loop's ``httpx.AsyncClient`` (a client's connections belong to one loop)."""
        import httpx

        loop = asyncio.get_running_loop()
        entry = self._clients.get(id(loop))
        if entry is None or entry[0] is not loop:
            entry = (loop, async_client(self.timeout, limits=httpx.Limits(max_connections=4)))
            self._clients[id(loop)] = entry
        return entry[1]

    def _sync(self, make_coroutine: Callable[[], Awaitable[T]]) -> T:
        if self._pid != os.getpid():
            self._init_transport()
        with self._transport_lock:
            if self._loop_thread is None:
                self._loop_thread = LoopThread("gem-remote-env")
                # An env dropped without close() would hold its thread, loop, connections and server session
                # for the life of the process; the finalizer (no reference to the env) lets them go.
                self._finalizer = weakref.finalize(self, _release, self._loop_thread, self._session, self._clients,
                                                   self.url, self.token, self._pid)
                self._finalizer.atexit = False  # at exit, _end_open_sessions ends the sessions left open
        return self._loop_thread.run(make_coroutine)

    async def _request(self, method: str, path: str, payload: Any = None, *, idempotent: bool = True) -> dict[str, Any]:
        headers = {"authorization": f"Bearer {self.token}"} if self.token else {}
        try:
            reply = await arequest(
                method,
                self.url + path,
                payload=payload,
                headers=headers,
                timeout=self.timeout,
                retries=self.retries,
                backoff=self.backoff,
                max_bytes=self.max_response_bytes,
                client=self._client(),
                idempotent=idempotent,
            )
        except CallFailed as error:
            hint = "" if error.timed_out or "unreachable" not in error.reason else f"; is `gem serve` running at {self.url}?"
            raise RemoteEnvError(f"gem serve at {self.url}: {error.reason}{hint}") from None
        if 300 <= reply.status < 400:
            raise RemoteEnvError(
                f"gem serve at {self.url} answered HTTP {reply.status}, a redirect to {reply.location!r}, which is not followed; "
                "give the server's own address in the remote: id", reply.status,
            )
        try:
            data = reply.json()
        except (ValueError, RecursionError):
            data = None
        if reply.status >= 400:
            detail = data.get("detail") if isinstance(data, dict) else reply.text[:300]
            raise RemoteEnvError(f"gem serve at {self.url} answered HTTP {reply.status}: {detail}", reply.status)
        if not isinstance(data, dict):
            raise RemoteEnvError(f"gem serve at {self.url} answered with a body that is not a JSON object: {reply.text[:300]!r}")
        return data

    async def _open_session(self) -> str:
        data = await self._request("POST", "/sessions", {"env_id": self.served_id})
        if not isinstance(data.get("session_id"), str):
            raise RemoteEnvError(f"gem serve at {self.url} answered without a session id: {str(data)[:300]}")
        if not _SESSION_ID.fullmatch(data["session_id"]):
            raise RemoteEnvError(f"gem serve at {self.url} answered a session id that is not a plain token "
                                 f"(letters, digits, '_' and '-', at most 128): {data['session_id'][:200]!r}; is it gem serve?")
        _OPEN.add(self)  # ended at interpreter exit if still open then
        if self._finalizer is None and self._session_finalizer is None:
            # Used through areset/astep alone, the env has no loop thread and so no _release: dropped without
            # close(), it held its session until the server reaped it (_OPEN, being weak, forgets it at once).
            self._session_finalizer = weakref.finalize(self, _end_dropped_session, self._session, self._clients,
                                                       self.url, self.token, self._pid)
            self._session_finalizer.atexit = False  # at exit, _end_open_sessions ends the sessions left open
        return data["session_id"]

    async def _end_session(self, session_id: str) -> None:
        """DELETE a session this client lets go of (best effort, :data:`END_SESSION_TIMEOUT` at most)."""
        await _delete_session(self.url, self.token, session_id, self._client(), min(self.timeout, END_SESSION_TIMEOUT))

    # --- the env API -----------------------------------------------------------------------------

    async def areset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
        """Start an episode on the server (opening a session first if none is open).

        Raises:
            RemoteEnvError: the server cannot be reached or refuses (a reset has no result to fall back on).
            InvalidArgumentType: ``options`` holds a value JSON cannot carry to the server (a set, a numpy number).
        """
        super().reset(seed=seed)
        _check_json("options", options)
        for attempt in range(2):
            if self._session_id is None:
                self._session_id = await self._open_session()
            try:
                data = await self._request("POST", f"/sessions/{self._session_id}/reset", {"seed": seed, "options": options})
            except RemoteEnvError as error:
                if error.status == 404 and attempt == 0:  # reaped or the server restarted: open a new session
                    self._session_id = None
                    continue
                raise
            observation, info = data.get("observation"), data.get("info")
            if not isinstance(observation, str) or not isinstance(info, dict):
                raise RemoteEnvError(f"gem serve at {self.url}: a reset answer needs 'observation' (str) and 'info' (object), got {str(data)[:300]}")
            return observation, info
        raise AssertionError("unreachable")

    async def astep(self, action: str) -> StepResult:
        """One step on the server; a failure is a truncation with ``info["error"]``, never an exception."""
        if self._session_id is None:
            return "", 0.0, False, True, {"error": "no remote session: call reset() first (or the last one ended in an error or was interrupted)"}
        if not isinstance(action, str):
            return "", 0.0, False, True, {"error": f"actions are text; got {type(action).__name__}"}
        try:
            data = await self._request("POST", f"/sessions/{self._session_id}/step", {"action": action}, idempotent=False)
        except asyncio.CancelledError:
            # Ctrl-C or a caller's timeout: the server may still apply the step, so this client no longer knows
            # where the episode stands. End the session: the next step asks for a reset instead of going on out of step.
            session_id, self._session_id = self._session_id, None
            if session_id is not None:
                await self._end_session(session_id)
            raise
        except RemoteEnvError as error:
            if error.status is None or error.status == 404 or error.status >= 500:
                # The session is gone or its env in an unknown state: let it go, and end it on the server
                # (after a client timeout or a 5xx it would otherwise be held until the idle reap).
                session_id, self._session_id = self._session_id, None
                if error.status != 404:
                    await self._end_session(session_id)
            return "", 0.0, False, True, {"error": str(error)}
        try:
            observation, reward, terminated, truncated, info = (data[k] for k in ("observation", "reward", "terminated", "truncated", "info"))
            if not isinstance(observation, str) or not isinstance(info, dict) or not isinstance(terminated, bool) or not isinstance(truncated, bool):
                raise TypeError
            reward = float(reward)
            if not math.isfinite(reward):  # JSON's NaN and Infinity parse; a trainer must never see them
                raise ValueError
        except (KeyError, TypeError, ValueError):
            session_id, self._session_id = self._session_id, None
            await self._end_session(session_id)
            return "", 0.0, False, True, {"error": f"gem serve at {self.url}: malformed step answer {str(data)[:300]}"}
        return observation, reward, terminated, truncated, info

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
        return self._sync(lambda: self.areset(seed=seed, options=options))

    def step(self, action: str) -> StepResult:
        return self._sync(lambda: self.astep(action))

    def sample_random_action(self) -> str:
        """The served env's random well-formed action (needs an open session: call reset first).

        Raises:
            RemoteEnvError: if there is no session yet (call :meth:`reset` first).
        """
        if self._session_id is None:
            raise RemoteEnvError("no remote session: call reset() before sample_random_action()")

        async def sample() -> str:
            data = await self._request("POST", f"/sessions/{self._session_id}/sample", {})
            if not isinstance(data.get("action"), str):
                raise RemoteEnvError(f"gem serve at {self.url}: malformed sample answer {str(data)[:300]}")
            return data["action"]

        return self._sync(sample)

    async def aclose(self) -> None:
        """End the server session (best effort) and close this loop's connections."""
        session_id, self._session_id = self._session_id, None
        _OPEN.discard(self)
        self._detach_session_finalizer()
        if session_id is not None:
            await self._end_session(session_id)
        loop = asyncio.get_running_loop()
        entry = self._clients.pop(id(loop), None)
        if entry is not None:
            await entry[1].aclose()

    def close(self) -> None:
        """End the server session (best effort), close connections and stop the private loop thread."""
        if self._pid != os.getpid():
            return
        if self._loop_thread is not None:
            try:
                self._loop_thread.run(self.aclose)
            except Exception:
                pass
            self._loop_thread.stop()
            self._loop_thread = None
            if self._finalizer is not None:
                self._finalizer.detach()
                self._finalizer = None
        elif self._session_id is not None:
            run_sync(self.aclose)
        self._detach_session_finalizer()
        super().close()

    def _detach_session_finalizer(self) -> None:
        if self._session_finalizer is not None:
            self._session_finalizer.detach()
            self._session_finalizer = None


class _Session:
    """The server session a RemoteEnv holds, kept apart from the env so that its finalizer can end it."""

    __slots__ = ("id",)

    def __init__(self) -> None:
        self.id: str | None = None


async def _delete_session(url: str, token: str | None, session_id: str, client: Any, timeout: float) -> None:
    """DELETE ``session_id`` (best effort). Retried once: a pooled connection the server dropped (after a 5xx,
    say) fails the first attempt, and a DELETE is safe to repeat."""
    try:
        await arequest("DELETE", f"{url}/sessions/{session_id}", timeout=timeout, retries=1,
                       headers={"authorization": f"Bearer {token}"} if token else {}, client=client)
    except CallFailed:
        pass


def _release(loop_thread: LoopThread, session: _Session, clients: dict[int, tuple[asyncio.AbstractEventLoop, Any]],
             url: str, token: str | None, pid: int) -> None:
    """What a RemoteEnv collected without close() held: end its session, close its loop's connections, stop its
    loop thread. Its finalizer, so it takes the env's parts, never the env."""
    if os.getpid() != pid:  # a forked copy: the parent's session and thread are not its own
        return

    async def release() -> None:
        session_id, session.id = session.id, None
        entry = clients.pop(id(asyncio.get_running_loop()), None)
        client = entry[1] if entry is not None else None
        if session_id is not None:
            await _delete_session(url, token, session_id, client, END_SESSION_TIMEOUT)
        if client is not None:
            await client.aclose()

    if threading.current_thread() is loop_thread.thread:  # collected on its own loop: it cannot wait on itself
        loop_thread.loop.create_task(release()).add_done_callback(lambda _: loop_thread.stop())
        return
    try:
        loop_thread.run(release, timeout=END_SESSION_TIMEOUT + 1)
    except Exception:  # best effort: the server reaps what is left after --idle-timeout
        pass
    loop_thread.stop()


#: Tasks ending the sessions of envs collected on a running loop (a loop holds its tasks only weakly).
_ENDING: set[asyncio.Task[None]] = set()
#: The sessions those tasks are ending, by (url, session id): (token, pid). An entry goes once its DELETE is done;
#: what a task could not end (its loop shut down first) :func:`_end_open_sessions` ends at interpreter exit.
_DROPPED: dict[tuple[str, str], tuple[str | None, int]] = {}


def _end_dropped_session(session: _Session, clients: dict[int, tuple[asyncio.AbstractEventLoop, Any]], url: str,
                         token: str | None, pid: int) -> None:
    """What a RemoteEnv used only through its async API held when collected without close(): end its session and
    close its connections on the loop it was collected on. Its finalizer, so it takes the env's parts, never the env."""
    if os.getpid() != pid:  # a forked copy: the parent's session is not its own
        return
    session_id, session.id = session.id, None
    try:
        loop: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
    except RuntimeError:
        loop = None
    if loop is not None:
        # Collected inside a coroutine: waiting on the DELETE here would block the very loop that must carry it.
        entry = clients.pop(id(loop), None)
        client = entry[1] if entry is not None and entry[0] is loop else None
        if session_id is None and client is None:
            return

        async def end(session_id: str) -> None:
            await _delete_session(url, token, session_id, client, END_SESSION_TIMEOUT)
            _DROPPED.pop((url, session_id), None)

        async def release() -> None:
            if session_id is not None:
                try:
                    await end(session_id)
                except asyncio.CancelledError:
                    # The loop is shutting down: asyncio.run cancels the tasks left once its coroutine returns, and
                    # that return is what dropped an env kept in the coroutine's locals. It still runs the loop until
                    # they finish: end the session (END_SESSION_TIMEOUT at most), close the client, then be cancelled.
                    await end(session_id)
                    if client is not None:
                        await client.aclose()
                    raise
            if client is not None:
                await client.aclose()

        if session_id is not None:
            _DROPPED[url, session_id] = (token, pid)
        task = loop.create_task(release())
        _ENDING.add(task)
        task.add_done_callback(_ENDING.discard)
        return
    if session_id is None:
        return
    # No loop runs here (the env's own has ended, as after asyncio.run): a plain blocking DELETE, as at exit.
    try:
        import httpx

        with httpx.Client() as client:
            client.delete(f"{url}/sessions/{session_id}", headers={"authorization": f"Bearer {token}"} if token else {},
                          timeout=END_SESSION_TIMEOUT)
    except Exception:  # best effort: the server reaps what is left after --idle-timeout
        pass


def _check_json(where: str, value: Any, depth: int = 0) -> None:
    """Refuse what JSON cannot carry to the server, naming where it is: ``json`` would say only its type."""
    if value is None or isinstance(value, (str, bool, int, float)):
        return
    if depth > _MAX_OPTION_DEPTH:  # circular, or deeper than any env's options
        raise InvalidArgumentType(f"RemoteEnv.reset: {where[:200]} is nested over {_MAX_OPTION_DEPTH} levels deep (circular?), "
                                  "which is not JSON gem serve can take: pass plain, shallow data.")
    if isinstance(value, dict):
        for key, item in value.items():
            if not isinstance(key, (str, int, float, bool)) and key is not None:
                raise InvalidArgumentType(
                    f"RemoteEnv.reset: {where} has a key {key!r} of type {type(key).__name__}, which is not JSON; "
                    "gem serve receives the options as JSON, whose keys are strings: use str keys."
                )
            _check_json(f"{where}[{key!r}]", item, depth + 1)
        return
    if isinstance(value, (list, tuple)):
        for index, item in enumerate(value):
            _check_json(f"{where}[{index}]", item, depth + 1)
        return
    raise InvalidArgumentType(
        f"RemoteEnv.reset: {where} is of type {type(value).__name__}, which is not JSON; gem serve receives the options as "
        "JSON: pass dicts, lists, str, int, float, bool or None (list(...) for a set, float(...) or int(...) for a numpy number)."
    )


#: How deep reset options may nest (a circular dict would recurse until Python's own limit).
_MAX_OPTION_DEPTH = 100

#: RemoteEnvs that opened a session and were not closed: their sessions are ended at interpreter exit.
_OPEN: weakref.WeakSet[RemoteEnv] = weakref.WeakSet()
#: Seconds the exit hook spends on DELETEs in all.
EXIT_BUDGET = 5.0


@atexit.register
def _end_open_sessions() -> None:
    """At interpreter exit (a Ctrl-C included), DELETE the sessions of RemoteEnvs never closed (best effort).

    Plain synchronous calls, not the private loop thread (which may be mid-step or gone). A client killed
    outright (SIGKILL) runs no hook: the server reaps its sessions after ``--idle-timeout``.
    """
    pending = [env for env in list(_OPEN) if env._session_id is not None and env._pid == os.getpid()]
    dropped = [key for key, (_, pid) in list(_DROPPED.items()) if pid == os.getpid()]
    if not pending and not dropped:
        return
    try:
        import httpx
    except ImportError:
        return
    deadline = time.monotonic() + EXIT_BUDGET
    ends: list[tuple[str, str | None, str]] = []
    for env in pending:
        session_id, env._session_id = env._session_id, None
        if session_id is not None:
            ends.append((env.url, env.token, session_id))
    for url, session_id in dropped:  # dropped envs whose release task did not finish its DELETE (its loop closed first)
        entry = _DROPPED.pop((url, session_id), None)
        if entry is not None:
            ends.append((url, entry[0], session_id))
    with httpx.Client() as client:
        for url, token, session_id in ends:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                break
            headers = {"authorization": f"Bearer {token}"} if token else {}
            try:
                client.delete(f"{url}/sessions/{session_id}", headers=headers, timeout=min(END_SESSION_TIMEOUT, remaining))
            except Exception:  # best effort: the server reaps what is left after --idle-timeout
                pass
