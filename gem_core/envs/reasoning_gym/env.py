"""One ReasoningGym task per episode, generated offline and scored by reasoning-gym's own scorer.

reasoning-gym datasets are procedural: item ``i`` of ``(name, seed, size, config)`` is always the same
puzzle, so the env draws an index with ``self.np_random`` and needs no download. The reward is the
dataset's ``score_answer`` (1.0 for a correct answer; some tasks give partial credit below 1.0, e.g. a
legal but unfinished Rush Hour solution). A response without ``<answer>...</answer>`` or ``\\boxed{}``
gets the format penalty.
"""

from __future__ import annotations

import functools
import json
import threading
from collections.abc import Callable
from typing import Any

from gem_core.env import Env, StepResult
from gem_core.envs.math.answer import extract_final_answer

__all__ = ["ReasoningGymEnv", "load_procedural_dataset"]

ANSWER_HINT = "Give your final answer inside <answer></answer> tags, for example <answer>42</answer>."

_datasets: dict[str, Any] = {}
_entry_getters: dict[int, Callable[[int], dict[str, Any]]] = {}
_datasets_lock = threading.Lock()

#: Puzzles kept per dataset. Some generators search for a puzzle with a unique solution and take
#: seconds per item (knight_swap, futoshiki, zebra_puzzles); evaluation and tests revisit the same seeds.
ENTRY_CACHE_SIZE = 1024


def _composite_default_specs() -> list[Any]:
    """``rg:composite`` with no config mixes every other dataset with equal weight."""
    from reasoning_gym.composite import DatasetSpec
    from reasoning_gym.factory import DATASETS

    return [DatasetSpec(name=name, weight=1.0, config={}) for name in sorted(DATASETS) if name != "composite"]


def load_procedural_dataset(name: str, *, seed: int, size: int, config: dict[str, Any] | None = None) -> Any:
    """The reasoning-gym dataset, built once per process for each ``(name, seed, size, config)``."""
    key = json.dumps([name, seed, size, config or {}], sort_keys=True, default=str)
    with _datasets_lock:
        if key not in _datasets:
            try:
                import reasoning_gym
            except ImportError as exc:  # pragma: no cover - depends on the install
                raise ImportError("rg: envs need reasoning-gym: pip install 'gem[rg]' (or reasoning-gym).") from exc
            kwargs = dict(config or {})
            if name == "composite" and not kwargs.get("datasets"):
                kwargs["datasets"] = _composite_default_specs()
            dataset = reasoning_gym.create_dataset(name, seed=seed, size=size, **kwargs)
            _datasets[key] = dataset
            _entry_getters[id(dataset)] = functools.lru_cache(maxsize=ENTRY_CACHE_SIZE)(dataset.__getitem__)
        return _datasets[key]


def _entry(dataset: Any, index: int) -> dict[str, Any]:
    getter = _entry_getters.get(id(dataset))
    return getter(index) if getter is not None else dataset[index]


class ReasoningGymEnv(Env):
    """A reasoning-gym task.

    Args:
        name: the reasoning-gym dataset (``"letter_counting"``); ``rg:<name>`` ids set it.
        seed: the dataset's generation seed (which puzzles exist); the episode's ``reset(seed)`` picks
            one of them.
        size: how many puzzles the dataset holds.
        config: extra fields of the dataset's config dataclass (difficulty ranges and so on).
    """

    terminate_on_format_error = True
    #: The procedural dataset is fixed by the constructor's arguments (and holds unpicklable generators).
    state_excludes = frozenset({"dataset"})

    def __init__(self, name: str, *, seed: int = 42, size: int = 10_000, config: dict[str, Any] | None = None):
        self.name = name
        self.dataset = load_procedural_dataset(name, seed=seed, size=size, config=config)
        self.size = len(self.dataset)
        self.index: int | None = None
        self.entry: dict[str, Any] = {}

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
        """Draw a puzzle; ``options={"index": i}`` picks puzzle ``i`` instead."""
        super().reset(seed=seed)
        if options and "index" in options:
            self.index = int(options["index"]) % self.size
        else:
            self.index = int(self.np_random.integers(self.size))
        self.entry = _entry(self.dataset, self.index)
        return f"{self.entry['question']}\n\n{ANSWER_HINT}", {"index": self.index, "dataset": self.name}

    def score(self, answer: str | None) -> float:
        """reasoning-gym's score for ``answer``; a scorer crash on a strange answer counts as 0."""
        try:
            return float(self.dataset.score_answer(answer=answer, entry=self.entry))
        except Exception:
            return 0.0

    def step(self, action: str) -> StepResult:
        if self.index is None:
            raise RuntimeError("Call reset() before step().")
        answer = extract_final_answer(action) if isinstance(action, str) else None
        if answer is None:
            return self.invalid_action("No final answer found. " + ANSWER_HINT)
        score = self.score(answer)
        info = {"correct": score >= 1.0, "score": score, "answer": answer, "gold": self.entry.get("answer")}
        return ("Correct." if score >= 1.0 else "Incorrect."), score, True, False, info

    def sample_random_action(self) -> str:
        return f"<answer>{int(self.np_random.integers(0, 100))}</answer>"

    def render(self) -> str:
        return f"ReasoningGymEnv {self.name}[{self.index}]\n{self.entry.get('question', '')}"
