"""The verl versions this adapter implements the hooks of (``AgentLoopBase``, the advantage-estimator
registry), checked before the agent loop or the estimator imports verl."""

from __future__ import annotations

from packaging.specifiers import SpecifierSet

from gem_adapters.framework_version import FrameworkVersionError, require_version

__all__ = ["SUPPORTED_VERL", "VerlVersionError", "check_verl_version"]

SUPPORTED_VERL = SpecifierSet("~=0.9.1")
_INSTALL_HINT = 'Install the supported version with `pip install -e ".[verl]"` (verl==0.9.1).'


class VerlVersionError(FrameworkVersionError):
    """The installed verl is missing or not a version whose agent-loop hook this adapter implements."""


def check_verl_version() -> str:
    """The installed verl version, or :class:`VerlVersionError` with the install line."""
    return require_version(
        "verl", SUPPORTED_VERL, VerlVersionError, adapter="gem_adapters.verl",
        feature="experimental.agent_loop.AgentLoopBase and register_adv_est", hint=_INSTALL_HINT,
    )
