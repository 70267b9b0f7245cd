"""The sessions of ``gem serve``: one env instance each, used by one request at a time, reaped when idle."""

from __future__ import annotations

import asyncio
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from gem_core.env import Env
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

    def touch(self) -> None:
        """Mark the session as used now (the idle timeout counts from the last use)."""
        self.last_used = time.monotonic()


class SessionStore:
    """Creates, finds and ends sessions; at most ``max_sessions`` live at once.

    Args:
        make_env: builds one env instance (the served env id's ``make``).
        max_sessions: sessions held at once; one more is refused with :class:`SessionLimitError`.
        idle_timeout: seconds without a request after which :meth:`reap` ends a session.
    """

    def __init__(self, make_env: Callable[[], Env], *, max_sessions: int, idle_timeout: float):
        self._make_env = make_env
        self.max_sessions = max_sessions
        self.idle_timeout = idle_timeout
        self._sessions: dict[str, Session] = {}
        #: Sessions being created (their env still building): they count against ``max_sessions``.
        self._reserved = 0

    def __len__(self) -> int:
        return len(self._sessions)

    async def create(self) -> Session:
        # The slot is taken before the env is built (an await): requests arriving meanwhile see it.
        """Build an env and hold it as a new session.

        Raises:
            SessionLimitError: if ``max_sessions`` sessions are live already.
        """
        if len(self._sessions) + self._reserved >= self.max_sessions:
            raise SessionLimitError(
                f"the server holds its maximum of {self.max_sessions} sessions; end one (DELETE /sessions/ID) "
                "or start the server with a larger --max-sessions"
            )
        self._reserved += 1
        try:
            env = await asyncio.to_thread(self._make_env)
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
        """End a session and close its env; False if there was none."""
        session = self._sessions.pop(session_id, None)
        if session is None:
            return False
        await asyncio.to_thread(_close_quietly, session.env)
        return True

    async def reap(self) -> int:
        """End every session idle for ``idle_timeout`` (not one busy with a request); how many ended."""
        now = time.monotonic()
        idle = [s.id for s in self._sessions.values() if now - s.last_used > self.idle_timeout and not s.lock.locked()]
        for session_id in idle:
            await self.end(session_id)
        return len(idle)

    async def end_all(self) -> None:
        """End every session and close its env (the server is shutting down)."""
        for session_id in list(self._sessions):
            await self.end(session_id)


def _close_quietly(env: Env) -> None:
    try:
        env.close()
    except Exception:  # a broken env must not keep the server from ending the session
        pass
