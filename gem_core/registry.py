"""Env ids, registration and construction.

Ids read ``category:Name-vN[-variant]`` (``game:GuessTheNumber-v0-hard``, ``math:GSM8K``,
``rg:letter_counting``). Entry points are ``"module:Class"`` strings imported on first use, so
registering hundreds of envs costs nothing and ``import gem_core`` never pulls in heavy libraries.

Turn limits live in one place, the spec, as gymnasium's ``max_episode_steps`` does: ``register(...,
max_turns=N)`` records it and ``make(id, max_turns=M)`` replaces it for one env. An env whose
constructor takes ``max_turns`` (the games, the terminal env) counts its own turns, because its messages
say how many are left, so ``make`` hands it the limit; any other env is wrapped in
:class:`~gem_core.wrappers.TurnLimit`, gymnasium's ``TimeLimit`` for text envs.
"""

from __future__ import annotations

import difflib
import fnmatch
import functools
import importlib
import inspect
import re
import reprlib
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

import gymnasium as gym

from gem_core.env import Env
from gem_core.errors import DependencyNotInstalled, GemError, InvalidArgument, InvalidArgumentType

__all__ = ["EnvSpec", "register", "aliases", "make", "spec", "list_envs", "UnknownEnvError", "EnvUnavailableError", "ENV_ID_PATTERN", "REMOTE_PREFIX", "parse_remote_id",
           "needs_trust", "forwards_kwargs"]

REMOTE_PREFIX = "remote:"
"""Ids of envs served by ``gem serve`` elsewhere: ``remote:http://HOST:PORT/category:Name`` (:func:`parse_remote_id`)."""
ENV_ID_PATTERN = re.compile(r"^(?P<category>[a-z][a-z0-9_]*):(?P<name>[A-Za-z0-9_.+\-]+)\Z")
"""What a registered id looks like: ``category:Name`` (e.g. ``game:GuessTheNumber-v0``); :func:`register` refuses others.
It ends in ``\\Z``, not ``$``, which also matches before a final newline (``"game:Wordle-v0\\n"``)."""

EntryPoint = str | Callable[..., Env]


class UnknownEnvError(GemError, KeyError):
    """Raised by :func:`make` for an id nobody registered; the message names the closest ids."""

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0])


