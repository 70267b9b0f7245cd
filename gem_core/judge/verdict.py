"""Reading a judge's reply: one JSON object of a fixed shape, bounded, parsed without ``eval``.

A judge model can be wrong, truncated, or talked into echoing text the answer wrote, so its reply is
untrusted. It must be exactly one JSON object (a single fenced ```json block around it is tolerated),
``{"scores": {criterion: integer}, "reason": str}``, with a score for every criterion of the rubric, each
an integer on its scale, and nothing else. Anything more (a second object, prose around it, an unknown
key, a score of 11) is refused with :class:`VerdictError` naming what was wrong, and the step pays 0:
a reply that holds two verdicts (the judge's and one the answer planted) is not guessed at.

A judge can also be talked into repeating a verdict the answer wrote, whole. The answer cannot know the
call's nonce, but it can hold a verdict-shaped object: :func:`echoes_answer` finds a reply that appears in
the answer (compared after NFKC folding, case folding and dropping whitespace and backslashes, so a
re-spaced or escaped copy counts too), and the judge refuses such a reply as no verdict.
"""

from __future__ import annotations

import json
import re
import unicodedata
from collections.abc import Mapping
from dataclasses import dataclass

from gem_core.errors import GemError
from gem_core.judge.rubric import Rubric
from gem_core.transport.json_depth import nests_deeper_than

__all__ = ["VerdictError", "ParsedVerdict", "parse_verdict", "echoes_answer", "MAX_VERDICT_CHARS", "MAX_VERDICT_DEPTH"]

MAX_VERDICT_CHARS = 16_000
"""The longest reply read as a verdict (a verdict is a few hundred characters)."""
MAX_VERDICT_DEPTH = 4
"""The deepest nesting accepted (the verdict itself is 2 deep); checked before ``json.loads`` recurses."""
_MAX_REASON = 4000
_CODE_BLOCK = re.compile(r"\A```(?:json)?[ \t]*\n(?P<body>.*)\n```\Z", re.DOTALL)


class VerdictError(GemError, ValueError):
    """The judge's reply is not a verdict of the required shape; the message says why."""


@dataclass(frozen=True)
class ParsedVerdict:
    """A judge's reply read and checked: a score per rubric criterion, the judge's reason (cut to 4,000
    characters), and the reward the rubric gives those scores.
    """
    scores: dict[str, int]
    reason: str
    reward: float


def _no_duplicates(pairs: list[tuple[str, object]]) -> dict[str, object]:
    """A JSON object's pairs as a dict; a key given twice (which the last would win) is refused."""
    data: dict[str, object] = {}
    for key, value in pairs:
        if key in data:
            raise VerdictError(f"the verdict has the duplicate key {key!r}; each key must appear once")
        data[key] = value
    return data


def _body(text: str) -> str:
    """The reply without surrounding space and the one tolerated ```json fence."""
    body = text.strip()
    block = _CODE_BLOCK.match(body)
    return block.group("body").strip() if block else body


_IGNORED_IN_ECHOES = re.compile(r"[\s\\]+")


def _folded(text: str) -> str:
    return _IGNORED_IN_ECHOES.sub("", unicodedata.normalize("NFKC", text).casefold())


def echoes_answer(reply: str, answer: str) -> bool:
    """Whether the judge's ``reply`` (its verdict object) is written out in ``answer``: a verdict the answer
    planted and the judge repeated, which must not pay. Compared folded (NFKC, case, no whitespace or
    backslashes), so a copy re-spaced, escaped inside a string or in full-width letters still counts."""
    verdict = _folded(_body(reply))
    return bool(verdict) and verdict in _folded(answer)


def parse_verdict(text: str, rubric: Rubric) -> ParsedVerdict:
    """The scores, reason and reward in the judge's reply ``text``.

    Raises:
        VerdictError: the reply is too long, too deep, not one JSON object, or not of the verdict's shape.
    """
    if not isinstance(text, str):
        raise VerdictError(f"the judge's reply is a {type(text).__name__}, not text")
    if len(text) > MAX_VERDICT_CHARS:
        raise VerdictError(f"the judge's reply is {len(text)} characters, over the verdict cap of {MAX_VERDICT_CHARS}")
    body = _body(text)
    if not body.startswith("{"):
        raise VerdictError(f"the judge's reply is not a JSON object: {text[:200]!r}")
    if nests_deeper_than(body, MAX_VERDICT_DEPTH):
        raise VerdictError(f"the judge's reply nests deeper than {MAX_VERDICT_DEPTH} levels")
    try:
        data = json.loads(body, object_pairs_hook=_no_duplicates)
    except VerdictError:
        raise
    except ValueError as exc:
        raise VerdictError(f"the judge's reply is not one JSON object ({exc}): {text[:200]!r}") from None
    if not isinstance(data, Mapping):
        raise VerdictError("the judge's reply is not a JSON object")
    unknown = set(data) - {"scores", "reason"}
    if unknown:
        raise VerdictError(f"the verdict has unknown key(s) {sorted(unknown)[:5]}; expected 'scores' and 'reason'")
    scores = data.get("scores")
    if not isinstance(scores, Mapping):
        raise VerdictError("the verdict has no 'scores' object")
    names = [c.name for c in rubric.criteria]
    missing = [n for n in names if n not in scores]
    extra = sorted(set(scores) - set(names))
    if missing or extra:
        raise VerdictError(f"the verdict's scores must name exactly {names}; missing {missing}, unknown {extra[:5]}")
    low, high = rubric.scale
    checked: dict[str, int] = {}
    for name in names:
        value = scores[name]
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
            raise VerdictError(f"the verdict's score for {name!r} is {value!r}, not an integer from {low} to {high}")
        checked[name] = value
    reason = data.get("reason", "")
    if not isinstance(reason, str):
        raise VerdictError(f"the verdict's 'reason' is a {type(reason).__name__}, not text")
    return ParsedVerdict(checked, reason[:_MAX_REASON], rubric.reward(checked))
