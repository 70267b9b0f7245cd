"""Private names of oat this adapter uses: none, checked against oat-llm 0.2.2.

``GemActor`` and ``GemLearner`` subclass oat's public ``PPOMultiTurnActor``/``PPOMultiTurnLearner`` and
override their public ``collect_experience``, ``prepare_data`` and ``evaluate``; the actor reads its public
``sampling_params``, ``tokenizer``, ``generate`` and ``args``. ``tests/adapters/oat/test_oat_private_api.py``
scans the adapter and fails when a private name is used without an entry here (see
:mod:`gem_adapters.private_api`).
"""

from __future__ import annotations

from gem_adapters.private_api import PrivateName

__all__ = ["PRIVATE_API", "FRAMEWORK_MODULES"]

FRAMEWORK_MODULES = ("oat",)
"""The framework's top-level modules: a name imported from them that starts with ``_`` must be listed in :data:`PRIVATE_API`."""
PRIVATE_API: tuple[PrivateName, ...] = ()
"""Every private name of the framework the adapter uses, with why and the version it was checked against (none)."""
