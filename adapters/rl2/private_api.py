"""Internal names of RL2 this adapter relies on, checked against rl-square 0.0.2 and RL2 main.

The env files implement RL2's public env-file functions (``reset``/``step`` on rl-square,
``generate`` on RL2 main, told apart by :func:`~gem_adapters.rl2.api.check_rl2_api`), and ``generate``
posts through ``RL2.utils.communication.async_request`` when RL2 main is installed. On rl-square, the
rollout loop re-encodes the text ``reset``/``step`` return, so ``ResetStepEnv`` patches the rollout
module's ``initialize_state_dict`` to train the session's ids instead (listed below).
``tests/adapters/rl2/test_rl2_private_api.py`` scans the adapter and fails when a private name is used
without an entry here (see :mod:`gem_adapters.private_api`).
"""

from __future__ import annotations

from gem_adapters.private_api import PrivateName

__all__ = ["PRIVATE_API", "FRAMEWORK_MODULES"]

FRAMEWORK_MODULES = ("RL2",)
"""The framework's top-level modules: a name imported from them that starts with ``_`` must be listed in :data:`PRIVATE_API`."""
PRIVATE_API: tuple[PrivateName, ...] = (
    PrivateName(
        "RL2.datasets.rl.initialize_state_dict", "adapters/rl2/reset_step.py", "patches",
        "rl-square's Rollout.rollout (RL2.workers.rollout, which imports SGLang, so it is checked by "
        "tests/adapters/rl2/test_rl2_special_token_text.py instead) encodes the text reset()/step() just returned with it; "
        "ResetStepEnv replaces that module's binding with a wrapper that passes a tokenizer whose "
        "encode(state_text, add_special_tokens=False) returns the session's ids for that text. Encoded any other way, env "
        "text spelling a special token would become that token (the wrapper then refuses with RL2VersionError).",
        "rl-square", "0.0.2", params=("tokenizer", "state_text"),
        source_has=("tokenizer.encode(state_text, add_special_tokens=False)",),
    ),
)
"""Every internal name of the framework the adapter uses, with why and the version it was checked against."""
