"""Other projects' environment standards, both ways; each bridge is its own module behind its own extra.

- :mod:`gem_core.interop.skyrl` (``pip install -e ".[skyrl]"``): ``make("skyrl:<id>")`` plays any
  SkyRL-Gym env as a GEM env; :func:`gem_core.interop.skyrl.register_gem_envs` puts GEM envs in
  SkyRL-Gym's registry.
- :mod:`gem_core.interop.verifiers` (``pip install -e ".[verifiers]"``): ``make("verifiers:<module>")``
  and ``load_environment(env_id)`` for verifiers' trainers.

Nothing is imported here: each module imports its project on use, so ``import gem_core`` stays light.
OpenEnv's bridge predates this package and lives in :mod:`gem_core.serve.openenv_interop`.
"""
