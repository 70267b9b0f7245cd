"""Private names of OpenRLHF this adapter uses: none, checked against openrlhf 0.11.2.

The agent hook subclasses OpenRLHF's public ``AgentInstanceBase`` and ``MultiTurnAgentExecutor`` and
relies on ``MultiTurnAgentExecutor.execute``'s signature, which :func:`~gem_adapters.openrlhf.agent.check_openrlhf_version`
checks at start-up. ``tests/adapters/openrlhf/test_openrlhf_private_api.py`` scans the adapter and fails when a
private name is used without an entry here (see :mod:`gem_adapters.private_api`).
"""

from __future__ import annotations

from gem_adapters.private_api import PrivateName

__all__ = ["PRIVATE_API", "FRAMEWORK_MODULES"]

FRAMEWORK_MODULES = ("openrlhf",)
"""The framework's top-level modules: a name imported from them that starts with ``_`` must be listed in :data:`PRIVATE_API`."""
PRIVATE_API: tuple[PrivateName, ...] = ()
"""Every private name of the framework the adapter uses, with why and the version it was checked against (none)."""
