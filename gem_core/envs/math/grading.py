"""Grade a math answer against the gold answer, with a hard time limit that recovers by itself.

Checking equivalence goes through math-verify (LaTeX → SymPy). A pathological answer such as
``9^{9^{9^{9}}}`` makes SymPy compute for minutes, and math-verify's own timeouts use ``signal.alarm``,
which works only in the main thread. So grading runs in a :class:`~gem_core.envs.scoring_pool.ScoringPool`
whose workers have math-verify imported and warm: the caller waits up to ``timeout`` seconds, and on
expiry the worker is killed and replaced, and the answer scored wrong.

Exact numbers are compared exactly before any of that, with no tolerance: integers, finite decimals
(``1.5``, ``2.5e-3``), fractions, mixed numbers (``2 1/2`` and ``2\\frac{1}{2}`` are 5/2, as math-verify
reads the latter) and repeating decimals (``0.\\overline{3}``, ``0.(3)``, ``0.\\bar{3}``) are the
fractions they denote, so ``12345678901234567890.5`` is not ``12345678901234567890`` and ``0`` is not
``0.0000000001``. Only where a side is not such a number (``\\sqrt{2}``, ``\\pi``), or is a decimal rounding a
number no decimal writes out (``0.3333333333`` for ``\\frac{1}{3}``), does math-verify decide, with its own
rounding of floats.

Spaces and LaTeX spacing do not count, except that they never join two numbers: ``1 2`` is not ``12``,
and ``2 1/2`` not ``21/2``; digits grouped by three (``1\\,000``) are one number, as with commas.
When math-verify is not installed, or cannot parse either side, a normalized string / exact number
comparison decides (:func:`normalized_equal`).
"""

from __future__ import annotations

import re
import warnings
from dataclasses import dataclass
from fractions import Fraction

from gem_core.envs.scoring_pool import ScoringPool, check_time_limit, scoring_pool

__all__ = ["grade_inline", "normalized_equal", "exact_verdict", "GradeResult", "GraderPool", "default_grader", "grade"]


# --------------------------------------------------------------------------------------------- grading


_TEXT_WRAPPERS = re.compile(r"\\(?:text|textbf|mathrm|mbox|mathbf)\s*\{([^{}]*)\}")
_SPACES = re.compile(r"(?:\\[,;:! ]|\\quad|\\qquad|\s)+")
_DIGIT = frozenset("0123456789")


def _drop_spaces(s: str) -> str:
    """``s`` without spaces, except that a space between two digits stays (one ``" "``): it separates numbers."""

    def replace(match: re.Match[str]) -> str:
        start, end = match.span()
        between_digits = start > 0 and end < len(s) and s[start - 1] in _DIGIT and s[end] in _DIGIT
        return " " if between_digits else ""

    return _SPACES.sub(replace, s)


_THOUSANDS = re.compile(r"-?\d{1,3}(?:,\d{3})+(?:\.\d+)?|-?\d{1,3}(?: \d{3})+(?:\.\d+)?")


def _normalize(answer: str) -> str:
    s = answer.strip().strip("$").strip()
    s = _TEXT_WRAPPERS.sub(r"\1", s)
    s = s.replace("\\left", "").replace("\\right", "").replace("\\dfrac", "\\frac").replace("\\tfrac", "\\frac")
    s = s.replace("^\\circ", "").replace("^{\\circ}", "").replace("\\%", "").replace("%", "")
    s = _drop_spaces(s)
    s = s.rstrip(".").lower()
    if _THOUSANDS.fullmatch(s):
        s = s.replace(",", "").replace(" ", "")  # thousands separators: 1,000 -> 1000, 1\,000 -> 1000
    return s