@dataclass(frozen=True)
class EnvSpec:
    """What :func:`make` needs to build an env: where its class lives and the default kwargs."""

    id: str
    entry_point: EntryPoint
    kwargs: dict[str, Any] = field(default_factory=dict)
    #: Overrides that point a dataset-backed env at the small sample shipped with the package, so tests,
    #: demos and ``gem play`` work offline. Empty for envs that need no data.
    sample_kwargs: dict[str, Any] = field(default_factory=dict)
    #: Turns an episode may take (None: no limit beyond the env's own rules); ``make`` applies it.
    max_turns: int | None = None
    #: The pip extras the env needs beyond the core install (``pip install -e ".[math]"``); ``gem list`` shows them.
    extras: tuple[str, ...] = ()

    @property
    def category(self) -> str:
        """The part of the id before the colon (``game`` of ``game:Sudoku-v0``)."""
        return self.id.split(":", 1)[0]

    def load(self) -> Callable[..., Env]:
        """Import the entry point (``"package.module:Class"``) on first use.

        Raises:
            DependencyNotInstalled: its module or class cannot be imported (most often an extra not installed;
                the message gives the install line when the spec names its extras).
        """
        if callable(self.entry_point):
            return self.entry_point
        module_name, attr = _split_entry_point(self.id, self.entry_point)
        try:
            return getattr(importlib.import_module(module_name), attr)
        except (ImportError, AttributeError) as exc:
            fix = f' Install its extras: pip install -e ".[{",".join(self.extras)}]".' if self.extras else ""
            raise DependencyNotInstalled(
                f"{self.id}: cannot load its entry point {self.entry_point!r} ({type(exc).__name__}: {exc}).{fix}"
            ) from exc

    def check_kwargs(self, *, max_turns: int | None = None, **overrides: Any) -> None:
        """Refuse what :meth:`make` would refuse before calling the constructor, without building the env: for a
        placement that builds it elsewhere, later (the Ray backend builds it at its first reset, in an actor).

        Raises:
            InvalidArgument: (a ValueError) ``max_turns`` is not a positive whole number.
            InvalidArgumentType: (a TypeError) a keyword the env's constructor does not take, or a required one missing.
            DependencyNotInstalled: the entry point cannot be imported here.
        """
        self._checked_call(max_turns, overrides)

    def _checked_call(self, max_turns: int | None, overrides: dict[str, Any]) -> tuple[Callable[..., Env], dict[str, Any], int | None, bool]:
        """``(factory, kwargs, turn limit, whether the env counts it itself)``, the kwargs checked against the factory."""
        limit = self.max_turns if max_turns is None else _check_max_turns(max_turns, f"make({self.id!r})")
        factory = self.load()
        kwargs = {**self.kwargs, **overrides}
        signature = _signature(factory)
        counts_own = limit is not None and _takes_max_turns(signature)
        if counts_own:
            kwargs["max_turns"] = limit
        _check_kwargs(self.id, factory, signature, kwargs)
        return factory, kwargs, limit, counts_own

    def make(self, *, max_turns: int | None = None, **overrides: Any) -> Env:
        """Build the env with ``overrides`` over the registered kwargs, limited to ``max_turns`` turns
        (None: :attr:`max_turns`), see the module docstring for where the limit is counted.

        Raises:
            InvalidArgument: (a ValueError) ``max_turns`` is not a positive whole number, or is given (here or
                at registration) for a multi-agent env, which no single-agent turn limit can wrap.
            InvalidArgumentType: (a TypeError) a keyword the env's constructor does not take, or a required one
                missing; the message lists the keywords it takes. Or the entry point built something that is not
                a GEM env (a factory that returns None).
        """
        factory, kwargs, limit, counts_own = self._checked_call(max_turns, overrides)
        env = _check_built(self, factory(**kwargs))
        env.unwrapped.env_id = self.id  # names the env in logged warnings (see gem_core.env.log_error_once)
        if limit is not None and not counts_own:
            from gem_core.multi_agent import MultiAgentEnv
            from gem_core.wrappers.turn_limit import TurnLimit

            if isinstance(env.unwrapped, MultiAgentEnv):  # TurnLimit counts one agent's turns, returns bare values
                env.close()
                raise InvalidArgument(
                    f"make({self.id!r}): max_turns={limit} cannot limit a multi-agent env (its results are per-agent "
                    "dicts, which the single-agent turn limit would replace); leave max_turns out: the game ends by its own rules."
                )

            env = TurnLimit(env, limit)
        return env


def _check_built(env_spec: EnvSpec, env: Any) -> Any:
    """``env`` if it is a GEM env (a :class:`~gem_core.env.Env` or :class:`~gem_core.multi_agent.MultiAgentEnv`,
    wrapped or not); otherwise a factory returned something else (None, a misregistered class), which would fail
    later, far from its cause, with an error naming neither the id nor the entry point."""
    from gem_core.multi_agent import MultiAgentEnv

    if isinstance(env, gym.Env):
        if isinstance(env.unwrapped, (Env, MultiAgentEnv)):
            return env
        env.close()
    raise InvalidArgumentType(
        f"make({env_spec.id!r}): its entry point {env_spec.entry_point!r} returned {type(env).__name__} {reprlib.repr(env)}, "
        "not a gem_core.Env (or a MultiAgentEnv, or a wrapper of one); register the env class or a factory that returns one."
    )


def _check_max_turns(max_turns: Any, where: str) -> int | None:
    from gem_core.wrappers.turn_limit import check_max_turns  # the wrappers package imports tools: not at import

    return check_max_turns(max_turns, where)


def _takes_max_turns(signature: inspect.Signature | None) -> bool:
    """Whether a factory's ``signature`` names a ``max_turns`` parameter (an env that counts its own turns)."""
    parameter = None if signature is None else signature.parameters.get("max_turns")
    return parameter is not None and parameter.kind in (parameter.POSITIONAL_OR_KEYWORD, parameter.KEYWORD_ONLY)


