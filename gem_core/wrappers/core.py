"""The base of every GEM wrapper: gymnasium's ``Wrapper`` plus the async and text-env methods.

gymnasium 1.x wrappers forward only the gymnasium API, so ``sample_random_action``, ``areset`` and
``astep`` would be lost behind a plain ``gymnasium.Wrapper``. A GEM wrapper changes results in two
hooks, :meth:`on_reset` and :meth:`on_step`, which serve both the sync and the async path: a wrapper
is written once and an async trainer still never blocks on the inner env.
"""

from __future__ import annotations

import copy
from typing import Any

import gymnasium as gym

from gem_core.env import MAX_SEED, STATE_FORMAT, Env, StepResult, _check_state, _qualified_name, _restore_attributes, _settable_attributes, guard_episode_end
from gem_core.errors import InvalidArgumentType

__all__ = ["Wrapper"]


def check_wrapped_env(wrapper: str, env: Any) -> None:
    """Refuse a non-env before gymnasium does: its ``TypeError`` names neither the wrapper nor that an env id
    must be built first.

    Raises:
        InvalidArgumentType: if ``env`` is not a ``gymnasium.Env`` (an env id, None).
    """
    if isinstance(env, gym.Env):
        return
    if isinstance(env, str):
        raise InvalidArgumentType(
            f"{wrapper} got the env id {env!r:.120}, not an env; build it first: {wrapper}(gem_core.make({env!r:.120}), ...)."
        )
    raise InvalidArgumentType(
        f"{wrapper} wraps an env (a gymnasium.Env), got {env!r:.80}; build one first: "
        f'{wrapper}(gem_core.make("<env id>"), ...).'
    )


class Wrapper(gym.Wrapper[str, str, str, str]):
    """Wraps a GEM :class:`~gem_core.env.Env` (or another GEM wrapper).

    Raises:
        InvalidArgumentType: if ``env`` is not an env (an env id: pass ``gem_core.make(id)``).
    """

    env: Env | Wrapper  # narrower than gymnasium's: a GEM env, so areset/astep/get_state are there

    def __init__(self, env: Env | Wrapper):
        check_wrapped_env(type(self).__name__, env)
        super().__init__(env)

    def __init_subclass__(cls, **kwargs: Any) -> None:
        # A wrapper can end an episode the inner env would continue (a turn limit, a tool-call budget),
        # and must not answer after that end either.
        super().__init_subclass__(**kwargs)
        guard_episode_end(cls)

    def on_reset(self, observation: str, info: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        """Change what ``reset`` returns; the default passes it through."""
        return observation, info

    def on_step(self, action: str, result: StepResult) -> StepResult:
        """Change what ``step`` returns for ``action``; the default passes it through."""
        return result

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
        """Reset the inner env and pass its result through :meth:`on_reset`."""
        return self.on_reset(*self.env.reset(seed=seed, options=options))

    def step(self, action: str) -> StepResult:
        """Step the inner env and pass its result through :meth:`on_step`."""
        return self.on_step(action, self.env.step(action))

    async def areset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
        """:meth:`reset` through the inner env's ``areset``, so a blocking env does not block the event loop."""
        return self.on_reset(*await self.env.areset(seed=seed, options=options))

    async def astep(self, action: str) -> StepResult:
        """:meth:`step` through the inner env's ``astep``, so a blocking env does not block the event loop."""
        return self.on_step(action, await self.env.astep(action))

    def sample_random_action(self) -> str:
        """The inner env's random action."""
        return self.env.sample_random_action()

    @property
    def blocking(self) -> bool:
        """Whether a step may wait: as the inner env, unless the wrapper itself waits (tool wrappers
        declare ``blocking = True``), so a wrapped game is still stepped inline by the vector env."""
        return getattr(self.env, "blocking", True)

    # -- state (see Env.get_state) ---------------------------------------------------------------

    #: Wrapper attributes that are resources, not episode state (tool clients); shared by spawned clones.
    state_excludes: frozenset[str] = frozenset()
    #: gymnasium's own bookkeeping, rebuilt from the inner env.
    _gym_attributes = frozenset({"env", "_action_space", "_observation_space", "_metadata", "_cached_spec", "_reward_range"})

    def get_state(self) -> dict[str, Any]:
        """The wrapper's own episode state (counters, history) and the inner env's state."""
        excluded = self._gym_attributes | set().union(*(getattr(c, "state_excludes", ()) for c in type(self).__mro__))
        own = {name: copy.deepcopy(value) for name, value in vars(self).items() if name not in excluded}
        return {"format": STATE_FORMAT, "env": _qualified_name(self), "attributes": own, "inner": self.env.get_state()}

    def set_state(self, state: dict[str, Any]) -> None:
        """Restore a :meth:`get_state` snapshot of this wrapper stack: the wrapper's attributes, then the inner env's.

        Nothing changes unless the whole snapshot fits: the wrapper's attributes are checked first, the inner
        env checks (and restores) its own, and only then are the wrapper's set. As :meth:`Env.set_state` does,
        attributes the wrapper created after the snapshot are removed (so it goes on as the snapshotted one did),
        except gymnasium's own and those in :attr:`state_excludes`, which :meth:`get_state` never takes.

        Raises:
            InvalidArgument: if ``state`` is not a snapshot of this wrapper (another wrapper's, or another format),
                or is malformed (no ``attributes`` dict, an attribute that is not the wrapper's episode state).
        """
        _check_state(self, state)
        excluded = self._gym_attributes | set().union(*(getattr(c, "state_excludes", ()) for c in type(self).__mro__))
        attributes = _settable_attributes(self, state, excluded)
        self.env.set_state(state.get("inner"))  # type: ignore[arg-type]  # checked by the inner env
        _restore_attributes(self, attributes, excluded)

    def spawn(self, same_state: bool = True, *, seed: int | None = None) -> Wrapper:
        """A copy of the whole wrapper stack (see :meth:`Env.spawn`; without a seed a fresh clone's seed is drawn
        from the inner env's generator, so clones deal different episodes)."""
        if not same_state and seed is None:
            seed = int(self.np_random.integers(MAX_SEED))
        clone = copy.copy(self)
        clone.env = self.env.spawn(same_state=True)
        clone.set_state(self.get_state())
        if not same_state:
            clone.reset(seed=seed)
        return clone


guard_episode_end(Wrapper)
