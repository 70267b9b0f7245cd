"""The TRL versions this adapter implements the hooks of (``GRPOTrainer``'s ``rollout_func`` and
``environment_factory``), checked before the adapter's trainer imports TRL."""

from __future__ import annotations

from packaging.specifiers import SpecifierSet

from gem_adapters.framework_version import FrameworkVersionError, require_version

__all__ = ["SUPPORTED_TRL", "TRLVersionError", "check_trl_version"]

SUPPORTED_TRL = SpecifierSet(">=1.16,<1.17")
_INSTALL_HINT = 'Install the supported version with `pip install -e ".[trl]"` (trl>=1.16,<1.17).'


class TRLVersionError(FrameworkVersionError):
    """The installed TRL is missing or not a version whose GRPOTrainer hooks this adapter implements."""


def check_trl_version() -> str:
    """The installed TRL version, or :class:`TRLVersionError` with the install line."""
    return require_version(
        "trl", SUPPORTED_TRL, TRLVersionError, adapter="gem_adapters.trl",
        feature="GRPOTrainer(rollout_func=..., environment_factory=...)", hint=_INSTALL_HINT,
    )
