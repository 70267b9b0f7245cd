"""``gem.envs``: GEM's registration module and the dataset env classes its ``register`` examples name
(``gem.envs.math_env:MathEnv``, ``gem.envs.qa_env:QaEnv``, ``gem.envs.code_env:CodeEnv``). The envs
themselves are the core's (:mod:`gem_core.envs`), registered when the registry is first used."""