_INTEGER = re.compile(r"[+-]?\d+")
_FINITE_DECIMAL = re.compile(r"(?P<sign>[+-]?)(?P<whole>\d*)\.(?P<fixed>\d+)")
_SCIENTIFIC = re.compile(r"[+-]?(?:\d+\.?\d*|\.\d+)e(?P<exponent>[+-]?\d+)")  # _normalize lower-cases the e
_REPEATING_DECIMAL = re.compile(
    r"(?P<sign>[+-]?)(?P<whole>\d*)\.(?P<fixed>\d*)"
    r"(?:\\overline\{(?P<a>\d+)\}|\\bar\{(?P<b>\d+)\}|\\dot\{(?P<c>\d)\}|\((?P<d>\d+)\))"
)
_FRACTION = re.compile(r"(?P<sign>[+-]?)(?:\\frac\{(?P<p>\d+)\}\{(?P<q>\d+)\}|(?P<p2>\d+)/(?P<q2>\d+))")
#: A whole number then a proper fraction: ``2 1/2``, ``2\frac{1}{2}`` (a space is needed before a ``/``
#: fraction: ``21/2`` is 21/2).
_MIXED_NUMBER = re.compile(r"(?P<sign>[+-]?)(?P<whole>\d+)(?:\s?\\frac\{(?P<p>\d+)\}\{(?P<q>\d+)\}|\s(?P<p2>\d+)/(?P<q2>\d+))")
#: Digits beyond which a number is not turned into a Fraction (Python refuses int() past 4300 digits).
_MAX_EXACT_DIGITS = 4000


def _integer_digits(s: str) -> tuple[bool, str] | None:
    """``(negative, digits without leading zeros)`` if ``s`` is an integer, else None."""
    if not _INTEGER.fullmatch(s):
        return None
    digits = s.lstrip("+-").lstrip("0") or "0"
    return (s.startswith("-") and digits != "0", digits)


def _repeating_value(s: str) -> Fraction | None:
    """The fraction a repeating decimal denotes (``0.1\\overline{6}`` -> 1/6), else None."""
    match = _REPEATING_DECIMAL.fullmatch(s)
    if match is None or len(s) > _MAX_EXACT_DIGITS:
        return None
    whole, fixed = match["whole"] or "0", match["fixed"]
    period = next(g for g in (match["a"], match["b"], match["c"], match["d"]) if g)
    value = int(whole) + Fraction(int(fixed + period) - int(fixed or "0"), 10 ** len(fixed) * (10 ** len(period) - 1))
    return -value if match["sign"] == "-" else value


def _exact_value(s: str) -> Fraction | None:
    """An integer, finite decimal (also as ``1.5e3``), repeating decimal, integer fraction or mixed number
    (of a normalized answer) as a Fraction; else None."""
    if len(s) > _MAX_EXACT_DIGITS:
        return None
    if _INTEGER.fullmatch(s) or _FINITE_DECIMAL.fullmatch(s):
        return Fraction(s)
    match = _SCIENTIFIC.fullmatch(s)
    if match is not None:  # 1e999999999 would be a billion digits
        return Fraction(s) if abs(int(match["exponent"])) <= _MAX_EXACT_DIGITS else None
    match = _FRACTION.fullmatch(s)
    if match is not None:
        p, q = int(match["p"] or match["p2"]), int(match["q"] or match["q2"])
        if q == 0:
            return None
        return -Fraction(p, q) if match["sign"] == "-" else Fraction(p, q)
    match = _MIXED_NUMBER.fullmatch(s)
    if match is not None:
        p, q = int(match["p"] or match["p2"]), int(match["q"] or match["q2"])
        if not 0 < p < q:  # 2 3/2 is no mixed number: left to math-verify
            return None
        value = int(match["whole"]) + Fraction(p, q)
        return -value if match["sign"] == "-" else value
    return _repeating_value(s)


def _rounds(written: str, other: Fraction) -> bool:
    """Whether ``written`` is a decimal and ``other`` a number no decimal writes out (``\\frac{1}{3}``): then the
    decimal can only be a rounding of it, which math-verify judges (``0.3333333333`` for 1/3)."""
    if not (_FINITE_DECIMAL.fullmatch(written) or _SCIENTIFIC.fullmatch(written)):
        return False
    denominator = other.denominator
    for prime in (2, 5):
        while denominator % prime == 0:
            denominator //= prime
    return denominator != 1


