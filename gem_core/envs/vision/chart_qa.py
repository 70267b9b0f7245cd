"""Chart question answering: the first observation is a bar chart (an image) and a question about it.

The image travels beside the observation text, in ``info["images"]`` of :meth:`ChartQA.reset` (a list
of PIL images, placed before the text of that user turn; see :mod:`gem_core.rollout.vision`). The
answer is one integer inside ``\\boxed{}``. Rewards: 1.0 for the right number (the episode ends); 0.0
for a wrong one; the format penalty for anything that is not one integer in ``\\boxed{}``. Each answer
costs one of ``max_turns`` attempts; after a wrong or malformed one with attempts left the env says so
in text (the chart is not sent again: it is still in the context).
"""

from __future__ import annotations

import functools
import json
import os
import re
from typing import Any

from gem_core.env import StepResult
from gem_core.envs.game.action_format import extract_boxed
from gem_core.envs.game.turn_based import TurnBasedGame
from gem_core.envs.vision.charts import ChartItem
from gem_core.errors import DependencyNotInstalled, ResetNeeded
from gem_core.vector.calls import check_count

__all__ = ["ChartQA", "load_items", "load_image"]

DATA_DIR = os.path.join(os.path.dirname(__file__), "data")
_INTEGER = re.compile(r"[+-]?\d{1,6}")


@functools.cache
def load_items() -> tuple[ChartItem, ...]:
    """The shipped charts and questions (``data/questions.json``)."""
    with open(os.path.join(DATA_DIR, "questions.json"), encoding="utf-8") as f:
        rows = json.load(f)
    return tuple(ChartItem(r["image"], tuple(r["values"]), r["question"], int(r["answer"])) for r in rows)


def load_image(item: ChartItem) -> Any:
    """The chart of ``item`` as an RGB PIL image (a new object each call: callers may keep or change it).

    Raises:
        DependencyNotInstalled: if Pillow is not installed (the ``vision`` extra).
    """
    try:
        from PIL import Image
    except ImportError as exc:  # pragma: no cover - Pillow ships with the vision extra
        raise DependencyNotInstalled('vision envs need Pillow: pip install -e ".[vision]"') from exc
    with Image.open(os.path.join(DATA_DIR, item.image)) as image:
        return image.convert("RGB")


class ChartQA(TurnBasedGame):
    """Answer a question about a bar chart; the chart is an image observation.

    Args:
        max_turns: answers the agent may give before the episode is truncated.

    Raises:
        InvalidArgument: if ``max_turns`` is not a whole number from 1.
    """

    def __init__(self, max_turns: int = 2):
        self.max_turns = check_count("max_turns", max_turns)
        self.turn = 0
        self.index: int | None = None

    @property
    def item(self) -> ChartItem:
        """The chart and question of the current episode.

        Raises:
            ResetNeeded: before the first ``reset()``.
        """
        if self.index is None:
            raise ResetNeeded("Call reset() before step().")
        return load_items()[self.index]

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
        super().reset(seed=seed)
        self.index = int(self.np_random.integers(len(load_items())))
        item = self.item
        observation = (
            f"{item.question} Answer with one integer inside \\boxed{{}}, for example \\boxed{{3}}. "
            f"You have {self.max_turns} attempt{'s' if self.max_turns > 1 else ''}."
        )
        return observation, {"images": [load_image(item)], "chart": item.image, "max_turns": self.max_turns}

    def step(self, action: str) -> StepResult:
        out_of_turns = self.take_turn()
        item = self.item
        boxed = extract_boxed(action)
        if boxed is None or not _INTEGER.fullmatch(boxed):
            info = {"success": False} if out_of_turns else {}
            return self.invalid_action(
                "Invalid answer: expected one integer inside \\boxed{}, e.g. \\boxed{3}."
                + (f" Out of attempts: the answer was {item.answer}." if out_of_turns else " Try again."),
                truncated=out_of_turns,
                **info,
            )
        if int(boxed) == item.answer:
            return f"Correct! The answer is {item.answer}.", 1.0, True, False, {"success": True}
        if out_of_turns:
            return f"Incorrect: the answer was {item.answer}.", 0.0, True, False, {"success": False}
        return f"Incorrect. Attempts left: {self.max_turns - self.turn}. Look at the chart again.", 0.0, False, False, {}

    def sample_random_action(self) -> str:
        return f"\\boxed{{{int(self.np_random.integers(0, 20))}}}"

    def render(self) -> str:
        return f"ChartQA chart={None if self.index is None else self.item.image} turn={self.turn}/{self.max_turns}"
