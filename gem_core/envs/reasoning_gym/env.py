"""One ReasoningGym task per episode, generated offline and scored by reasoning-gym's own scorer.

reasoning-gym datasets are procedural: item ``i`` of ``(name, seed, size, config)`` is always the same
puzzle, so the env draws an index with ``self.np_random`` and needs no download. The reward is the
dataset's ``score_answer`` (1.0 for a correct answer; some tasks give partial credit below 1.0, e.g. a
legal but unfinished Rush Hour solution). A response without ``<answer>...</answer>`` or ``\\boxed{}``
gets the format penalty.

Scorers evaluate what the model wrote (``10**10**10`` as an n-queens answer ran for minutes,
``1e999999`` for 40-85 s), so scoring runs in a killable worker of the ``"rg"``
:func:`~gem_core.envs.scoring_pool.scoring_pool` with a time limit; a timeout or a scorer crash scores 0
with ``info["error"]`` set and one logged warning per env id, as does a score that is not a finite number.

Where a scorer is fooled, GEM decides first (:func:`guarded_verdict`): a gold bool spelled as text is compared
as text, and an answer spelling NaN scores 0 with ``info["score_note"]`` saying why.
"""

from __future__ import annotations

import functools
import json
import math
import numbers
import re
import threading
from collections.abc import Callable
from typing import Any

from gem_core.env import Env, StepResult
from gem_core.envs.dataset import check_index
from gem_core.envs.math.answer import extract_final_answer
from gem_core.envs.scoring_pool import MAX_CALL_SECONDS, check_time_limit, report_scoring, scoring_pool
from gem_core.errors import DependencyNotInstalled, InvalidArgument, InvalidArgumentType, ResetNeeded

__all__ = ["ReasoningGymEnv", "load_procedural_dataset", "guarded_verdict"]

ANSWER_HINT = "Give your final answer inside <answer></answer> tags, for example <answer>42</answer>."

_datasets: dict[str, Any] = {}
_entry_getters: dict[int, Callable[[int], dict[str, Any]]] = {}
_datasets_lock = threading.Lock()

#: Puzzles kept per dataset. Some generators search for a puzzle with a unique solution and take
#: seconds per item (knight_swap, futoshiki, zebra_puzzles); evaluation and tests revisit the same seeds.
ENTRY_CACHE_SIZE = 1024


def _composite_specs(datasets: list[Any] | None) -> list[Any]:
    """``rg:composite``'s parts as reasoning-gym's ``DatasetSpec``s (a JSON config gives dicts). With none
    given it mixes every other dataset with equal weight, but those whose items are made in a worker
    (:data:`MADE_IN_WORKER`; a composite naming one makes all its items there, each a round trip)."""
    from reasoning_gym.composite import DatasetSpec
    from reasoning_gym.factory import DATASETS

    if datasets:
        return [DatasetSpec(**spec) if isinstance(spec, dict) else spec for spec in datasets]
    skipped = {"composite", *MADE_IN_WORKER}
    return [DatasetSpec(name=name, weight=1.0, config={}) for name in sorted(DATASETS) if name not in skipped]