def exact_verdict(prediction: str, gold: str) -> bool | None:
    """The verdict where exact arithmetic decides it, else None (left to math-verify).

    Two integers are compared digit for digit, at any length. Otherwise, when both sides are exact numbers
    (integer, finite decimal, fraction, mixed number, repeating decimal), they are compared as fractions, with
    no tolerance; except a decimal against a number no decimal writes out (``0.3333333333`` against
    ``\\frac{1}{3}``), a rounding left to math-verify (None). A percentage on one side only is either
    reading: ``50\\%`` is ``50`` and ``0.5`` (as math-verify reads it).
    """
    p, g = _normalize(prediction), _normalize(gold)
    percent = ("%" in prediction) != ("%" in gold)
    p_int, g_int = _integer_digits(p), _integer_digits(g)
    if p_int is not None and g_int is not None and (p_int == g_int or not percent):
        return p_int == g_int
    p_value, g_value = _exact_value(p), _exact_value(g)
    if p_value is None or g_value is None or _rounds(p, g_value) or _rounds(g, p_value):
        return None
    if percent:
        return p_value == g_value or (p_value / 100 == g_value if "%" in prediction else p_value == g_value / 100)
    return p_value == g_value


def _expand_repeating(answer: str) -> str:
    """A repeating decimal rewritten as ``\\frac{p}{q}``, which math-verify reads; anything else unchanged."""
    value = _repeating_value(_normalize(answer))
    if value is None:
        return answer
    sign = "-" if value < 0 else ""
    return f"{sign}\\frac{{{abs(value.numerator)}}}{{{value.denominator}}}"


def normalized_equal(prediction: str, gold: str) -> bool:
    """Equal as exact numbers (:func:`exact_verdict`), or else equal after light normalization (spaces that
    join no numbers, ``$``, ``\\text{}``, ``\\dfrac``, thousands separators). The one tolerance, 1e-9 relative
    (absolute below 1), is for a decimal rounding a number no decimal writes out (``0.3333333333`` for 1/3)."""
    verdict = exact_verdict(prediction, gold)
    if verdict is not None:
        return verdict
    p, g = _normalize(prediction), _normalize(gold)
    p_value, g_value = _exact_value(p), _exact_value(g)
    if p_value is not None and g_value is not None:  # a decimal rounding a number no decimal writes out
        return abs(p_value - g_value) <= Fraction(1, 10**9) * max(Fraction(1), abs(g_value))
    return p == g


_CHOICE_LABEL = re.compile(r"^\s*(?:\\text(?:bf)?\s*\{\s*\(?[A-E]\)\s*\}|\(?[A-E]\))\s*(?:\\[ ,;!]|~|\s)*(?=\S)")
_CHOICE_GOLD = re.compile(r"^\s*(?:\\text(?:bf)?\{)?\(?[A-E]\)?\}?\s*$")


def _strip_choice_label(prediction: str, gold: str) -> str:
    """``\\textbf{(C)}\\ 12`` -> ``12`` when the gold is a value, not a choice letter (AMC-style answers)."""
    if _CHOICE_GOLD.match(gold):
        return prediction
    return _CHOICE_LABEL.sub("", prediction, count=1)


def _boxed(text: str) -> str:
    return text if "\\boxed" in text else f"\\boxed{{{text}}}"


def grade_inline(prediction: str, gold: str) -> bool:
    """Whether ``prediction`` equals ``gold`` (both the content of a box). No time limit: may hang.

    Use :func:`grade` (or a :class:`GraderPool`) wherever the answer is untrusted.
    """
    prediction = _strip_choice_label(prediction, gold)
    verdict = exact_verdict(prediction, gold)
    if verdict is not None:
        return verdict
    if normalized_equal(prediction, gold):
        return True
    prediction, gold = _expand_repeating(prediction), _expand_repeating(gold)
    try:
        from math_verify import parse, verify
    except ImportError:
        return False
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            gold_parsed = parse(_boxed(gold), parsing_timeout=None)
            pred_parsed = parse(_boxed(prediction), parsing_timeout=None)
            if not gold_parsed or not pred_parsed:
                return False
            return bool(verify(gold_parsed, pred_parsed, timeout_seconds=None))
        except Exception:  # math-verify raises on odd input; an answer it cannot read is wrong
            return False


