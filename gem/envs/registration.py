"""``gem.envs.registration``: GEM's ``register``, ``make``, ``make_vec`` and ``print_envs`` over the core
registry (:mod:`gem_core.registry`) and vector env (:mod:`gem_core.vector`).

What GEM's arguments become:

- ``make(env_id, ...)`` of a game id GEM defines builds GEM's game (:mod:`gem.envs.game_env`), not the
  core's game of that name: GEM's levels, turn limits, rewards and rules.
- ``make(env_id, seed=S, **kwargs)``: GEM passes ``seed`` to the env's constructor, where it starts the
  env's stream of episodes. Here an env whose constructor takes ``seed`` (the ``rg:`` envs) gets it;
  any other env has its :attr:`np_random` seeded with ``S``, so its ``reset()`` calls without a seed
  draw the same episodes for the same ``S``.
- ``env.reset(seed)``: GEM's envs take the seed positionally, the core's by keyword only. An env ``make``
  builds from a core class is given a subclass of that class (same name, module and behaviour) whose
  ``reset`` also takes it positionally, and GEM's ``idx=`` (a dataset row: the core's ``options["index"]``);
  a dataset env also shows its rows as GEM's ``dataset``.
- ``make(env_id, load_from_cache_file=..., use_mp=...)``: hints about ``datasets``' cache and grading in
  a process pool, dropped for an env that does not take them (the shipped envs keep their own cache and
  grade their own way).
- ``make_vec(env_ids, wrappers=, vec_kwargs=, async_mode=, seed=, use_mp=)``: env ``i`` is made with
  ``vec_kwargs[i]`` (``seed`` defaults to ``seed + i``) and ``kwargs``, then wrapped by ``wrappers`` in
  order; ``use_mp`` picks the core's ``"process"`` backend, ``async_mode`` its ``"async"`` one, else
  ``"sync"``. The result is GEM's :class:`gem.vector.VectorEnv` (infos a list of dicts, ``.envs``,
  ``.env_ids``, dict-of-actions steps returning the active envs); autoreset is GEM's ``SAME_STEP``.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import sys
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from gymnasium.utils import seeding

from gem_core import registry
from gem_core.env import Env, check_seed
from gem_core.errors import InvalidArgument, InvalidArgumentType

__all__ = ["register", "make", "make_vec", "print_envs", "spec"]


def register(env_id: str, entry_point: str | Callable[..., Env], **kwargs: Any) -> None:
    """Register an env under ``env_id`` (``"category:Name"``); ``kwargs`` are its constructor defaults and
    ``max_turns`` its turn limit (see :func:`gem_core.registry.register`).

    Raises:
        ValueError: ``env_id`` is malformed or already registered (GEM raises on a taken id too).
    """
    registry.register(env_id, entry_point, **kwargs)


def _takes(factory: Callable[..., Any], name: str) -> bool:
    """Whether ``factory`` names a parameter ``name``."""
    try:
        parameters = inspect.signature(factory).parameters
    except (TypeError, ValueError):
        return False
    return name in parameters


def seed_stream(env: Any, seed: int) -> None:
    """Seed ``env``'s own generator, as ``reset(seed=seed)`` would, without starting an episode."""
    base = getattr(env, "unwrapped", env)
    base.np_random, _ = seeding.np_random(seed)