def load_procedural_dataset(name: str, *, seed: int, size: int, config: dict[str, Any] | None = None) -> Any:
    """The reasoning-gym dataset, built once per process for each ``(name, seed, size, config)``.

    Raises:
        DependencyNotInstalled: if reasoning-gym is not installed.
        InvalidArgument: if reasoning-gym refuses the name, the seed, the size or the config (its own checks are
            ``assert`` statements and a dataclass's TypeError; the message is theirs, naming the env id).
    """
    key = json.dumps([name, seed, size, config or {}], sort_keys=True, default=str)
    with _datasets_lock:
        if key not in _datasets:
            try:
                import reasoning_gym
            except ImportError as exc:  # pragma: no cover - depends on the install
                raise DependencyNotInstalled('rg: envs need reasoning-gym: pip install -e ".[rg]" in the GEM checkout (or pip install reasoning-gym==0.1.25).') from exc
            try:
                kwargs = dict(config or {})
                if name == "composite":
                    kwargs["datasets"] = _composite_specs(kwargs.get("datasets"))
                dataset = reasoning_gym.create_dataset(name, seed=seed, size=size, **kwargs)
            except (AssertionError, TypeError, ValueError) as exc:
                raise InvalidArgument(
                    f"rg:{name}: reasoning-gym refused seed={seed!r}, size={size!r}, config={config!r:.200}: "
                    f"{type(exc).__name__}: {str(exc) or 'a check of its config failed'}"
                ) from exc
            _datasets[key] = dataset
            _entry_getters[id(dataset)] = functools.lru_cache(maxsize=ENTRY_CACHE_SIZE)(dataset.__getitem__)
        return _datasets[key]


def _entry(dataset: Any, index: int) -> dict[str, Any]:
    getter = _entry_getters.get(id(dataset))
    return getter(index) if getter is not None else dataset[index]


#: Datasets that run programs from their data to make an item: reasoning-gym's CodeI/O ``exec()``s a
#: sample's code and its input generator (one writes ``temp_parameters.txt`` into the working directory;
#: none is bounded in time). Their items are made in a scoring worker: a scratch directory, a time limit.
RUNS_DATA_PROGRAMS = frozenset({"codeio"})

#: Datasets whose items depend on the process's hash seed: reasoning-gym iterates a set of strings (or SymPy
#: orders an expression's terms) to make them, so the same seed gave another question or gold answer in each
#: run. Their items are made in a scoring worker, whose hash seed is fixed. Found by making every dataset's
#: items under several ``PYTHONHASHSEED`` values.
DEPENDS_ON_HASH_SEED = frozenset(
    {"intermediate_integration", "isomorphic_strings", "knight_swap", "polynomial_multiplication", "ransom_note", "word_ladder"}
)

#: Every dataset whose items are made in a scoring worker rather than in this process.
MADE_IN_WORKER = RUNS_DATA_PROGRAMS | DEPENDS_ON_HASH_SEED


def entry_in_worker(name: str, seed: int, size: int, config: dict[str, Any] | None, index: int) -> dict[str, Any]:
    """Item ``index`` of the dataset (runs in a scoring worker, where the dataset is cached)."""
    return _entry(load_procedural_dataset(name, seed=seed, size=size, config=config), index)


def _warm_up_worker() -> None:
    """Import reasoning-gym before a scoring worker says ready (the import takes seconds)."""
    import reasoning_gym  # noqa: F401


def _prepare_worker(name: str, seed: int, size: int, config: dict[str, Any] | None) -> None:
    load_procedural_dataset(name, seed=seed, size=size, config=config)


def score_in_worker(name: str, seed: int, size: int, config: dict[str, Any] | None, entry: dict[str, Any], answer: str) -> float:
    """The dataset's score for ``answer`` (runs in a scoring worker, where the dataset is cached)."""
    dataset = load_procedural_dataset(name, seed=seed, size=size, config=config)
    return float(dataset.score_answer(answer=answer, entry=entry))


_NAN = re.compile(r"\bnan\b", re.IGNORECASE)


def guarded_verdict(answer: str, gold: Any) -> tuple[float, str | None] | None:
    """``(score, note)`` where reasoning-gym's scorer would be fooled by ``answer``; None: the scorer decides.

    - A gold bool spelled as text (``"True"``, ``"False"``: game_of_life_halting, course_schedule) is compared
      with the answer's text, stripped and case-folded: game_of_life_halting's scorer compares
      ``bool(answer) == bool(gold)``, true for any non-empty text, and the default one pays ``"Not True"`` 0.5.
    - An answer spelling NaN where the gold does not scores 0, with a note: NaN compares false with everything,
      so complex_arithmetic's ``min(1, exp(-distance))`` paid it 1.
    """
    gold_text = "" if gold is None else str(gold).strip()
    if gold_text.lower() in ("true", "false"):
        return (1.0 if answer.strip().rstrip(".").strip().lower() == gold_text.lower() else 0.0), None
    if _NAN.search(answer) and not _NAN.search(gold_text):
        return 0.0, "the answer spells NaN, which reasoning-gym's scorers can mistake for right: scored 0"
    return None


