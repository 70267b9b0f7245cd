"""``gem.vector``: GEM's vector envs (``VectorEnv``, ``SyncVectorEnv``, ``AsyncVectorEnv``) in GEM's call
shapes, each over one :class:`gem_core.vector.VectorEnv`."""

from gem.vector.vector_env import AutoresetMode, VectorEnv

__all__ = ["AutoresetMode", "VectorEnv"]
