"""The one check every adapter makes at start-up: is a supported version of its framework installed?

A framework whose hook changed between releases fails mid-training in ways that hide the cause, so
each adapter calls :func:`require_version` before touching the framework and fails with the install line.
"""

from __future__ import annotations

from importlib import metadata

from packaging.specifiers import SpecifierSet
from packaging.version import Version

from gem_core.errors import DependencyNotInstalled

__all__ = ["FrameworkVersionError", "require_version"]


class FrameworkVersionError(DependencyNotInstalled):
    """An adapter's framework is missing, or at a version whose hook the adapter does not implement; the
    base of every adapter's own version error (``except FrameworkVersionError`` catches them all)."""


def require_version(
    distribution: str, supported: SpecifierSet, error: type[FrameworkVersionError], *, adapter: str, feature: str, hint: str
) -> str:
    """Return the installed version of ``distribution``, or raise ``error`` naming ``hint`` (the install line).

    Args:
        distribution: the framework's name on PyPI, e.g. ``"oat-llm"``.
        supported: the versions whose hook ``adapter`` implements.
        error: the adapter's own :class:`FrameworkVersionError` subclass (so callers can catch exactly this failure).
        adapter: the adapter's module name, for the message.
        feature: what those versions have that the adapter needs, for the message.
        hint: how to install a supported version.
    """
    try:
        version = metadata.version(distribution)
    except metadata.PackageNotFoundError:
        raise error(f"{distribution} is not installed. {hint}") from None
    if Version(version) not in supported:
        raise error(f"{adapter} needs {distribution} {supported} ({feature}), found {version}. {hint}")
    return version
