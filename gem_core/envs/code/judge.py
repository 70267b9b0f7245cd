"""Run a model's program against test cases in the Python sandbox (:mod:`gem_core.tools.sandbox`).

Each test is one sandboxed run: stdin tests feed the input and read stdout; call tests run the program,
then call the function (a top-level function, or a method of ``Solution`` as in LeetCode) with the
test's arguments inside the same sandbox (:class:`~gem_core.tools.sandbox.FunctionCall`). The return
value comes back through the worker's supervisor, not through the program's stdout, so nothing the
program prints can pass for a result, and there is no secret marker in the program's reach to steal.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from gem_core.envs.code.test_cases import TestCase, call_result_matches, stdout_matches

__all__ = ["TestOutcome", "JudgeReport", "judge"]


@dataclass(frozen=True)
class TestOutcome:
    """How one test went: ``verdict`` is ``"passed"``, ``"wrong_answer"``, ``"runtime_error"`` or
    ``"limit:<name>"`` (time, memory, output, ...)."""

    verdict: str
    detail: str = ""

    @property
    def passed(self) -> bool:
        """Whether the verdict is ``"passed"``."""
        return self.verdict == "passed"


@dataclass(frozen=True)
class JudgeReport:
    """The outcomes of one program's tests.

    ``outcomes`` holds one :class:`TestOutcome` per test run (a run stops early after the first failure, so
    it may be shorter than ``total``); ``total`` counts the tests the program was judged on.
    """
    outcomes: list[TestOutcome] = field(default_factory=list)
    total: int = 0

    @property
    def passed(self) -> int:
        """How many tests passed."""
        return sum(outcome.passed for outcome in self.outcomes)

    @property
    def all_passed(self) -> bool:
        """Whether there was at least one test and every one passed."""
        return self.total > 0 and self.passed == self.total


def _stdin(test: TestCase) -> str:
    return test.input if isinstance(test.input, str) else "\n".join(map(str, test.input))


def _outcome(result: Any, test: TestCase) -> TestOutcome:
    if result.limit is not None or result.timed_out:
        return TestOutcome(f"limit:{result.limit or 'time'}")
    if result.exit_code != 0:
        tail = result.stderr.strip().splitlines()[-1:] or [f"exit code {result.exit_code}"]
        return TestOutcome("runtime_error", tail[0][:300])
    if not test.is_call:
        ok = stdout_matches(result.stdout, test.output)
        return TestOutcome("passed" if ok else "wrong_answer", "" if ok else result.stdout[:300])
    if result.returned is None:
        return TestOutcome("runtime_error", "the function returned no result")
    try:
        actual = json.loads(result.returned)
    except ValueError:
        return TestOutcome("wrong_answer", "the result is not JSON-serializable")
    except RecursionError:  # the program may write its own report: a result nested past the host's stack
        return TestOutcome("wrong_answer", "the result is nested too deeply to read")
    ok = call_result_matches(actual, test.output)
    return TestOutcome("passed" if ok else "wrong_answer", "" if ok else result.returned[:300])


def judge(
    code: str,
    tests: list[TestCase],
    *,
    timeout: float = 5.0,
    memory_mb: int = 512,
    mode: str | None = None,
    stop_on_failure: bool = True,
    backend: str | None = None,
) -> JudgeReport:
    """Run ``code`` on each test in the sandbox; with ``stop_on_failure`` the first failure ends judging.

    ``backend="ray"`` runs the tests on Ray nodes labelled ``gem_sandbox`` (see :func:`run_python`).
    """
    from gem_core.tools.sandbox import FunctionCall, run_python

    outcomes: list[TestOutcome] = []
    for test in tests:
        if test.fn_name is not None:  # a call test (TestCase.is_call)
            call, stdin = FunctionCall(test.fn_name, test.input), ""
        else:
            call, stdin = None, _stdin(test)
        result = run_python(code, stdin=stdin, timeout=timeout, memory_mb=memory_mb, mode=mode, call=call, backend=backend)
        outcome = _outcome(result, test)
        outcomes.append(outcome)
        if stop_on_failure and not outcome.passed:
            break
    return JudgeReport(outcomes, total=len(tests))
