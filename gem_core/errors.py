"""The base of every error GEM raises on purpose, so a caller can catch GEM's errors apart from others.

Each error also keeps the built-in base that says what kind of failure it is (``LabelError`` is a
``ValueError``, ``UnknownEnvError`` a ``KeyError``, ``RemoteEnvError`` a ``ConnectionError``), so code
that catches those goes on working. Like gymnasium's ``gymnasium.error``: :class:`GemError` is its
``Error``, :class:`DependencyNotInstalled` its ``DependencyNotInstalled``.
"""

from __future__ import annotations

__all__ = ["GemError", "DependencyNotInstalled", "causes"]


class GemError(Exception):
    """An error GEM raises on purpose; its message names the cause and the fix."""


class DependencyNotInstalled(GemError, ImportError):
    """An optional dependency (an extra, a framework) is missing or unusable; the message gives the
    install line (e.g. ``pip install -e ".[vision]"``)."""


def causes(exc: BaseException) -> list[BaseException]:
    """``exc`` and what lies under it: its causes, contexts and the members of exception groups (httpx, anyio
    and the MCP SDK wrap a refused connect or an oversized answer in two or three layers, one of them an
    ExceptionGroup), each once, at most 50 (a chain can be long, and may loop)."""
    found: list[BaseException] = []
    stack = [exc]
    while stack and len(found) < 50:
        current = stack.pop()
        if any(current is seen for seen in found):
            continue
        found.append(current)
        stack.extend(e for e in (*getattr(current, "exceptions", ()), current.__context__, current.__cause__) if e is not None)
    return found
