"""``gem.vector.sync_vector_env.SyncVectorEnv``: GEM's one-env-after-another vector env (the core's ``sync`` backend)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from gem.vector.vector_env import AutoresetMode, VectorEnv

__all__ = ["SyncVectorEnv"]


class SyncVectorEnv(VectorEnv):
    """Steps its envs in turn, in this thread."""

    def __init__(self, env_ids: Sequence[str], env_fns: Sequence[Callable[[], Any]],
                 autoreset_mode: AutoresetMode | str = AutoresetMode.SAME_STEP) -> None:
        """Build the envs; ``env_ids``, ``env_fns`` and ``autoreset_mode`` as :class:`~gem.vector.vector_env.VectorEnv` takes them."""
        super().__init__(env_ids, env_fns, autoreset_mode, backend="sync")
