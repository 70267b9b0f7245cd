"""The environment variables GEM reads, and the one module that reads them.

Library code takes explicit arguments. Where a caller leaves one as None, the code asks
:func:`environment_value` for the job-wide default a user set outside the program (a shell, a Ray
runtime env), so one variable moves a whole job, workers included, without code changes; the CLI reads
its own through here too. No other module reads ``os.environ`` (``tests/core/test_settings.py`` checks),
so this table is the complete list.
"""

from __future__ import annotations

import os
from pathlib import Path

from gem_core.errors import UnknownKey

__all__ = ["VARIABLES", "environment_value", "home_dir"]

VARIABLES: dict[str, str] = {
    "GEM_ENV_BACKEND": "where episodes' envs are built (gem_core.placement.make_env): 'local' (default) or 'ray'",
    "GEM_RAY_ENV_ACTORS": "actors of the default Ray env pool (default 2)",
    "GEM_RAY_ENV_CPUS": "CPUs per actor of the default Ray env pool (default 1)",
    "GEM_RAY_ENV_RESOURCES": 'custom Ray resources per env actor, a JSON object such as {"gem_env": 1}',
    "GEM_RL2_MODEL": "the actor's model (tokenizer) for the rl-square env file, whose hook passes none",
    "GEM_SANDBOX": "isolation of the Python sandbox: 'bwrap' (default) or 'process'",
    "GEM_SANDBOX_BACKEND": "where sandboxed snippets and worker-bound grades run: 'local' (default) or 'ray'",
    "GEM_SANDBOX_RAY_RESOURCE": "the custom resource marking the Ray nodes sandboxes run on (default gem_sandbox)",
    "GEM_SANDBOX_POOL": "warm sandbox workers kept per pool (default 4)",
    "GEM_SEARCH_URL": "the retrieval server's /retrieve endpoint of the qa search envs",
    "GEM_SWE_HOME": "where `gem swe build` keeps the SWE pack's sdists and task trees (default ~/.cache/gem/swe)",
    "GEM_STATE_KEY": "the key that signs env states in trajectory files (default: one made in ~/.config/gem/state-key)",
    "OPENAI_API_KEY": "gem eval's API key for --base-url when --api-key is not given",
}
"""Every variable GEM reads, and what it sets."""


def environment_value(name: str) -> str | None:
    """The value of the variable ``name`` (None when unset or empty).

    Raises:
        KeyError: ``name`` is not in :data:`VARIABLES` (add it there, with what it sets).
    """
    if name not in VARIABLES:
        raise UnknownKey(f"{name!r} is not a GEM environment variable; list it in gem_core.settings.VARIABLES first.")
    return os.environ.get(name) or None


def home_dir() -> Path | None:
    """The user's home directory, or None where there is none to find: no ``$HOME`` and no passwd entry for
    the uid (a container's random uid, as Kubernetes runs them), where ``Path.home()`` raises. Callers that
    keep files there name the variable that moves them instead."""
    try:
        return Path.home()
    except (RuntimeError, KeyError):
        return None