class ReasoningGymEnv(Env):
    """A reasoning-gym task.

    Args:
        name: the reasoning-gym dataset (``"letter_counting"``); ``rg:<name>`` ids set it.
        seed: the dataset's generation seed (which puzzles exist); the episode's ``reset(seed)`` picks
            one of them.
        size: how many puzzles the dataset holds.
        config: extra fields of the dataset's config dataclass (difficulty ranges and so on).
        score_timeout: seconds the scorer may take before the answer counts as wrong; ``None`` scores
            in-process with no limit (only for trusted answers).
        generate_timeout: seconds a dataset that runs programs from its data (:data:`RUNS_DATA_PROGRAMS`)
            may take to make an item, in a scoring worker.

    Raises:
        InvalidArgument: if reasoning-gym refuses the dataset's arguments, or a time limit is not a number of
            seconds above 0 (at most :data:`~gem_core.envs.scoring_pool.MAX_CALL_SECONDS`; ``score_timeout``
            may be None).
        InvalidArgumentType: if ``seed`` is not a whole number.
    """

    terminate_on_format_error = True
    #: The procedural dataset is fixed by the constructor's arguments (and holds unpicklable generators).
    state_excludes = frozenset({"dataset"})

    def __init__(
        self,
        name: str,
        *,
        seed: int = 42,
        size: int = 10_000,
        config: dict[str, Any] | None = None,
        score_timeout: float | None = 5.0,
        generate_timeout: float = 10.0,
    ):
        self.name = name
        self.env_id = f"rg:{name}"  # also when built without make(): warnings name the dataset
        if score_timeout is not None:
            score_timeout = check_time_limit("score_timeout", score_timeout, none_means="scoring in-process with no limit")
        self.score_timeout = score_timeout
        self.generate_timeout = check_time_limit("generate_timeout", generate_timeout)
        if isinstance(seed, bool) or not isinstance(seed, (int, numbers.Integral)):  # reasoning-gym fails on it only per item
            raise InvalidArgumentType(f"rg:{name}: seed={seed!r:.80} must be a whole number (it fixes which puzzles the dataset holds).")
        seed = int(seed)
        self.dataset_args = (name, seed, size, config)
        self.dataset = load_procedural_dataset(name, seed=seed, size=size, config=config)
        self.size = len(self.dataset)
        self.index: int | None = None
        self.entry: dict[str, Any] = {}
        self._setup_seconds = 0.0

    @property
    def max_step_seconds(self) -> float:  # type: ignore[override]
        """The scorer's limit plus the worker round trip (infinite when scoring in-process)."""
        return float("inf") if self.score_timeout is None else self.score_timeout + 2.0

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
        """Draw a puzzle; ``options={"index": i}`` picks puzzle ``i`` instead."""
        super().reset(seed=seed)
        if options and "index" in options:
            self.index = check_index(options["index"], self.size)
        else:
            self.index = int(self.np_random.integers(self.size))
        self.entry = self._make_entry(self.index)
        return f"{self.entry['question']}\n\n{ANSWER_HINT}", {"index": self.index, "dataset": self.name}

    def _make_entry(self, index: int) -> dict[str, Any]:
        parts = [spec.name for spec in self.dataset.config.datasets] if self.name == "composite" else [self.name]
        if MADE_IN_WORKER.isdisjoint(parts):
            return _entry(self.dataset, index)
        # Only a program from the data is bounded: reasoning-gym's own search (knight_swap: up to ~10 s an item)
        # takes as long in the worker as it did in this process.
        runs_programs = not RUNS_DATA_PROGRAMS.isdisjoint(parts)
        result = self._scoring_pool().call(
            "gem_core.envs.reasoning_gym.env:entry_in_worker", *self.dataset_args, index,
            timeout=self.generate_timeout if runs_programs else MAX_CALL_SECONDS,
            prepare=("gem_core.envs.reasoning_gym.env:_prepare_worker", self.dataset_args),
        )
        if not result.ok:
            why = f"its program ran past generate_timeout={self.generate_timeout} s or failed" if runs_programs else "reasoning-gym failed"
            raise RuntimeError(f"rg:{self.name} item {index} could not be made: {result.scoring_error} ({why}); reset with another seed.")
        return result.value

    @staticmethod
    def _scoring_pool() -> Any:
        return scoring_pool("rg", warm_up="gem_core.envs.reasoning_gym.env:_warm_up_worker")

    def _scoring_dataset_args(self) -> tuple:
        """What the worker builds to score this entry: the dataset, or for ``composite`` only the
        sub-dataset the entry came from (building all of them takes ~20 s), made as the composite made it."""
        if self.name != "composite":
            return self.dataset_args
        source = self.entry["metadata"]["source_dataset"]
        for i, sub_spec in enumerate(self.dataset.config.datasets):
            if sub_spec.name == source:
                config = dict(sub_spec.config or {})
                seed = config.pop("seed", self.dataset.seed + i + 1)
                size = config.pop("size", self.dataset.size)
                return (source, seed, size, config)
        return self.dataset_args

    def score(self, answer: str) -> tuple[float, str | None]:
        """``(score, error)``: reasoning-gym's score, or 0 with ``"timeout"`` / the scorer's crash / a score that
        is not a finite number (a NaN reward would poison a batch's advantages)."""
        self._setup_seconds = 0.0
        if self.score_timeout is None:
            try:
                score = float(self.dataset.score_answer(answer=answer, entry=self.entry))
            except Exception as exc:
                return 0.0, f"scorer crashed: {type(exc).__name__}: {exc}"
        else:
            dataset_args = self._scoring_dataset_args()
            result = self._scoring_pool().call(
                "gem_core.envs.reasoning_gym.env:score_in_worker", *dataset_args, self.entry, answer,
                timeout=self.score_timeout, prepare=("gem_core.envs.reasoning_gym.env:_prepare_worker", dataset_args),
            )
            self._setup_seconds = result.setup_seconds
            if not result.ok:
                return 0.0, result.scoring_error
            score = float(result.value)
        if not math.isfinite(score):
            return 0.0, f"the scorer gave {score}, not a finite number"
        return score, None

    def step(self, action: str) -> StepResult:
        if self.index is None:
            raise ResetNeeded("Call reset() before step().")
        answer = extract_final_answer(action) if isinstance(action, str) else None
        if answer is None:
            return self.invalid_action("No final answer found. " + ANSWER_HINT)
        verdict = guarded_verdict(answer, self.entry.get("answer"))
        if verdict is None:
            (score, error), note = self.score(answer), None
        else:
            (score, note), error = verdict, None
            self._setup_seconds = 0.0
        info: dict[str, Any] = {"correct": score >= 1.0, "score": score, "answer": answer, "gold": self.entry.get("answer")}
        if note is not None:
            info["score_note"] = note
        report_scoring(self, info, answer, error, self._setup_seconds)
        return ("Correct." if score >= 1.0 else "Incorrect."), score, True, False, info

    def sample_random_action(self) -> str:
        return f"<answer>{int(self.np_random.integers(0, 100))}</answer>"

    def render(self) -> str:
        return f"ReasoningGymEnv {self.name}[{self.index}]\n{self.entry.get('question', '')}"
