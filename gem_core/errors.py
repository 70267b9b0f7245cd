"""The base of every error GEM raises on purpose, so a caller can catch GEM's errors apart from others.

Each error also keeps the built-in base that says what kind of failure it is (``LabelError`` is a
``ValueError``, ``UnknownEnvError`` a ``KeyError``, ``RemoteEnvError`` a ``ConnectionError``), so code
that catches those goes on working. Like gymnasium's ``gymnasium.error``: :class:`GemError` is its
``Error``, :class:`DependencyNotInstalled` its ``DependencyNotInstalled``.
"""

from __future__ import annotations

__all__ = ["GemError", "DependencyNotInstalled"]


class GemError(Exception):
    """An error GEM raises on purpose; its message names the cause and the fix."""


class DependencyNotInstalled(GemError, ImportError):
    """An optional dependency (an extra, a framework) is missing or unusable; the message gives the
    install line (e.g. ``pip install -e ".[vision]"``)."""