def _check_kwargs(id: str, factory: Callable[..., Any], signature: inspect.Signature | None, kwargs: dict[str, Any]) -> None:
    """Refuse ``kwargs`` the factory's ``signature`` cannot take before calling it, so the error is a GemError
    naming the env id and the keywords it takes (Python's own TypeError names neither). What a factory passes on
    through ``**kwargs`` to the callable it declares (:func:`forwards_kwargs`) is checked against that one's
    signature in turn: there a misspelt keyword would otherwise surface as a TypeError from inside the factory."""
    takes: dict[str, None] = {}
    partial = False  # a target may get its required arguments from the factory itself: only unknown keywords fail there
    while signature is not None:
        takes.update((name, None) for name, p in signature.parameters.items() if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY))
        try:
            bound = signature.bind_partial(**kwargs) if partial else signature.bind(**kwargs)
        except TypeError as exc:
            raise InvalidArgumentType(f"make({id!r}): {exc}; it takes {', '.join(takes) or 'no keywords'}.") from None
        rest = next((name for name, p in signature.parameters.items() if p.kind is p.VAR_KEYWORD), None)
        target = getattr(factory, "__dict__", {}).get(_FORWARDS_KWARGS_TO)  # its own declaration, not a base class's
        if rest is None or target is None:
            return
        factory, kwargs, signature, partial = target, bound.arguments.get(rest, {}), _signature(target), True


_FORWARDS_KWARGS_TO = "_gem_forwards_kwargs_to"

_Factory = TypeVar("_Factory", bound=Callable[..., Any])


def forwards_kwargs(target: Callable[..., Any]) -> Callable[[_Factory], _Factory]:
    """Declare that a factory (a function or an env class) passes its ``**kwargs`` on to ``target``, so
    :func:`make` checks them against ``target``'s signature and refuses a misspelt one by name.

    A class's declaration is its own: a subclass that takes ``**kwargs`` passes them to the class, not to
    ``target``, so it is not checked unless it declares as well.
    """

    def declare(factory: _Factory) -> _Factory:
        setattr(factory, _FORWARDS_KWARGS_TO, target)
        return factory

    return declare


def _signature(factory: Callable[..., Any]) -> inspect.Signature | None:
    """The factory's signature (None: a builtin or C callable without one), read once per factory: reading it was
    two thirds of a ``make``, which ``run_episodes`` pays per episode (issue 46). A factory that cannot be a cache
    key (an unhashable callable object) is read every time."""
    try:
        return _cached_signature(factory)
    except TypeError:  # unhashable: lru_cache could not key it
        return _read_signature(factory)


def _read_signature(factory: Callable[..., Any]) -> inspect.Signature | None:
    try:
        return inspect.signature(factory)
    except (TypeError, ValueError):
        return None


_cached_signature = functools.lru_cache(maxsize=1024)(_read_signature)


def _split_entry_point(id: str, entry_point: Any) -> tuple[str, str]:
    """``("package.module", "Class")`` of a ``"package.module:Class"`` string. A relative module (``".mod"``) is
    refused here: ``import_module`` needs the package it is relative to, which a registry entry has none of."""
    module_name, _, attr = entry_point.partition(":")
    if not module_name or not attr:
        raise InvalidArgument(f"Entry point {entry_point!r} of {id!r} must read 'package.module:Class'.")
    if module_name.startswith("."):
        raise InvalidArgument(f"Entry point {entry_point!r} of {id!r} names a relative module; give its absolute name, "
                              "'package.module:Class'.")
    return module_name, attr


def _check_id(id: Any) -> None:
    if not isinstance(id, str):
        raise InvalidArgumentType(f"An env id is a str such as 'game:Wordle-v0', got {type(id).__name__} {id!r}.")


_REGISTRY: dict[str, EnvSpec] = {}
#: Other names for registered ids (upstream GEM's, mostly); :func:`spec` resolves them silently.
_ALIASES: dict[str, str] = {}

