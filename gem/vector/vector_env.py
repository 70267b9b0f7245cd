"""``gem.vector.vector_env``: GEM's vector env, in GEM's shapes, over the core's :class:`~gem_core.vector.VectorEnv`.

What a GEM user's code relies on, and the core does differently (gymnasium's way):

- infos are a list of dicts, one per env (the core batches them into one dict of arrays);
- ``step({i: action, ...})`` steps those envs and returns only their results, in the dict's order
  (the core returns every env's slot);
- ``.envs`` and ``.env_ids`` list the envs and the ids they were made from.

Stepping, autoreset (GEM's ``SAME_STEP``: an ended env's reset observation comes back in the same step,
its final observation in ``info["final_obs"]``), seeding and the backends are the core's.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
from gymnasium.vector import AutoresetMode

from gem_core.errors import GemError, InvalidArgumentType
from gem_core.vector import VectorEnv as CoreVectorEnv

__all__ = ["AutoresetMode", "VectorEnv", "unbatch_info"]


class EnvsNotInProcessError(GemError, AttributeError):
    """Raised by :attr:`VectorEnv.envs` when the envs live in worker processes (``use_mp=True``)."""


def _plain(value: Any) -> Any:
    return value.item() if isinstance(value, np.generic) else value


def unbatch_info(infos: Mapping[str, Any], index: int) -> dict[str, Any]:
    """Env ``index``'s own info out of gymnasium's batched infos (the keys its ``_key`` mask marks)."""
    info = {}
    for key, value in infos.items():
        if key.startswith("_"):
            continue
        mask = infos.get(f"_{key}")
        if mask is not None and not mask[index]:
            continue
        info[key] = unbatch_info(value, index) if isinstance(value, Mapping) else _plain(value[index])
    return info


class VectorEnv:
    """``num_envs`` envs stepped together, with GEM's ``reset``/``step`` shapes (see the module docstring).

    ``backend`` is the core's (``"sync"``, ``"async"``, ``"thread"``, ``"process"``); the other attributes
    and methods (``call``, ``get_attr``, ``close``) are the core vector env's.

    Args:
        env_ids: The id each env was made from (listed as :attr:`env_ids`).
        env_fns: One function per env that builds it.
        autoreset_mode: When an ended env resets: GEM's ``SAME_STEP`` (its reset observation in the same step,
            the final one in ``info["final_obs"]``) or another gymnasium ``AutoresetMode``.
        backend: How the envs run (the core's backends).
    """

    def __init__(
        self,
        env_ids: Sequence[str],
        env_fns: Sequence[Callable[[], Any]],
        autoreset_mode: AutoresetMode | str = AutoresetMode.SAME_STEP,
        backend: str = "sync",
    ) -> None:
        self.env_ids = list(env_ids)
        self.env_fns = list(env_fns)
        self.vector_env = CoreVectorEnv(self.env_fns, backend=backend, autoreset_mode=autoreset_mode, seed=None)
        self.num_envs = self.vector_env.num_envs
        self.autoreset_mode = self.vector_env.autoreset_mode

    @property
    def envs(self) -> list[Any]:
        """The env objects, for backends that keep them in this process (all but ``use_mp=True``).

        Raises:
            EnvsNotInProcessError: the envs live in worker processes; use ``call``/``get_attr`` instead.
        """
        envs = getattr(self.vector_env.backend, "envs", None)
        if envs is None:
            raise self._envs_elsewhere()
        return list(envs)

    def _envs_elsewhere(self) -> EnvsNotInProcessError:
        return EnvsNotInProcessError(
            f".envs: the {self.vector_env.backend_name!r} backend keeps its envs in worker processes; read them "
            "with vec.get_attr(name) or vec.call(name, ...), or make the vector env without use_mp=True."
        )

    def reset(
        self, seed: int | Sequence[int | None] | None = None, options: dict[str, Any] | None = None, **env_kwargs: Any
    ) -> tuple[list[Any], list[dict[str, Any]]]:
        """Reset every env: ``seed`` None continues each env's stream, an int ``s`` seeds env ``i`` with
        ``s + i``, a list gives one seed per env; ``env{i}_kwargs={...}`` are env ``i``'s own reset kwargs
        (GEM's, e.g. ``idx``; they reach the env as reset options). Returns ``(observations, infos)``, one
        entry per env.

        Raises:
            InvalidArgumentType: a keyword other than ``env{i}_kwargs`` for an env ``i`` of this vector env.
        """
        per_env = self._per_env_kwargs(env_kwargs)
        if not per_env:
            observations, infos = self.vector_env.reset(seed=seed, options=options)
        else:
            # The core's vector reset gives every env the same options; plan its calls, then give each env
            # its own (the core's planner and recorder keep seeding and bookkeeping the core's).
            core = self.vector_env
            calls = core._plan_reset(seed, options)
            for i, extra in per_env.items():
                if i in calls:
                    merged = {**(calls[i].options or {}), **extra}
                    if "idx" in extra:
                        merged.setdefault("index", extra["idx"])
                    calls[i] = dataclasses.replace(calls[i], options=merged)
            observations, infos = core._record_reset(calls, core.backend.run(calls))
        return list(observations), [unbatch_info(infos, i) for i in range(self.num_envs)]

    def _per_env_kwargs(self, env_kwargs: Mapping[str, Any]) -> dict[int, dict[str, Any]]:
        per_env: dict[int, dict[str, Any]] = {}
        for name, value in env_kwargs.items():
            match = re.fullmatch(r"env(\d+)_kwargs", name)
            if match is None or int(match[1]) >= self.num_envs or not isinstance(value, Mapping):
                raise InvalidArgumentType(
                    f"VectorEnv.reset({name}=...): expected env<i>_kwargs={{...}} for an env i below {self.num_envs} "
                    "(GEM's per-env reset kwargs), or seed=/options=."
                )
            if value:
                per_env[int(match[1])] = dict(value)
        return per_env

    def step(self, actions: Sequence[str] | Mapping[int, str]) -> tuple[list[Any], np.ndarray, np.ndarray, np.ndarray, list[dict[str, Any]]]:
        """Step the envs given actions: all of them for a list, the keys of a dict (only those are returned,
        in the dict's order).

        Returns:
            ``(observations, rewards, terminated, truncated, infos)`` of the stepped envs: a list, three arrays and a
            list of per-env info dicts. With the default ``SAME_STEP`` autoreset an env whose episode ended is reset
            in the same step: its entry is the new episode's first observation, the final one in its info's ``final_obs``.

        Raises:
            ResetNeeded: Called before :meth:`reset`.
            InvalidArgument: A list whose length is not ``num_envs``, or (autoreset ``DISABLED``) an action for an
                env whose episode ended.
            InvalidArgumentType: ``actions`` is neither a list of actions nor a dict ``{env_index: action}``.
            UnknownKey: A dict key that is not an env index.
        """
        active = list(actions) if isinstance(actions, Mapping) else list(range(len(actions)))
        observations, rewards, terminated, truncated, infos = self.vector_env.step(actions)
        return (
            [observations[i] for i in active],
            rewards[active],
            terminated[active],
            truncated[active],
            [unbatch_info(infos, i) for i in active],
        )

    def __getattr__(self, name: str) -> Any:
        if name == "vector_env":  # not built yet (a failed __init__): no recursion
            raise AttributeError(name)
        if name == "envs":  # the property raised; Python retries here, so raise its error again
            raise self._envs_elsewhere()
        return getattr(self.vector_env, name)

    def __enter__(self) -> VectorEnv:
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self.vector_env.close()
