"""The one check every adapter makes at start-up: is a supported version of its framework installed?

A framework whose hook changed between releases fails mid-training in ways that hide the cause, so
each adapter states its :class:`SupportedVersions` and calls its ``check()`` before touching the
framework, failing with the install line.
"""

from __future__ import annotations

from dataclasses import dataclass
from importlib import metadata

from packaging.specifiers import SpecifierSet
from packaging.version import Version

from gem_core.errors import DependencyNotInstalled

__all__ = [
    "FrameworkVersionError", "SupportedVersions", "require_version",
    "TRLVersionError", "SUPPORTED_TRL", "check_trl_version", "VerlVersionError", "SUPPORTED_VERL", "check_verl_version",
]


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

    Raises:
        FrameworkVersionError: (``error``) the framework is not installed, or its version is not in ``supported``.
    """
    try:
        version = metadata.version(distribution)
    except metadata.PackageNotFoundError:
        raise error(f"{distribution} is not installed. {hint}") from None
    if Version(version) not in supported:
        raise error(f"{adapter} needs {distribution} {supported} ({feature}), found {version}. {hint}")
    return version


@dataclass(frozen=True)
class SupportedVersions:
    """The versions of one framework whose hook an adapter implements, and how to install them.

    Args:
        distribution: the framework's name on PyPI, e.g. ``"trl"``.
        specifier: the supported versions.
        error: the adapter's own :class:`FrameworkVersionError` subclass.
        adapter: the adapter's module name, e.g. ``"gem_adapters.trl"``.
        feature: what those versions have that the adapter needs.
        extra: the GEM extra that installs a supported version (``pip install -e ".[extra]"``).
        pin: the versions that extra installs, for the message, e.g. ``"trl>=1.16,<1.17"``.
        then: a second install command, for a framework the extra cannot list (OpenRLHF: its own requirements
            include GPU-only sdists, so it is installed ``--no-deps`` after the extra's light dependencies).
    """

    distribution: str
    specifier: SpecifierSet
    error: type[FrameworkVersionError]
    adapter: str
    feature: str
    extra: str
    pin: str
    then: str | None = None

    @property
    def install_hint(self) -> str:
        """The sentence that ends every version error: the install command of the supported versions."""
        command = f'pip install -e ".[{self.extra}]"' + (f" && {self.then}" if self.then else "")
        return f"Install the supported version with `{command}` ({self.pin})."

    def check(self) -> str:
        """The installed version (from package metadata; the framework is not imported).

        Raises:
            FrameworkVersionError: (:attr:`error`) the framework is missing or not a supported version; the
                message gives the install line.
        """
        return require_version(
            self.distribution, self.specifier, self.error, adapter=self.adapter, feature=self.feature, hint=self.install_hint
        )


# -- the frameworks whose adapters check nothing beyond the version (oat and OpenRLHF check their hook too,
# -- beside it; RL2 has no version to read and checks its env-function API)


class TRLVersionError(FrameworkVersionError):
    """The installed TRL is missing or not a version whose GRPOTrainer hooks this adapter implements."""


class VerlVersionError(FrameworkVersionError):
    """The installed verl is missing or not a version whose agent-loop hook this adapter implements."""


SUPPORTED_TRL = SupportedVersions(
    "trl", SpecifierSet(">=1.16,<1.17"), TRLVersionError, adapter="gem_adapters.trl",
    feature="GRPOTrainer(rollout_func=..., environment_factory=...)", extra="trl", pin="trl>=1.16,<1.17",
)
"""TRL versions with ``GRPOTrainer``'s ``rollout_func`` and ``environment_factory``, checked before the TRL adapter's trainer imports TRL."""
SUPPORTED_VERL = SupportedVersions(
    "verl", SpecifierSet("~=0.9.1"), VerlVersionError, adapter="gem_adapters.verl",
    feature="experimental.agent_loop.AgentLoopBase and register_adv_est", extra="verl", pin="verl==0.9.1",
)
"""verl versions with ``AgentLoopBase`` and the advantage-estimator registry, checked before the agent loop or the estimator imports verl."""
check_trl_version = SUPPORTED_TRL.check
"""Fail fast unless a supported TRL is installed (reads package metadata only; TRL is not imported).

Raises:
    TRLVersionError: TRL is missing or outside :data:`SUPPORTED_TRL`; the message gives the install line.
"""
check_verl_version = SUPPORTED_VERL.check
"""Fail fast unless a supported verl is installed (reads package metadata only; verl is not imported).

Raises:
    VerlVersionError: verl is missing or outside :data:`SUPPORTED_VERL`; the message gives the install line.
"""