# Upstream GEM's ids (github.com/axon-rl/gem, gem/envs/__init__.py) that name an env shipped here under
# another id. Every id upstream registers resolves: here, as a shipped id of the same name, or in
# UPSTREAM_UNAVAILABLE (tests/core/test_upstream_ids.py holds the list).
UPSTREAM_ALIASES: dict[str, str] = {
    **{f"game:TowerofHanoi-v0{v}": f"game:TowerOfHanoi-v0{v}" for v in ("", "-easy", "-hard", "-random")},
    **{f"game:Game2048-v0{v}": f"game:2048-v0{v}" for v in ("", "-easy", "-hard", "-random", "-extreme-hard")},
    "eval:MATH500": "math:MATH-500",
    "eval:AIME24": "math:AIME24",
    **{f"eval:{name}": f"math:{name}" for name in ("AMC", "OlympiadBench", "Minerva")},
    "eval:CodeContest": "code:CodeContest-test",
    "eval:QaOpen": "qa:NaturalQuestions-validation",
    **{
        f"eval:{name}": f"qa:SearchEval-{name}"
        for name in ("2Wiki", "PopQA", "TriviaQA", "HotpotQA", "Bamboogle", "NaturalQuestions", "Musique")
    },
    "math:DeepScaleR40K": "math:DeepScaleR",
}

_WEBSHOP_MISSING = (
    "WebShop is not shipped: it needs the WebShop product catalogue and a search index over it, which this "
    "package does not include. Use upstream GEM's webshop env, or serve one and reach it as "
    "remote:http://HOST:PORT/ENV_ID."
)
#: Upstream GEM ids that name an env this package does not ship, and what is missing. ``spec`` resolves
#: them, so a GEM config fails at ``make`` with the reason instead of as an unknown id; ``list_envs``
#: leaves them out (nothing can be built).
UPSTREAM_UNAVAILABLE: dict[str, str] = {
    f"webshop:{split}-{mode}": _WEBSHOP_MISSING for mode in ("html", "text", "text_rich") for split in ("train", "test")
}


class EnvUnavailableError(GemError, RuntimeError):
    """Raised by :func:`make` for an upstream GEM id whose env is not shipped; the message says what is missing."""


def _refuse(env_id: str, reason: str, **_: Any) -> Env:
    raise EnvUnavailableError(f"{env_id}: {reason}")


_builtins_loaded = False
_builtins_loading = False
_lock = threading.RLock()


def _load_builtin_envs() -> None:
    """Register the shipped envs the first time the registry is used (keeps ``import gem_core`` fast).

    :func:`register` calls this too: a user id registered before the builtins would otherwise collide
    with a shipped id only later, inside the next ``list_envs()``, and break every lookup after it.
    """
    global _builtins_loaded, _builtins_loading
    if _builtins_loaded:
        return
    with _lock:
        if _builtins_loaded or _builtins_loading:  # the builtins' own register() calls land here
            return
        _builtins_loading = True
        try:
            importlib.import_module("gem_core.envs")
            _builtins_loaded = True
        finally:
            _builtins_loading = False


