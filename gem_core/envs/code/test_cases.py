"""Read a dataset's test cases into one shape, and judge a program's output against them.

Code datasets write tests in several ways; all become a list of :class:`TestCase`:

- APPS / TACO / CodeContest-style ``{"inputs": [...], "outputs": [...], "fn_name": optional}`` (often a
  JSON string); with ``fn_name`` each input is the list of arguments of one call;
- deepmind/code_contests-style ``{"input": [...], "output": [...]}``;
- a list of ``{"input": ..., "output": ..., "fn_name"?: ...}`` records, or ``{"test_cases": [...]}``
  with such records (``"type": "stdin_stdout"`` / ``"function_call"``).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from gem_core.errors import InvalidArgument

__all__ = ["TestCase", "parse_test_cases", "stdout_matches", "call_result_matches"]


@dataclass(frozen=True)
class TestCase:
    """One test: stdin → expected stdout, or (with ``fn_name``) call arguments → expected return value."""

    __test__ = False  # not a pytest test class

    input: Any
    output: Any
    fn_name: str | None = None

    @property
    def is_call(self) -> bool:
        """Whether the test calls a function (``fn_name`` set) instead of feeding stdin."""
        return self.fn_name is not None


def _maybe_json(value: Any) -> Any:
    if isinstance(value, str):
        stripped = value.strip()
        if stripped[:1] in "[{":
            try:
                return json.loads(stripped)
            except ValueError:
                return value
    return value


def _record(item: Mapping[str, Any], fn_name: str | None) -> TestCase:
    name = item.get("fn_name") or fn_name
    if item.get("type") == "function_call" and not name:
        raise InvalidArgument("a function_call test needs fn_name")
    args = item["input"]
    if name and isinstance(args, str):
        args = _maybe_json(args)
    return TestCase(args, item["output"], name)


def parse_test_cases(value: Any, fn_name: str | None = None) -> list[TestCase]:
    """The test cases in a dataset cell (see the module docstring for the accepted shapes).

    Raises:
        InvalidArgument: the cell holds no recognizable tests, or no tests at all (an empty list: nothing
            could be judged, and every answer would pass or fail by accident).
    """
    tests = _parse(value, fn_name)
    if not tests:
        raise InvalidArgument(f"The test cases hold no test: {str(value)[:200]!r}; give at least one input and its output.")
    return tests


def _parse(value: Any, fn_name: str | None) -> list[TestCase]:
    value = _maybe_json(value)
    if hasattr(value, "tolist"):
        value = value.tolist()
    if isinstance(value, Mapping):
        fn_name = value.get("fn_name") or fn_name
        if "test_cases" in value:
            return _parse(_maybe_json(value["test_cases"]), fn_name)
        for inputs_key, outputs_key in (("inputs", "outputs"), ("input", "output")):
            if inputs_key in value and outputs_key in value:
                inputs, outputs = list(value[inputs_key]), list(value[outputs_key])
                if len(inputs) != len(outputs):
                    raise InvalidArgument(f"{len(inputs)} test inputs but {len(outputs)} outputs")
                return [TestCase(i, o, fn_name or None) for i, o in zip(inputs, outputs, strict=True)]
    if isinstance(value, list) and all(isinstance(item, Mapping) and "input" in item and "output" in item for item in value):
        return [_record(item, fn_name) for item in value]
    raise InvalidArgument(f"Unrecognized test cases: {str(value)[:200]!r}")


def _lines(text: str) -> list[str]:
    lines = [line.rstrip() for line in str(text).replace("\r\n", "\n").split("\n")]
    while lines and not lines[-1]:
        lines.pop()
    return lines


#: A token the answer writes as an integer: compared by value, exactly (ASCII digits only: ``\\d`` and
#: ``float`` also read other scripts' digits).
_INTEGER = re.compile(r"[+-]?[0-9]+")
#: A token written as a decimal number: compared within the tolerance when the answer's token is one.
_DECIMAL = re.compile(r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")  # no nested choices: linear on any token


def _integer_key(token: str) -> tuple[bool, str]:
    """An integer token's value as (negative, digits without leading zeros): exact for any length
    (``int()`` refuses strings past 4,300 digits)."""
    digits = token.lstrip("+-").lstrip("0") or "0"
    return token.startswith("-") and digits != "0", digits


def _close(actual: str, expected: str) -> bool:
    """One output token against the answer's: an integer only by its exact value (``3`` accepts ``+3``,
    never ``3.0``, ``3.0e+00`` or ``3`` plus one in a million), a decimal number within 1e-6, any other
    word only as written."""
    if actual == expected:
        return True
    if _INTEGER.fullmatch(expected):
        return _INTEGER.fullmatch(actual) is not None and _integer_key(actual) == _integer_key(expected)
    if not (_DECIMAL.fullmatch(expected) and _DECIMAL.fullmatch(actual)):
        return False
    x, y = float(actual), float(expected)
    return math.isfinite(x) and math.isfinite(y) and math.isclose(x, y, rel_tol=1e-6, abs_tol=1e-6)


def stdout_matches(actual: str, expected: Any) -> bool:
    """Judge stdout the way contest judges do: trailing spaces and blank lines ignored, integers compared
    exactly and decimal numbers with a 1e-6 tolerance, token by token."""
    if isinstance(expected, list):  # some datasets store the expected output as lines
        expected = "\n".join(map(str, expected))
    actual_lines, expected_lines = _lines(actual), _lines(str(expected))
    if actual_lines == expected_lines:
        return True
    actual_tokens, expected_tokens = " ".join(actual_lines).split(), " ".join(expected_lines).split()
    return len(actual_tokens) == len(expected_tokens) and all(map(_close, actual_tokens, expected_tokens))


def _same(actual: Any, expected: Any) -> bool:
    """``actual`` (a returned value, read back from JSON) equals ``expected`` with the expected type: a
    bool only as a bool, an int only as an int (not 3.0, not True), a float within 1e-6 (an int may stand
    for it), lists (and tuples) and dicts item by item, anything else by type and value."""
    if type(expected) is bool or type(expected) is int:
        return type(actual) is type(expected) and actual == expected
    if type(expected) is float:
        if type(actual) not in (int, float):
            return False
        try:
            x = float(actual)
        except OverflowError:
            return False
        return math.isclose(x, expected, rel_tol=1e-6, abs_tol=1e-9)
    if isinstance(expected, (list, tuple)):
        return isinstance(actual, (list, tuple)) and len(actual) == len(expected) and all(map(_same, actual, expected))
    if isinstance(expected, dict):
        return isinstance(actual, dict) and actual.keys() == expected.keys() and all(_same(actual[k], expected[k]) for k in expected)
    return type(actual) is type(expected) and actual == expected


def call_result_matches(actual: Any, expected: Any) -> bool:
    """Equal return values of the same types (tuples as lists, floats within 1e-6, bools and ints exact).
    APPS wraps the expected value in a
    one-element list, so that form is accepted too."""
    if _same(actual, expected):
        return True
    return isinstance(expected, list) and len(expected) == 1 and _same(actual, expected[0])
