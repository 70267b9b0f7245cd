"""Private names of RL2 this adapter uses: none, checked against rl-square 0.0.2 and RL2 main.

The env files implement RL2's public env-file functions (``reset``/``step`` on rl-square,
``generate`` on RL2 main, told apart by :func:`~gem_adapters.rl2.api.check_rl2_api`), and ``generate``
posts through ``RL2.utils.communication.async_request`` when RL2 main is installed.
``tests/adapters/rl2/test_rl2_private_api.py`` scans the adapter and fails when a private name is used
without an entry here (see :mod:`gem_adapters.private_api`).
"""

from __future__ import annotations

from gem_adapters.private_api import PrivateName

__all__ = ["PRIVATE_API", "FRAMEWORK_MODULES"]

FRAMEWORK_MODULES = ("RL2",)
"""The framework's top-level modules: a name imported from them that starts with ``_`` must be listed in :data:`PRIVATE_API`."""
PRIVATE_API: tuple[PrivateName, ...] = ()
"""Every private name of the framework the adapter uses, with why and the version it was checked against (none)."""
