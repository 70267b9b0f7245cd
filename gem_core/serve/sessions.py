"""The sessions of ``gem serve``: one env instance each, used by one request at a time, reaped when idle.

Every env call (building, closing, stepping) runs in :data:`gem_core.env.ENV_THREADS` under the
store's ``call_timeout``, so that a hung one answers in time and counts in the server's stuck calls. A
thread cannot be stopped: an env whose call was given up on is closed only once that call returns,
never under it.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from gem_core.env import ENV_THREADS, Env
from gem_core.errors import GemError

__all__ = ["Session", "SessionStore", "SessionLimitError"]


class SessionLimitError(GemError, RuntimeError):
    """The server already holds its ``max_sessions``."""


@dataclass
class Session:
    """An env instance and what the server needs to share it safely."""

    id: str
    env: Env
    #: Serializes the session's requests: an env is not safe to step from two requests at once.
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    last_used: float = field(default_factory=time.monotonic)
    #: Whether a reset has succeeded: a step or sample before it is refused (409), not sent to the env.
    started: bool = False
    #: Set once the session is ended: a request that was waiting for the lock must not use the env.
    ended: bool = False
    #: Calls on the env given up on (timed out) that still run: the env is closed once none does.
    unfinished: list[Any] = field(default_factory=list)

    def touch(self) -> None:
        """Mark the session as used now (the idle timeout counts from the last use)."""
        self.last_used = time.monotonic()


class SessionStore:
    """Creates, finds and ends sessions; at most ``max_sessions`` live at once.

    Args:
        make_env: builds one env instance (the served env id's ``make``).
        max_sessions: sessions held at once; one more is refused with :class:`SessionLimitError`.
        idle_timeout: seconds without a request after which :meth:`reap` ends a session.
        call_timeout: seconds building or closing an env may take before the store stops waiting.
    """

    def __init__(self, make_env: Callable[[], Env], *, max_sessions: int, idle_timeout: float, call_timeout: float = 60.0):
        self._make_env = make_env
        self.max_sessions = max_sessions
        self.idle_timeout = idle_timeout
        self.call_timeout = call_timeout
        self._sessions: dict[str, Session] = {}
        #: Sessions being created (their env still building): they count against ``max_sessions``.
        self._reserved = 0
        #: Closes waiting for a given-up call to return (held here: a task nobody references may vanish).
        self._closing: set[asyncio.Task[None]] = set()

    def __len__(self) -> int:
        return len(self._sessions)

    async def create(self) -> Session:
        # The slot is taken before the env is built (an await): requests arriving meanwhile see it.
        """Build an env and hold it as a new session.

        Raises:
            SessionLimitError: if ``max_sessions`` sessions are live already.
            TimeoutError: if building the env takes over ``call_timeout`` (its slot is freed at once, and
                the env closed if it is built at last).
        """
        if len(self._sessions) + self._reserved >= self.max_sessions:
            raise SessionLimitError(
                f"the server holds its maximum of {self.max_sessions} sessions; end one (DELETE /sessions/ID) "
                "or start the server with a larger --max-sessions"
            )
        self._reserved += 1
        try:
            building = ENV_THREADS.submit(self._make_env)
            try:
                done, _ = await asyncio.wait({asyncio.wrap_future(building)}, timeout=self.call_timeout)
            except asyncio.CancelledError:  # the client left, or the server stops: nobody will take the env
                building.add_done_callback(_close_if_built)
                raise
            if not done:
                building.add_done_callback(_close_if_built)
                raise TimeoutError(f"building the env took over {self.call_timeout:g} s")
            env = building.result()
        finally:
            self._reserved -= 1
        session = Session(secrets.token_hex(16), env)
        self._sessions[session.id] = session
        return session

    def get(self, session_id: str) -> Session | None:
        """The session ``session_id`` (marked as used), or None if there is none."""
        session = self._sessions.get(session_id)
        if session is not None:
            session.touch()
        return session

    async def end(self, session_id: str) -> bool:
        """End a session and close its env; False if there was none.

        A request still running a call on the env closes it when that call is over (:meth:`after_call`):
        closing an env under its own step breaks both.
        """
        session = self._sessions.pop(session_id, None)
        if session is None:
            return False
        session.ended = True
        if not session.lock.locked():
            await self._close_when_free(session)
        return True

    async def after_call(self, session: Session, unfinished: list[Any]) -> None:
        """Settle ``session`` after a call on its env, before its lock is released.

        ``unfinished`` are the call's parts still running (a timed-out step's task and threads): the env is
        then in an unknown state and in use, so the session ends and its env is closed once they return.
        An env whose session was ended during the call is closed now.
        """
        if unfinished:
            session.unfinished.extend(unfinished)
            self._sessions.pop(session.id, None)
            session.ended = True
        if session.ended:
            await self._close_when_free(session)

    async def _close_when_free(self, session: Session) -> None:
        running = [asyncio.wrap_future(f) if isinstance(f, concurrent.futures.Future) else f for f in session.unfinished if not f.done()]
        if not running:
            await self._close(session.env)
            return

        async def close_after() -> None:
            await asyncio.wait(running)
            await self._close(session.env)

        task = asyncio.create_task(close_after())
        self._closing.add(task)
        task.add_done_callback(self._closing.discard)

    async def _close(self, env: Env) -> None:
        closing = asyncio.wrap_future(ENV_THREADS.submit(_close_quietly, env))
        await asyncio.wait({closing}, timeout=self.call_timeout)  # a hung close runs on, counted as stuck

    async def reap(self) -> int:
        """End every session idle for ``idle_timeout`` (not one busy with a request); how many ended."""
        now = time.monotonic()
        idle = [s.id for s in self._sessions.values() if now - s.last_used > self.idle_timeout and not s.lock.locked()]
        for session_id in idle:
            await self.end(session_id)
        return len(idle)

    async def end_all(self) -> None:
        """End every session and close its env (the server is shutting down)."""
        await asyncio.gather(*(self.end(session_id) for session_id in list(self._sessions)))


def _close_if_built(building: concurrent.futures.Future[Env]) -> None:
    """Close an env whose building was given up on, once it is built after all (nobody else holds it)."""
    if building.cancelled() or building.exception() is not None:
        return
    try:
        ENV_THREADS.submit(_close_quietly, building.result())
    except RuntimeError:  # the pool is shutting down: close here, in the thread that built it
        _close_quietly(building.result())


def _close_quietly(env: Env) -> None:
    try:
        env.close()
    except Exception:  # a broken env must not keep the server from ending the session
        pass