def _dataset_specs() -> dict[str, registry.EnvSpec]:
    """GEM 0.1.0's dataset ids (``gem/envs/__init__.py`` of the release), each with GEM's entry point, hub
    dataset, split and columns: the core maps several of these ids to other datasets (``math:GSM8K`` to
    ``openai/gsm8k``...) and to its own env classes."""
    math, qa = "gem.envs.math_env:MathEnv", "gem.envs.qa_env:QaEnv"
    table: list[tuple[str, str, dict[str, Any]]] = [
        *((f"math:{name}", math, {"dataset_name": f"axon-rl/{hub}"}) for name, hub in (
            ("ASDiv2K", "ASDIV-2k"), ("GSM8K", "GSM-8k"), ("Math12K", "MATH-12k"), ("Math8K-3to5", "MATH-lvl3to5-8k"),
            ("Orz57K", "ORZ-57k"), ("DeepScaleR40K", "DeepScaleR-40K"),
        )),
        *((f"logic:RuleTaker-d{depth}", qa, {"dataset_name": f"axon-rl/RuleTaker-d{depth}-70k", "split": "train", "extract_boxed": True,
                                              "question_key": "question"}) for depth in (0, 1, 2, 3, 5)),
        *((f"qa:{name}", qa, {"dataset_name": f"axon-rl/{name}", "split": "train", "question_key": "problem"})
          for name in ("NaturalQuestions", "HotpotQA")),
        *((f"eval:{name}", math, {"dataset_name": "axon-rl/math-eval", "split": split}) for name, split in (
            ("MATH500", "math"), ("AMC", "amc"), ("OlympiadBench", "olympiad_bench"), ("Minerva", "minerva"), ("AIME24", "aime24"),
        )),
        ("eval:QaOpen", qa, {"dataset_name": "google-research-datasets/nq_open", "split": "validation", "question_key": "question"}),
        *((f"eval:{name}", qa, {"dataset_name": "axon-rl/search-eval", "split": split, "question_key": "question"}) for split, name in (
            ("2wiki", "2Wiki"), ("popqa", "PopQA"), ("tq", "TriviaQA"), ("hotpotqa", "HotpotQA"), ("bamboogle", "Bamboogle"),
            ("nq", "NaturalQuestions"), ("musique", "Musique"),
        )),
    ]
    specs = {}
    for env_id, entry_point, kwargs in table:
        defaults = {"question_key": "problem"} if entry_point == math else {}
        specs[env_id] = registry.EnvSpec(id=env_id, entry_point=entry_point, kwargs={**defaults, **kwargs, "answer_key": "answer"})
    return specs


DATASET_SPECS: dict[str, registry.EnvSpec] = _dataset_specs()
"""GEM 0.1.0's ``math:``, ``qa:``, ``logic:`` and ``eval:`` dataset ids with GEM's datasets and entry points
(:mod:`gem.envs.math_env`, :mod:`gem.envs.qa_env`); :func:`spec` looks an id up here before the core registry."""

def _with_sample(gem_spec: registry.EnvSpec) -> registry.EnvSpec:
    """``gem_spec`` with the core's shipped sample rows for the same id as its ``sample_kwargs`` (in GEM's argument
    names), so offline tests and demos run GEM's env on them."""
    try:
        core = registry.spec(gem_spec.id).sample_kwargs
    except registry.UnknownEnvError:  # a GEM id the core does not ship: no sample
        return gem_spec
    if "data_files" not in core:
        return gem_spec
    sample = {"data_files": core["data_files"], "question_key": core.get("question_field", "question"), "answer_key": core.get("answer_field", "answer")}
    return dataclasses.replace(gem_spec, sample_kwargs=sample)


_CORE_REASONING_GYM = "gem_core.envs.reasoning_gym.env:ReasoningGymEnv"


def spec(env_id: str) -> registry.EnvSpec:
    """The spec ``import gem`` builds ``env_id`` from: GEM's game, dataset env or Reasoning Gym pool where GEM
    defines one (the core's ``rg:*`` envs become :class:`gem.envs.reasoning_gym.ReasoningGymEnv` with GEM's
    500 puzzles, seed 42), else the core's.

    Raises:
        gem_core.registry.UnknownEnvError: no such id (the message names the closest ones).
    """
    from gem.envs.game_env import GAME_SPECS

    found = GAME_SPECS.get(env_id)
    if found is not None:
        return found
    if env_id in DATASET_SPECS:
        return _with_sample(DATASET_SPECS[env_id])
    core = registry.spec(env_id)
    if env_id.startswith("rg:") and core.entry_point == _CORE_REASONING_GYM and "name" in core.kwargs:
        return registry.EnvSpec(
            id=env_id, entry_point="gem.envs.reasoning_gym:ReasoningGymEnv", kwargs={"name": core.kwargs["name"], "size": 500, "seed": 42}
        )
    return core