def register(
    id: str,
    entry_point: EntryPoint,
    *,
    max_turns: int | None = None,
    sample_kwargs: dict[str, Any] | None = None,
    extras: Sequence[str] = (),
    **kwargs: Any,
) -> EnvSpec:
    """Register an env under ``id``; ``kwargs`` become the constructor defaults.

    ``max_turns`` is the episode's turn limit (:attr:`EnvSpec.max_turns`, applied by :func:`make`).
    ``sample_kwargs`` are the overrides that make a dataset-backed env load its shipped sample instead
    of the hub (see :attr:`EnvSpec.sample_kwargs`). ``extras`` names the pip extras the env needs
    (:attr:`EnvSpec.extras`).

    Raises:
        ValueError: if the id is malformed, already taken (shipped ids included) or in a category make() reads
            otherwise (``remote:``, an interop prefix), the entry point string is not ``"package.module:Class"``
            (a relative module included), or ``max_turns`` is not a positive whole number.
        InvalidArgumentType: (a TypeError) if ``extras`` is not a sequence of names (a str is refused:
            ``extras=("math",)``) or ``sample_kwargs`` is not a mapping.
    """
    _load_builtin_envs()
    _check_id(id)
    if not ENV_ID_PATTERN.fullmatch(id):
        raise InvalidArgument(
            f"Env id {id!r} is malformed: expected 'category:Name-vN[-variant]', e.g. 'game:GuessTheNumber-v0-hard'."
        )
    if _interop_spec(id) is not None:
        raise InvalidArgument(f"Env id {id!r} starts with {id.split(':', 1)[0]!r}:, which names another standard's envs through "
                         "gem_core.interop (make builds them without registering); pick another category.")
    if id.startswith(REMOTE_PREFIX):
        raise InvalidArgument(f"Env id {id!r} is in the 'remote' category, which make() reads as a server's address "
                              "('remote:http://HOST:PORT/category:Name'), so it could never be built; pick another category.")
    if id in _REGISTRY:
        raise InvalidArgument(f"Env id {id!r} is already registered (entry point {_REGISTRY[id].entry_point!r}); pick another id.")
    _register_upstream_aliases()
    if id in _ALIASES or id in UPSTREAM_ALIASES:
        raise InvalidArgument(f"Env id {id!r} is an alias of {UPSTREAM_ALIASES.get(id, _ALIASES.get(id))!r} (upstream GEM's name, "
                         "which configs use); registering it would shadow that env: pick another id.")
    if isinstance(entry_point, str):
        _split_entry_point(id, entry_point)
    elif not callable(entry_point):
        raise InvalidArgumentType(f"register({id!r}): the entry point is a 'package.module:Class' string or a callable that "
                        f"returns the env, got {type(entry_point).__name__} {entry_point!r}.")
    _check_max_turns(max_turns, f"register({id!r})")
    # A str is a sequence of its letters (extras="math" became m,a,t,h) and a list is no mapping: refused here, by name.
    if isinstance(extras, str) or not isinstance(extras, Sequence) or not all(isinstance(e, str) for e in extras):
        fix = f"; give extras=({extras!r},)" if isinstance(extras, str) else ""
        raise InvalidArgumentType(f"register({id!r}): extras must be a tuple of pip extra names, got {type(extras).__name__} {extras!r}{fix}.")
    if sample_kwargs is not None and not isinstance(sample_kwargs, Mapping):
        raise InvalidArgumentType(f"register({id!r}): sample_kwargs must be a dict of keyword overrides (or None), "
                                  f"got {type(sample_kwargs).__name__} {sample_kwargs!r}.")
    env_spec = EnvSpec(
        id=id, entry_point=entry_point, kwargs=dict(kwargs), sample_kwargs=dict(sample_kwargs or {}), max_turns=max_turns,
        extras=tuple(extras),
    )
    _REGISTRY[id] = env_spec
    return env_spec


def aliases() -> dict[str, str]:
    """Every alias and the id it names, sorted by alias (upstream GEM's ids included)."""
    _load_builtin_envs()
    _register_upstream_aliases()
    return dict(sorted(_ALIASES.items()))


def _register_upstream_aliases() -> None:
    for alias, target in UPSTREAM_ALIASES.items():
        if alias not in _ALIASES and alias not in _REGISTRY and target in _REGISTRY:
            _ALIASES[alias] = target


def parse_remote_id(remote_id: str) -> tuple[str, str]:
    """``"remote:http://host:port/game:Wordle-v0"`` → ``("http://host:port", "game:Wordle-v0")``.

    Raises:
        InvalidArgument: if ``remote_id`` is not ``remote:http(s)://HOST:PORT/category:Name``.
    """
    address = remote_id.removeprefix(REMOTE_PREFIX)
    url, _, env_id = address.rpartition("/")
    if not url.startswith(("http://", "https://")) or not ENV_ID_PATTERN.fullmatch(env_id):
        raise InvalidArgument(
            f"Remote env id {remote_id!r} is malformed: expected 'remote:http://HOST:PORT/category:Name', "
            "e.g. 'remote:http://127.0.0.1:8765/game:Wordle-v0' (the server runs `gem serve game:Wordle-v0`)."
        )
    return url, env_id


def _remote_spec(id: str) -> EnvSpec:
    """``remote:http://host:port/category:Name``: an env served by ``gem serve`` (see gem_core.serve.remote)."""
    url, env_id = parse_remote_id(id)
    return EnvSpec(id=id, entry_point="gem_core.serve.remote:RemoteEnv", kwargs={"url": url, "env_id": env_id})


#: Ids of envs written against another project's standard, built by the bridge in gem_core.interop:
#: ``skyrl:<SkyRL-Gym id>``, ``verifiers:<taskset module>``; the bridge's entry point, the keyword that takes the rest of the id, its extra.
INTEROP_PREFIXES: dict[str, tuple[str, str, str]] = {
    "skyrl:": ("gem_core.interop.skyrl:SkyRLEnv", "skyrl_id", "skyrl"),
    "verifiers:": ("gem_core.interop.verifiers:VerifiersEnv", "module", "verifiers"),
}