# ---------------------------------------------------------------------------------------- the workers


@dataclass(frozen=True)
class GradeResult:
    """A verdict; ``timed_out`` marks answers that were cut off (and scored wrong), ``error`` says why a
    grade failed (``"timeout"``, or the grader's crash)."""

    correct: bool
    timed_out: bool = False
    error: str | None = None
    #: Seconds spent starting a grading worker before the grade (outside the grade's time limit).
    setup_seconds: float = 0.0


def _warm_up() -> None:
    """Import (and warm) math-verify before a worker says ready, so start-up is not billed to a grade."""
    grade_inline("1", "1.0")
    grade_inline("\\frac{1}{2}", "0.5")


class GraderPool(ScoringPool):
    """Grading workers with math-verify loaded (see :class:`~gem_core.envs.scoring_pool.ScoringPool`).

    Args:
        max_workers: most grading worker processes (None: the pool's default).
        memory_mb: memory cap per worker (None: no cap).
        startup_timeout: seconds a worker may take to start and load math-verify.
    """

    def __init__(self, max_workers: int | None = None, *, memory_mb: int | None = 2048, startup_timeout: float = 120.0):
        super().__init__(
            max_workers, memory_mb=memory_mb, startup_timeout=startup_timeout,
            warm_up="gem_core.envs.math.grading:_warm_up",
        )

    def grade(self, prediction: str, gold: str, timeout: float = 5.0) -> GradeResult:
        """Grade with a deadline of ``timeout`` seconds (worker start-up excluded).

        Raises:
            InvalidArgument: if ``timeout`` is not a number of seconds above 0, at most
                :data:`~gem_core.envs.scoring_pool.MAX_CALL_SECONDS` (0 or nan scored a correct answer wrong).
        """
        timeout = check_time_limit("timeout", timeout)
        result = self.call("gem_core.envs.math.grading:grade_inline", prediction, gold, timeout=timeout)
        if not result.ok:
            return GradeResult(False, timed_out=result.timed_out, error=result.scoring_error, setup_seconds=result.setup_seconds)
        return GradeResult(bool(result.value), setup_seconds=result.setup_seconds)


def default_grader() -> GraderPool:
    """The process-wide grading pool, :func:`~gem_core.envs.scoring_pool.scoring_pool` ``"math"`` (a forked
    child gets its own)."""
    return scoring_pool("math", GraderPool)  # type: ignore[return-value]


def grade(prediction: str, gold: str, timeout: float | None = 5.0, *, backend: str | None = None) -> GradeResult:
    """Grade ``prediction`` against ``gold``; ``timeout=None`` grades in this process without a limit.

    ``backend="ray"`` (or ``$GEM_SANDBOX_BACKEND=ray``) sends what needs a grading worker to a Ray node
    labelled ``gem_sandbox`` (:mod:`gem_core.tools.sandbox.ray_pool`), where it runs in that node's pool.

    Raises:
        InvalidArgument: if ``timeout`` is neither None nor a number of seconds above 0, at most
            :data:`~gem_core.envs.scoring_pool.MAX_CALL_SECONDS` (checked even where exact numbers need no worker).
    """
    if timeout is None:
        return GradeResult(grade_inline(prediction, gold))
    timeout = check_time_limit("timeout", timeout, none_means="grading in this process without a limit")
    verdict = exact_verdict(_strip_choice_label(prediction, gold), gold)
    if verdict is not None:  # exact numbers need no worker round trip
        return GradeResult(verdict)
    if normalized_equal(prediction, gold):  # nor does the common case
        return GradeResult(True)
    from gem_core.tools.sandbox.config import resolve_backend

    if resolve_backend(backend) == "ray":
        from gem_core.tools.sandbox.ray_pool import default_ray_pool

        # Graded by this module's grade on the node, in that node's own workers (never back to Ray).
        return default_ray_pool().call("gem_core.envs.math.grading:grade", prediction, gold, timeout, backend="local")
    return default_grader().grade(prediction, gold, timeout)
