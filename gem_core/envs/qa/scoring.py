"""SQuAD-style answer normalization, exact match and token F1.

The standard recipe (lower-case, drop punctuation, drop the articles "a", "an", "the", collapse
whitespace) so scores compare with published open-domain QA numbers. A question may have several gold
answers (aliases); a prediction scores its best match.
"""

from __future__ import annotations

import re
import string
from collections import Counter
from collections.abc import Iterable

__all__ = ["normalize_answer", "exact_match", "f1_score", "best_exact_match", "best_f1", "score_answer"]

_ARTICLES = re.compile(r"\b(a|an|the)\b")
_PUNCTUATION = set(string.punctuation)


def normalize_answer(text: str) -> str:
    """Lower-case, strip punctuation and articles, collapse whitespace."""
    text = text.lower()
    text = "".join(ch for ch in text if ch not in _PUNCTUATION)
    text = _ARTICLES.sub(" ", text)
    return " ".join(text.split())


def exact_match(prediction: str, gold: str) -> bool:
    """Whether ``prediction`` equals ``gold`` after SQuAD-style normalization (case, punctuation, articles)."""
    return normalize_answer(prediction) == normalize_answer(gold)


def f1_score(prediction: str, gold: str) -> float:
    """Harmonic mean of token precision and recall after normalization."""
    pred_tokens = normalize_answer(prediction).split()
    gold_tokens = normalize_answer(gold).split()
    if not pred_tokens or not gold_tokens:
        return float(pred_tokens == gold_tokens)
    common = Counter(pred_tokens) & Counter(gold_tokens)
    overlap = sum(common.values())
    if overlap == 0:
        return 0.0
    precision, recall = overlap / len(pred_tokens), overlap / len(gold_tokens)
    return 2 * precision * recall / (precision + recall)


def best_exact_match(prediction: str, golds: Iterable[str]) -> bool:
    """Whether ``prediction`` exactly matches any of ``golds`` (see :func:`exact_match`)."""
    return any(exact_match(prediction, gold) for gold in golds)


def best_f1(prediction: str, golds: Iterable[str]) -> float:
    """The best token F1 of ``prediction`` against ``golds``; 0.0 when there are none."""
    return max((f1_score(prediction, gold) for gold in golds), default=0.0)


def score_answer(prediction: str, golds: list[str]) -> tuple[bool, float]:
    """``(exact match, token F1)`` against the best gold (what a scoring worker computes for a QA step)."""
    return best_exact_match(prediction, golds), best_f1(prediction, golds)