def needs_trust(id: str) -> bool:
    """Whether ``id`` makes GEM connect to a server (``remote:``) or import the module it names (``verifiers:``).

    A file (a trajectory to replay, a run's settings to resume or re-score) never chooses such an id: the user
    gives it. ``python -m`` puts the working folder first on the path, so a shared folder holding a file that named
    ``verifiers:evil`` and an ``evil.py`` ran that code.
    """
    return id.startswith((REMOTE_PREFIX, "verifiers:"))


def _interop_spec(id: str) -> EnvSpec | None:
    for prefix, (entry_point, keyword, extra) in INTEROP_PREFIXES.items():
        if id.startswith(prefix) and len(id) > len(prefix):
            return EnvSpec(id=id, entry_point=entry_point, kwargs={keyword: id[len(prefix):]}, extras=(extra,))
    return None


def spec(id: str) -> EnvSpec:
    """The :class:`EnvSpec` registered under ``id`` (or an alias of it, a ``remote:URL/ID``, or another standard's
    env through its bridge: ``skyrl:gsm8k``, see :data:`INTEROP_PREFIXES`).

    Raises:
        UnknownEnvError: if no env is registered as ``id`` (the message names the closest ids).
    """
    _check_id(id)
    if id.startswith(REMOTE_PREFIX):
        return _remote_spec(id)
    interop = _interop_spec(id)
    if interop is not None:
        return interop
    _load_builtin_envs()
    if id not in _REGISTRY:
        _register_upstream_aliases()
        id = _ALIASES.get(id, id)
    try:
        return _REGISTRY[id]
    except KeyError:
        if id in UPSTREAM_UNAVAILABLE:
            return EnvSpec(id=id, entry_point=functools.partial(_refuse, id, UPSTREAM_UNAVAILABLE[id]))
        close = difflib.get_close_matches(id, _REGISTRY, n=5, cutoff=0.5)
        if not close:
            category = id.split(":", 1)[0]
            close = sorted(k for k in _REGISTRY if k.startswith(category + ":"))[:5]
        hint = f" Did you mean {', '.join(repr(c) for c in close)}?" if close else ""
        raise UnknownEnvError(f"No env registered as {id!r}.{hint} `gem list` shows every id.") from None


def make(id: str, *, max_turns: int | None = None, **overrides: Any) -> Env:
    """Build the env registered as ``id``; ``overrides`` replace its registered kwargs and ``max_turns``
    its registered turn limit (as ``max_episode_steps`` in ``gymnasium.make``)."""
    return spec(id).make(max_turns=max_turns, **overrides)


def import_env_modules(modules: list[str]) -> None:
    """Import modules (dotted names or ``.py`` paths) that register envs: ``gem check/serve --import``."""
    import runpy
    from pathlib import Path

    for module in modules:
        if Path(module).is_dir() and not (Path(module) / "__init__.py").is_file():  # an empty namespace package: registers nothing
            files = ", ".join(str(Path(module) / f.name) for f in sorted(Path(module).glob("*.py"))[:3]) or "none here"
            raise InvalidArgument(f"{module} is a folder: --import takes the .py file that registers the env ({files}) or a dotted module name.")
        if module.endswith(".py"):
            runpy.run_path(module, run_name="gem_env_module")
        else:
            importlib.import_module(module)


def list_envs(pattern: str | None = None) -> list[str]:
    """Registered ids, sorted; ``pattern`` is a glob (``"game:*"``) or a plain substring.

    Raises:
        InvalidArgumentType: if ``pattern`` is not a str.
    """
    _load_builtin_envs()
    ids = sorted(_REGISTRY)
    if pattern is None:
        return ids
    if not isinstance(pattern, str):
        raise InvalidArgumentType(f"list_envs(pattern): a glob ('game:*') or a substring, got {type(pattern).__name__} {pattern!r}.")
    if any(ch in pattern for ch in "*?["):
        return [i for i in ids if fnmatch.fnmatchcase(i, pattern)]
    return [i for i in ids if pattern.lower() in i.lower()]
