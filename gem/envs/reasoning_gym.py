"""``gem.envs.reasoning_gym:ReasoningGymEnv``: GEM 0.1.0's Reasoning Gym env, the entry point of every ``rg:*`` id
under ``import gem``.

The core ships its own Reasoning Gym env (:mod:`gem_core.envs.reasoning_gym`: a larger pool, an answer-format
hint in the question, a format penalty). A GEM user's ``rg:<name>`` must stay GEM's task, or their numbers stop
being comparable, so this is GEM's: a pool of ``size`` puzzles (GEM registers 500, seed 42), the question as
Reasoning Gym writes it, the last ``\\boxed{}`` scored by the task's own ``score_answer`` (nothing boxed scores
what the task gives ``None``, 0.0 for every shipped task), and one step ending the episode ``(True, True)``.

Episodes are drawn as GEM draws them: ``reset()`` walks the pool in order (a finished pool is rebuilt with seed
``seed + episodes so far``), ``reset(seed=s)`` takes the item ``random.seed(s); random.choice(pool)`` gives.
That draw uses a private :class:`random.Random`, so, unlike GEM, the process-wide ``random`` is left alone.

One more difference, on purpose: the core's guards against scorers that pay wrong answers
(:func:`gem_core.envs.reasoning_gym.env.guarded_verdict`: ``nan`` for a complex number, any text for a ``True``/
``False`` gold) apply here too, and a crashed or non-finite score is 0. GEM paid those; a reward hack is no
behaviour to keep.
"""

from __future__ import annotations

import math
import random
import warnings
from typing import Any

from gem.core import Env
from gem_core.env import StepResult, check_seed
from gem_core.envs.math.answer import extract_boxed
from gem_core.envs.reasoning_gym.env import guarded_verdict
from gem_core.errors import ResetNeeded

__all__ = ["ReasoningGymEnv", "TERMINAL_STATE"]

TERMINAL_STATE = "<｜TERMINAL_STATE｜>"
"""GEM's observation after the last step of a single-step env."""


def _create(name: str, size: int, seed: int) -> Any:
    import reasoning_gym

    return reasoning_gym.create_dataset(name, size=size, seed=seed)


class ReasoningGymEnv(Env):
    """One Reasoning Gym puzzle per episode, from a pool of ``size`` made with ``seed``.

    Args:
        name: The Reasoning Gym task (``reasoning_gym.factory.DATASETS``' names, e.g. ``"leg_counting"``).
        size: Puzzles in the pool before it is rebuilt.
        seed: The pool's seed.
        **_: Other keyword arguments (GEM's ``dataset=``, ``use_mp=``...) are accepted and unused, as in GEM.

    Raises:
        ValueError: From Reasoning Gym: ``name`` is not one of its tasks, or ``size`` is invalid.
    """

    #: the pool is rebuilt from (name, size, seed), not snapshotted
    state_excludes = frozenset({"ds", "reward_fn", "_walk_ds"})

    def __init__(self, name: str, size: int = 500, seed: int = 42, **_: Any) -> None:
        super().__init__()
        self.idx = 0
        self.name = name
        self.size = size
        self.seed = seed
        self.ds = _create(name, size, seed)
        self.reward_fn = self.ds.score_answer
        self.data: dict[str, Any] | None = None
        # GEM walks ``iter(ds)``: the pool of the walk stays the one it started on until it runs out
        self._walk_ds = self.ds
        self._walk_pos = 0

    def reset(self, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
        """Draw the episode's puzzle (see the module docstring for GEM's order).

        Returns:
            The puzzle's question as Reasoning Gym writes it, and an empty info.

        Raises:
            InvalidArgument: ``seed`` is not None or a whole number from 0 up.
        """
        seed = check_seed(seed)  # numpy's ints too: random.Random takes only Python's
        super().reset(seed, options)
        if seed is not None:
            data = random.Random(seed).choice(self.ds)
            if (self.idx + 1) % self.size == 0:
                self.ds = _create(self.name, self.size, self.seed + self.idx)
        else:
            if self._walk_pos >= len(self._walk_ds):
                self.ds = _create(self.name, self.size, self.seed + self.idx)
                self._walk_ds, self._walk_pos = self.ds, 0
            data = self._walk_ds[self._walk_pos]
            self._walk_pos += 1
        self.idx += 1
        self.data = data
        self.reward_fn = self.ds.score_answer
        return data["question"], {}

    def step(self, action: str) -> StepResult:
        """Score the last ``\\boxed{}`` answer with the task's own scorer; the episode ends.

        Returns:
            ``(TERMINAL_STATE, score, True, True, {})``, as GEM returns it.

        Raises:
            ResetNeeded: No episode has been started.
        """
        if self.data is None:
            raise ResetNeeded("ReasoningGymEnv: call reset() before step().")
        answer = extract_boxed(action) if isinstance(action, str) else None
        guarded = None if answer is None else guarded_verdict(answer, self.data.get("answer"))
        if guarded is not None:  # a scorer that answers like GEM's would pay this wrong answer
            return TERMINAL_STATE, guarded[0], True, True, {}
        try:
            reward = float(self.reward_fn(answer=answer, entry=self.data))
        except Exception:  # noqa: BLE001 - a scorer that crashes on the model's answer scores it 0, as the core's env does
            reward = 0.0
        return TERMINAL_STATE, reward if math.isfinite(reward) else 0.0, True, True, {}

    def sample_random_action(self) -> str:
        """A boxed guess (the puzzle's own answer is never given away)."""
        return "\\boxed{42}"

    def spawn(self, same_state: bool = False, **kwargs: Any) -> ReasoningGymEnv:
        """A new env over the same task: with ``same_state``, on the same puzzle; else with ``kwargs`` (e.g. ``seed=``)."""
        if same_state:
            child = ReasoningGymEnv(name=self.name, size=self.size, seed=self.seed)
            child.idx, child.data = self.idx, self.data
            return child
        child = ReasoningGymEnv(name=self.name, size=self.size, **kwargs)
        if child.seed == self.seed:
            warnings.warn("same_state is False but the seed is not changed, which may lead to the same sequence of questions.", stacklevel=2)
        return child