def make(env_id: str, **kwargs: Any) -> Env:
    """Build the env registered as ``env_id`` (upstream GEM's ids included) with ``kwargs`` over its
    registered ones; ``seed`` seeds its stream of episodes (see the module docstring).

    Raises:
        InvalidArgument: ``seed`` is not None or a whole number from 0 up.
        gem_core.registry.UnknownEnvError: no such id (the message names the closest ones).
        gem_core.envs.dataset.DatasetUnavailableError: the env's dataset cannot be reached; the message
            names ``env_id``, the dataset and how to pass a local copy (``data_files=``).
    """
    from gem_core.envs.dataset import DatasetUnavailableError

    seed = check_seed(kwargs.pop("seed", None))
    env_spec = spec(env_id)
    # GEM's hints about how an env runs, not what it is (datasets' cache, grading in a process pool), and the
    # rows in memory GEM's examples pass back to make (`dataset=env.dataset`) whatever the env
    for hint in ("load_from_cache_file", "use_mp", "dataset"):
        if hint in kwargs and not _takes(env_spec.load(), hint):
            del kwargs[hint]
    if seed is not None and _takes(env_spec.load(), "seed"):
        kwargs["seed"], seed = seed, None
    try:
        env = accept_positional_seed(env_spec.make(**kwargs))
    except DatasetUnavailableError as exc:  # it names the core's ids that read the dataset, which may not hold GEM's
        raise DatasetUnavailableError(f"{env_id} cannot be built: {exc}") from None
    if seed is not None:
        seed_stream(env, seed)
    env.entry_point = env.unwrapped.entry_point = env_spec.entry_point  # GEM's make sets it beside env_id
    return env


_POSITIONAL_RESET: dict[type, type] = {}


def _rebuilt(create: Callable[..., Any], args: tuple[Any, ...]) -> Any:
    """Unpickle/copy step of :func:`accept_positional_seed`'s subclass: the core's object, moved back."""
    return accept_positional_seed(create(*args))


def _takes_positional_seed(cls: type[Any]) -> bool:
    try:
        parameters = list(inspect.signature(cls.reset).parameters.values())[1:]  # after self
    except (TypeError, ValueError):
        return True  # nothing to learn from; leave the class alone
    return any(p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD, p.VAR_POSITIONAL) for p in parameters)


def accept_positional_seed(env: Any) -> Any:
    """Let ``env.reset(seed)`` work as in GEM when ``env``'s class takes the seed by keyword only.

    The instance moves to a cached subclass (same ``__name__``/``__qualname__``/``__module__``, so state
    snapshots, copies and pickles see the core's class) whose ``reset`` forwards the seed by keyword. A
    subclass, not a wrapper: a wrapper would hide the env's attributes (``max_turns``, ``dataset``...)
    that GEM's examples read.
    """
    cls: Any = type(env)  # any env class: its reset and reduce are called through it
    if _takes_positional_seed(cls):
        return env
    sub = _POSITIONAL_RESET.get(cls)
    if sub is None:

        def reset(self: Any, seed: int | None = None, options: dict[str, Any] | None = None, idx: int | None = None) -> Any:
            if idx is not None:  # GEM's dataset envs take the row as ``idx``; the core's as options["index"]
                options = {**(options or {}), "index": idx}
            return cls.reset(self, seed=seed, options=options)

        def __reduce_ex__(self: Any, protocol: Any) -> Any:
            # pickle and copy find classes by name, which names the core's class: reduce as that class,
            # then move the rebuilt object back here
            self.__class__ = cls
            try:
                reduced = cls.__reduce_ex__(self, protocol)
            finally:
                self.__class__ = _POSITIONAL_RESET[cls]
            return (_rebuilt, (reduced[0], reduced[1]), *reduced[2:])

        namespace: dict[str, Any] = {
            "reset": reset,
            "__reduce_ex__": __reduce_ex__,
            "__module__": cls.__module__,
            "__qualname__": cls.__qualname__,
            "__doc__": cls.__doc__,
        }
        # a dataset env's class has loaded gem_core.envs.dataset; not importing it here keeps `import gem` light
        datasets_module = sys.modules.get("gem_core.envs.dataset")
        if datasets_module is not None and issubclass(cls, datasets_module.DatasetEnv) and not hasattr(cls, "dataset"):
            # GEM's dataset envs hold their rows as ``dataset`` (its oat example sizes evaluations by it)
            namespace["dataset"] = property(lambda self: self.rows, doc="The env's rows (GEM's name for them).")
        sub = _POSITIONAL_RESET[cls] = type(cls.__name__, (cls,), namespace)
    env.__class__ = sub
    return env


