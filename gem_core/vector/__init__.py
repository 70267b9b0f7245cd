"""Vectorized execution of GEM text envs: many episodes stepped as one batch.

:func:`make_vec` builds a :class:`VectorEnv`, a :class:`gymnasium.vector.VectorEnv` whose observations
are a tuple of ``str`` (one per env), rewards/terminated/truncated are numpy arrays of shape
``(num_envs,)`` and infos are gymnasium's dict of arrays with ``_key`` masks.

Episode ends follow gymnasium's :class:`~gymnasium.vector.AutoresetMode` exactly (the
``SyncVectorEnv`` semantics), for env ``i`` whose episode ends at step ``t``:

- ``NEXT_STEP`` (default): step ``t`` returns the episode's last obs, reward and ``terminated``/
  ``truncated``; step ``t+1`` ignores env ``i``'s action, resets it and returns the first obs of the
  new episode with reward 0, both flags False and the reset info.
- ``SAME_STEP``: step ``t`` returns the step's reward and flags, but the *new* episode's first obs and
  the reset info; the ended episode's last obs and info are in ``infos["final_obs"][i]`` and
  ``infos["final_info"]`` (masked by ``infos["_final_obs"]``/``infos["_final_info"]``).
- ``DISABLED``: nothing is reset; stepping an ended env raises. Reset chosen envs with
  ``vec.reset(options={"reset_mask": mask})``.

Robustness, the same on every backend:

- A step that raises inside env ``i`` (any exception, ``SystemExit`` and other ``BaseException``\\ s
  included; only ``KeyboardInterrupt`` propagates) ends its episode as truncated with reward 0, the previous obs and
  ``info["error"]`` (the exception as text); the other envs' results are unaffected. In ``SAME_STEP``
  mode the error is, like any ended episode's info, in ``infos["final_info"]["error"]``.
- With the ``process`` backend a worker process that dies is replaced by a fresh env; the call it was
  running is reported the same way (``truncated``, ``info["error"]`` starting with ``WorkerDied``).
- ``step_timeout=``: a step or reset that runs longer ends the env's episode the same way, with
  ``info["error"] == "timeout"``; the env is rebuilt, so its next call starts a new episode.
- A Ctrl-C during a step propagates; the interrupted step's envs end their episodes at their next step
  (``truncated``, ``info["error"]`` starting with ``Interrupted``), and an env whose call runs on in a thread is rebuilt
  rather than called twice at once (the ``thread`` and ``async`` backends).
- ``close()`` is safe at any time and from any thread, including during a step: the step returns,
  with the envs it could not finish truncated (``info["error"]`` starting with ``closed``).
- The process backend can recycle its workers by step count or memory (``recycle_after_steps``,
  ``max_worker_memory_mb`` in ``backend_kwargs``).
- An autoreset that raises leaves the env's obs unchanged, reports ``truncated`` with
  ``info["error"]``, and is retried on the env's next step.

Seeding: env ``i`` is reset with ``seed + i`` on the first :meth:`VectorEnv.reset` (or with
``reset(seed=s)``: ``s + i``, which replaces ``make_vec``'s seeds); later resets, including autoresets,
pass ``seed=None`` so each env continues its own RNG. A reset that fails keeps its seed for the env's
next reset, so the seed goes to the first reset that succeeds. The same seed therefore gives the same
episodes whatever the backend.

Modules: :mod:`~gem_core.vector.vector_env` (episodes, autoreset, seeds), :mod:`~gem_core.vector.make`
(:func:`make_vec`), :mod:`~gem_core.vector.calls` (the per-env call protocol),
:mod:`~gem_core.vector.backends` (where envs live: :mod:`~gem_core.vector.in_process`,
:mod:`~gem_core.vector.process`).
"""

from gymnasium.vector import AutoresetMode

from gem_core.vector.calls import EnvBuilder
from gem_core.vector.make import Wrapper, make_vec
from gem_core.vector.vector_env import Actions, VectorEnv

__all__ = ["make_vec", "VectorEnv", "AutoresetMode", "EnvBuilder", "Wrapper", "Actions"]
