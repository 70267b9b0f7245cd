"""The shipped environments. Importing this package registers every id; each category's
``__init__`` only calls :func:`gem_core.registry.register` with string entry points, so nothing heavy
loads until an env is built."""

from gem_core.envs import code, game, judged, logic, math, multi_agent, qa, reasoning_gym, retail, swe, terminal, vision  # noqa: F401