def _make_wrapped(env_id: str, wrappers: Sequence[Callable[[Any], Any]], kwargs: Mapping[str, Any]) -> Any:
    env = make(env_id, **kwargs)
    for wrapper in wrappers:
        env = wrapper(env)
    return env


def make_vec(
    env_ids: str | Sequence[str],
    wrappers: Sequence[Callable[[Any], Any]] | None = None,
    vec_kwargs: Sequence[Mapping[str, Any]] | None = None,
    async_mode: bool = False,
    seed: int | None = 0,
    use_mp: bool = False,
    **kwargs: Any,
):
    """A :class:`gem.vector.VectorEnv` of one env per id in ``env_ids`` (see the module docstring);
    ``use_mp`` runs each env in a worker process (the core's ``process`` backend).

    Raises:
        InvalidArgument: ``vec_kwargs`` does not have one entry per env, or ``seed`` is not None or a whole number
            from 0 up.
        InvalidArgumentType: an entry of ``wrappers`` is not callable (a wrapper's name: pass
            ``gem.wrappers.wrapper_factory.get_wrapper_fns(name)`` instead).
        gem_core.registry.UnknownEnvError: an id is not registered.
    """
    from gem.vector.vector_env import AutoresetMode, VectorEnv

    seed = check_seed(seed)
    for wrapper in wrappers or ():
        if not callable(wrapper):
            hint = f"get_wrapper_fns({wrapper!r})" if isinstance(wrapper, str) else "get_wrapper_fns('name,...')"
            raise InvalidArgumentType(
                f"make_vec(wrappers=...): {wrapper!r:.60} is not a wrapper; pass callables that wrap an env, e.g. "
                f"wrappers={hint} from gem.wrappers.wrapper_factory."
            )
    ids = [env_ids] if isinstance(env_ids, str) else list(env_ids)
    if vec_kwargs is not None and len(vec_kwargs) != len(ids):
        raise InvalidArgument(f"make_vec: vec_kwargs has {len(vec_kwargs)} entries for {len(ids)} env ids; give one per env.")
    factories = []
    for index, env_id in enumerate(ids):
        spec(env_id)  # an unknown id fails here, naming the closest ids
        env_kwargs = dict(vec_kwargs[index]) if vec_kwargs is not None else {}
        if seed is not None:
            env_kwargs.setdefault("seed", seed + index)
        env_kwargs.update(kwargs)
        factories.append(functools.partial(_make_wrapped, env_id, tuple(wrappers or ()), env_kwargs))
    backend = "process" if use_mp else "async" if async_mode else "sync"
    return VectorEnv(ids, factories, autoreset_mode=AutoresetMode.SAME_STEP, backend=backend)


def print_envs() -> None:
    """Print every id ``make`` builds with its entry point and kwargs (GEM's games under GEM's ids first),
    then upstream GEM's ids that are other names for them and those not shipped here (with why)."""
    from gem.envs.game_env import GAME_SPECS

    print("Detailed Registered Environments:")
    specs = [
        *GAME_SPECS.values(), *DATASET_SPECS.values(),
        *(spec(env_id) for env_id in registry.list_envs() if env_id not in GAME_SPECS and env_id not in DATASET_SPECS),
    ]
    for env_spec in specs:
        print(f"  - {env_spec.id}:")
        print(f"      Entry Point: {env_spec.entry_point}")
        print(f"      Kwargs: {env_spec.kwargs}")
    print("Upstream GEM ids that name an env above:")
    for alias, target in registry.aliases().items():
        if alias not in GAME_SPECS and alias not in DATASET_SPECS:
            print(f"  - {alias} -> {target}")
    print("Upstream GEM ids not shipped here:")
    by_reason: dict[str, list[str]] = {}
    for env_id, reason in registry.UPSTREAM_UNAVAILABLE.items():
        by_reason.setdefault(reason, []).append(env_id)
    for reason, env_ids in by_reason.items():
        print(f"  - {', '.join(env_ids)}: {reason}")
