"""``gem.core``: GEM's ``Env`` and ``EnvWrapper`` base classes, as the core's with GEM's call shapes.

GEM's envs are written ``def reset(self, seed=None)`` and call ``super().reset(seed)`` positionally;
gymnasium (and so :class:`gem_core.Env`) takes ``reset(*, seed=None, options=None)``. The classes here
accept both, and a subclass whose ``reset`` takes no ``options`` still works under the core's wrappers
and vector envs, which always pass ``options=``.

Seeding is the core's: ``reset(seed)`` seeds the env's own ``self.np_random``, never the process-wide
``random``/``numpy`` generators as GEM does. An env ported from GEM that draws from ``random`` directly is
therefore not reproducible from its seed until it draws from ``self.np_random`` instead.
"""

from __future__ import annotations

import functools
import inspect
from typing import Any

from gem_core.env import Env as CoreEnv
from gem_core.env import StepResult, run_in_env_thread
from gem_core.errors import InvalidArgumentType
from gem_core.wrappers.core import Wrapper

__all__ = ["Env", "EnvWrapper", "ForwardPublicAttributes"]


def _accept_options(cls: type) -> None:
    """Let ``cls.reset`` be called with ``options=None`` when it declares no ``options`` parameter."""
    reset = cls.__dict__.get("reset")
    if reset is None or inspect.iscoroutinefunction(reset):
        return
    try:
        parameters = inspect.signature(reset).parameters.values()
    except (TypeError, ValueError):
        return
    if any(p.name == "options" or p.kind is p.VAR_KEYWORD for p in parameters):
        return

    declared = {p.name for p in parameters if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)} - {"self", "seed"}

    @functools.wraps(reset)
    def reset_without_options(self: Any, *args: Any, options: dict[str, Any] | None = None, **kwargs: Any) -> Any:
        # GEM's per-env reset kwargs (``vec.reset(env0_kwargs={"idx": 3})``) travel as options: a key the
        # reset declares becomes its keyword ("index" is the core's name for GEM's ``idx``, sent alongside)
        options = dict(options or {})
        if "idx" in declared and "index" in options:
            options.setdefault("idx", options["index"])
        if "index" not in declared:
            options.pop("index", None)
        unknown = sorted(set(options) - declared)
        if unknown:
            raise InvalidArgumentType(
                f"{cls.__qualname__}.reset() takes no options {unknown}, got options={options!r}; "
                "add an `options=None` parameter to it to receive them."
            )
        return reset(self, *args, **options, **kwargs)

    reset_without_options._gem_guarded = getattr(reset, "_gem_guarded", False)  # type: ignore[attr-defined]
    cls.reset = reset_without_options  # type: ignore[attr-defined]


class Env(CoreEnv):
    """GEM's ``gem.core.Env``: a :class:`gem_core.Env` whose ``reset`` also takes the seed positionally.

    A subclass whose ``reset`` has no ``options`` parameter still takes ``options=`` (the core's wrappers and
    vector envs always pass it): an option named like one of its parameters becomes that keyword (GEM's per-env
    reset kwargs, e.g. ``idx``).

    Raises:
        InvalidArgumentType: From such a subclass's ``reset``: an option it has no parameter for (the message says
            to add an ``options=None`` parameter).
    """

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        _accept_options(cls)

    def reset(self, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
        """Seed :attr:`np_random` (when ``seed`` is given) and start an episode; subclasses add the task."""
        return super().reset(seed=seed, options=options)


class ForwardPublicAttributes:
    """Mixin for ``import gem``'s wrappers: a public attribute the wrapper lacks is read from the wrapped env, as
    GEM's ``EnvWrapper`` exposes ``env_id``, ``max_turns`` and a game's settings through any stack of wrappers.

    Read live (GEM copies them when wrapping), so a value the env changes later is seen too; names starting with
    ``_`` are never forwarded (gymnasium's wrappers rely on their own private attributes being missing).
    """

    def __getattr__(self, name: str) -> Any:
        env = self.__dict__.get("env")
        if name.startswith("_") or env is None:
            raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")
        return getattr(env, name)


class EnvWrapper(ForwardPublicAttributes, Wrapper):
    """GEM's ``gem.core.EnvWrapper``: a core :class:`~gem_core.wrappers.Wrapper` for wrappers written the
    GEM way, overriding ``reset``/``step`` themselves (not the core's ``on_reset``/``on_step`` hooks).

    ``areset``/``astep`` run those overrides off the event loop, so an async trainer sees the same results.
    A public attribute the wrapper lacks is the wrapped env's (see :class:`ForwardPublicAttributes`).
    """

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        _accept_options(cls)

    def reset(self, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
        """Reset the wrapped env (``seed`` positionally, as GEM calls it) and return its first observation and info."""
        return super().reset(seed=seed, options=options)

    async def areset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
        """:meth:`reset` on the env's worker thread, so a GEM-style override never blocks the event loop."""
        return await run_in_env_thread(self.reset, seed=seed, options=options)

    async def astep(self, action: str) -> StepResult:
        """``step`` on the env's worker thread, so a GEM-style override never blocks the event loop.

        Returns:
            ``(observation, reward, terminated, truncated, info)``, as ``step`` returns it.
        """
        return await run_in_env_thread(self.step, action)
