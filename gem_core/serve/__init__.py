"""``gem serve``: any registered env as a service, one env instance per session, over HTTP and WebSocket.

:func:`gem_core.serve.app.create_app` builds the ASGI app (Starlette, run by uvicorn);
:class:`gem_core.serve.remote.RemoteEnv` is the matching client. Importing this package stays light: the web
stack loads when a server is built.

HTTP protocol (JSON bodies; ``Authorization: Bearer TOKEN`` on every request when the server has one):

- ``POST /sessions`` ``{"env_id": ID}`` (or ``{}``) → ``{"session_id": S}``: a new env instance (429 past
  ``max_sessions``; a body that is not a JSON object, or has another field, is a 422)
- ``POST /sessions/S/reset`` ``{"seed": int|null, "options": {}|null}`` → ``{"observation", "info"}`` (422 for
  another field, or when the env refuses the arguments with a ValueError or TypeError)
- ``POST /sessions/S/step`` ``{"action": str}`` → ``{"observation", "reward", "terminated", "truncated", "info"}``
  (409 before the first reset; an action over ``max_action_bytes`` gets the env's malformed-action answer)
- ``POST /sessions/S/sample`` → ``{"action"}``: the env's random well-formed action (409 before the first reset)
- ``DELETE /sessions/S`` ends the session; idle sessions are reaped after ``idle_timeout`` seconds
- ``GET /health`` → ``{"status": "ok", "env_id", "sessions", "stuck_steps"}``; a 503 with ``"detail"`` once env
  calls that outlived ``step_timeout`` and never returned hold every env thread (restart the server)

WebSocket ``/ws``: the connection is one session; send ``{"op": "reset"|"step"|"sample", ...}`` as a text
frame with the same fields as above and read one JSON answer per message (``{"error", "status"}`` for a
bad one, a binary frame included; the connection stays open). Bad requests get a 4xx and a message,
never a dead server. Connections are bounded too (:mod:`gem_core.serve.connections`): headers and bodies
have deadlines, and connections are capped in total and per client address.

Beside it, :mod:`gem_core.serve.generation_server` serves a model instead of an env: a loopback stand-in for
``vllm serve`` (its completion, pause/resume and weight-update routes) for asynchronous trainers on a CPU.
"""

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # loaded by __getattr__ on first use; declared for type checkers and the API reference
    from gem_core.serve.app import create_app

__all__ = ["create_app"]


def __getattr__(name: str):
    if name == "create_app":
        from gem_core.serve.app import create_app

        return create_app
    raise AttributeError(f"module 'gem_core.serve' has no attribute {name!r}")
