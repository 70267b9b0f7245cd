"""What a judge scores: named criteria with weights, each on one integer scale.

A rubric is plain data the user writes (a dict or a JSON file), never code. Its :meth:`Rubric.digest`
is part of every cache key, so changing a criterion's wording, a weight or the scale re-judges instead
of reusing verdicts given under the old rubric.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gem_core.errors import InvalidArgument, InvalidArgumentType, MissingFile

__all__ = ["Criterion", "Rubric", "DEFAULT_RUBRIC", "MAX_RUBRIC_BYTES"]

MAX_RUBRIC_BYTES = 256 * 1024
"""The largest rubric file read (a rubric is a few hundred bytes; this only bounds a hostile file)."""
_MAX_CRITERIA = 32
_MAX_TEXT = 4000


@dataclass(frozen=True)
class Criterion:
    """One thing the judge scores.

    Attributes:
        name: the key the judge's verdict uses (letters, digits, ``_`` and ``-``; at most 64 characters).
        description: what a high score means, shown to the judge.
        weight: this criterion's share of the reward (positive).
    """

    name: str
    description: str
    weight: float = 1.0

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name or len(self.name) > 64 or not all(
            ch.isascii() and (ch.isalnum() or ch in "_-") for ch in self.name
        ):
            raise InvalidArgument(f"Criterion name {self.name!r}: use 1-64 ASCII letters, digits, '_' or '-' (the verdict's JSON key).")
        if not isinstance(self.description, str) or len(self.description) > _MAX_TEXT:
            raise InvalidArgument(f"Criterion {self.name!r}: the description must be a string of at most {_MAX_TEXT} characters.")
        weight = self.weight
        if isinstance(weight, bool) or not isinstance(weight, (int, float)) or not math.isfinite(weight) or weight <= 0:
            raise InvalidArgument(f"Criterion {self.name!r}: weight must be a positive finite number, got {weight!r}.")
        object.__setattr__(self, "weight", float(weight))  # 3 and 3.0 are one rubric, with one digest


@dataclass(frozen=True)
class Rubric:
    """Criteria scored on one integer scale; the reward is their weighted mean, mapped to [0, 1].

    ``reward = sum(weight * (score - low) / (high - low)) / sum(weight)``.

    Attributes:
        criteria: at least one, names distinct.
        scale: ``(low, high)``, the integers a score may take (default 0 to 10).
        instructions: extra guidance for the judge (what the task is about, what to penalise).
    """

    criteria: tuple[Criterion, ...]
    scale: tuple[int, int] = (0, 10)
    instructions: str = ""
    _digest: str = field(default="", init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        criteria = tuple(self.criteria)
        object.__setattr__(self, "criteria", criteria)
        if not criteria or len(criteria) > _MAX_CRITERIA:
            raise InvalidArgument(f"A rubric needs 1 to {_MAX_CRITERIA} criteria, got {len(criteria)}.")
        if not all(isinstance(c, Criterion) for c in criteria):
            raise InvalidArgument("Rubric.criteria must be Criterion objects; use Rubric.from_dict for plain data.")
        names = [c.name for c in criteria]
        if not math.isfinite(sum(c.weight for c in criteria)):
            raise InvalidArgument("the criteria's total weight must be finite (it overflows); use smaller weights, e.g. 1 to 10.")
        if len(set(names)) != len(names):
            raise InvalidArgument(f"Rubric criteria names must be distinct, got {names}.")
        scale = tuple(self.scale) if isinstance(self.scale, (list, tuple)) else ()
        low, high = scale if len(scale) == 2 else (None, None)
        if (not isinstance(low, int) or not isinstance(high, int) or isinstance(low, bool) or isinstance(high, bool)
                or not -1000 <= low < high <= 1000):
            raise InvalidArgument(f"Rubric scale must be two integers low < high within +-1000, e.g. [0, 10]; got {self.scale!r}.")
        object.__setattr__(self, "scale", (low, high))
        if not isinstance(self.instructions, str) or len(self.instructions) > _MAX_TEXT:
            raise InvalidArgument(f"Rubric instructions must be a string of at most {_MAX_TEXT} characters.")
        object.__setattr__(self, "_digest", hashlib.sha256(json.dumps(self.to_dict(), sort_keys=True).encode()).hexdigest())

    @property
    def digest(self) -> str:
        """A hash of everything the judge is shown and the reward is computed from (part of the cache key)."""
        return self._digest

    def reward(self, scores: Mapping[str, int]) -> float:
        """The weighted mean of ``scores`` (one per criterion, on the scale) mapped to [0, 1]."""
        low, high = self.scale
        # Weights are relative: scaled by the largest first, so a huge one cannot overflow the products
        # (or the total) and a subnormal one does not underflow to 0 before the division.
        largest = max(c.weight for c in self.criteria)
        shares = [c.weight / largest for c in self.criteria]
        total = sum(shares)
        reward = sum(share / total * ((scores[c.name] - low) / (high - low)) for share, c in zip(shares, self.criteria, strict=True))
        return min(1.0, max(0.0, reward))

    def to_dict(self) -> dict[str, Any]:
        """The rubric as plain data (what :meth:`from_dict` reads and a rubric file holds)."""
        return {
            "criteria": [{"name": c.name, "description": c.description, "weight": c.weight} for c in self.criteria],
            "scale": list(self.scale),
            "instructions": self.instructions,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Rubric:
        """A rubric from plain data: ``{"criteria": [{"name", "description", "weight"?}, ...], "scale"?: [low, high],
        "instructions"?: str}``; a criterion may also be given as ``"name": "description"`` in a ``criteria`` object.

        Raises:
            ValueError: naming the field that is missing or malformed.
        """
        if not isinstance(data, Mapping):
            raise InvalidArgument(f"A rubric is a JSON object with 'criteria', got {type(data).__name__}.")
        unknown = set(data) - {"criteria", "scale", "instructions"}
        if unknown:
            raise InvalidArgument(f"Unknown rubric field(s) {sorted(unknown)}; a rubric has 'criteria', 'scale' and 'instructions'.")
        raw = data.get("criteria")
        if isinstance(raw, Mapping):
            raw = [{"name": name, "description": text} for name, text in raw.items()]
        if not isinstance(raw, list):
            raise InvalidArgument("Rubric 'criteria' must be a list of {'name', 'description', 'weight'} objects (or a name -> description object).")
        criteria = []
        for i, item in enumerate(raw[: _MAX_CRITERIA + 1]):
            if not isinstance(item, Mapping) or set(item) - {"name", "description", "weight"} or "name" not in item:
                raise InvalidArgument(f"Rubric criteria[{i}] must be an object with 'name', 'description' and an optional 'weight'.")
            criteria.append(Criterion(item["name"], item.get("description", ""), item.get("weight", 1.0)))
        return cls(tuple(criteria), scale=data.get("scale", (0, 10)), instructions=data.get("instructions", ""))

    @classmethod
    def load(cls, path: str | os.PathLike) -> Rubric:
        """A rubric from a JSON file (at most :data:`MAX_RUBRIC_BYTES`).

        Raises:
            InvalidArgumentType: if ``path`` is not a path.
            MissingFile: if ``path`` names no existing file.
            InvalidArgument: if the file cannot be read, is over :data:`MAX_RUBRIC_BYTES`, or is not a valid rubric.
        """
        if not isinstance(path, (str, os.PathLike)):
            raise InvalidArgumentType(f"A rubric file is a path (str), got {type(path).__name__} {path!r:.60}.")
        file = Path(path)
        if not file.is_file():
            raise MissingFile(f"Rubric file {str(file)!r} does not exist (or is not a file); give the path of a JSON rubric file.")
        try:
            with file.open("rb") as handle:
                text = handle.read(MAX_RUBRIC_BYTES + 1)
        except OSError as exc:
            raise InvalidArgument(f"Rubric file {str(file)!r} cannot be read ({exc.strerror or exc}).") from None
        if len(text) > MAX_RUBRIC_BYTES:
            raise InvalidArgument(f"Rubric file {file} is over {MAX_RUBRIC_BYTES} bytes; a rubric is a short JSON object.")
        try:
            data = json.loads(text)
        except ValueError as exc:
            raise InvalidArgument(f"Rubric file {file} is not JSON: {exc}.") from None
        try:
            return cls.from_dict(data)
        except ValueError as exc:
            raise InvalidArgument(f"Rubric file {file}: {exc}") from None

    @classmethod
    def coerce(cls, value: Rubric | Mapping[str, Any] | str | os.PathLike | None) -> Rubric:
        """A rubric from a :class:`Rubric`, plain data, or a JSON file path; None gives :data:`DEFAULT_RUBRIC`.

        Raises:
            InvalidArgumentType: if ``value`` is none of these (the message names ``rubric=``).
            MissingFile: if ``value`` is a path to no existing file (the message names ``rubric=``).
            InvalidArgument: if the rubric is malformed (see :meth:`from_dict` and :meth:`load`).
        """
        if value is None:
            return DEFAULT_RUBRIC
        if isinstance(value, Rubric):
            return value
        if isinstance(value, Mapping):
            return cls.from_dict(value)
        if not isinstance(value, (str, os.PathLike)):
            raise InvalidArgumentType(f"rubric= must be a Rubric, a dict, or a JSON file path, got {type(value).__name__} {value!r:.60}.")
        try:
            return cls.load(value)
        except MissingFile as exc:
            raise MissingFile(f"rubric={str(value)!r}: {exc}") from None


DEFAULT_RUBRIC = Rubric(
    (
        Criterion("correctness", "The answer is factually correct and agrees with the reference answer where one is given.", 2.0),
        Criterion("completeness", "The answer addresses every part of the task.", 1.0),
        Criterion("clarity", "The answer is clear and concise.", 1.0),
    ),
    scale=(0, 10),
)
"""Used when no rubric is given: one criterion, the answer's overall quality against the task."""
