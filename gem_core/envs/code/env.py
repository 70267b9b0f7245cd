"""Programming problems with test cases; the model answers with a Python program that is run against
the tests in the sandbox.

Rewards: ``reward="all"`` (default) gives 1.0 when every test passes, else 0.0 (judging stops at the
first failure); ``reward="fraction"`` gives the fraction of tests passed (all tests run). A response
with no fenced Python block gets the format penalty. One step per episode.
"""

from __future__ import annotations

import re
from typing import Any

from gem_core.env import StepResult
from gem_core.envs.code.judge import judge
from gem_core.envs.code.test_cases import TestCase, parse_test_cases
from gem_core.envs.dataset import DataFiles, DatasetEnv
from gem_core.envs.scoring_pool import check_time_limit
from gem_core.errors import InvalidArgument, ResetNeeded

__all__ = ["CodeEnv", "extract_program"]

#: A run of three or more backticks: each is an opening fence, a closing one, or one end of an inline span.
_FENCE = re.compile(r"`{3,}")
#: What makes a run an opening fence: an info string (its first word is the language) to the end of the line.
#: The word and what follows it share no character, so a long line without a newline fails in linear time.
_INFO = re.compile(r"[ \t]*([^\s`]*)(?:[^\S\n][^\n`]*)?\n")
_PYTHON_TAGS = frozenset({"python", "python3", "py"})

STDIO_HINT = (
    "Write a complete Python 3 program that reads the input from standard input and prints the answer to "
    "standard output. Reply with your program in one ```python code block; the last such block is judged."
)
CALL_HINT = (
    "Write a Python 3 function named `{fn_name}` (a top-level function or a method of class `Solution`) "
    "that returns the answer. Reply with your code in one ```python code block; the last such block is judged."
)


def _fenced_blocks(text: str) -> list[tuple[str, str]]:
    """``(language, code)`` of each fenced block, fences paired in order: a block's closing fence is never
    read as the next one's opening fence (so the prose after a ```bash block is not taken for code)."""
    blocks = []
    fences = _FENCE.finditer(text)
    for fence in fences:
        closing = next(fences, None)
        if closing is None:  # never closed: no block
            break
        info = _INFO.match(text, fence.end())
        if info is not None:  # else an inline span (```x``` on one line): both ends skipped
            blocks.append((info.group(1).lower(), text[info.end() : closing.start()]))
    return blocks


def extract_program(text: str) -> str | None:
    """The code to judge: the last block tagged ```python (``py``, ``python3``); only where there is none, the
    last untagged block (```). A block in another language (```bash, ```text) is never judged, and a tagged
    block wins over a later untagged one (often the expected output). ``None`` if there is no such block, or
    it is empty."""
    blocks = _fenced_blocks(text)
    for wanted in (_PYTHON_TAGS, {""}):
        chosen = [code for language, code in blocks if language in wanted]
        if chosen:
            return chosen[-1] if chosen[-1].strip() else None
    return None


class CodeEnv(DatasetEnv):
    """Code problems from a dataset, one per episode, picked by ``self.np_random``.

    Args:
        dataset_path: the hub dataset the rows come from (see :func:`gem_core.envs.dataset.load_rows`).
        dataset_name: its config name.
        split: the split to read.
        data_files: a local copy to read instead of the hub.
        question_field: the column with the problem statement.
        tests_field: the column with the test cases (any shape :func:`parse_test_cases` reads).
        fn_name_field: optional column naming the function for call-style tests, when the tests do not.
        reward: ``"all"`` or ``"fraction"`` (see the module docstring).
        max_tests: judge at most this many tests per problem (the first ones).
        timeout: the sandbox's time limit per test run, in seconds.
        memory_mb: the sandbox's memory limit per test run, in MiB.
        sandbox_mode: ``"bwrap"``, ``"process"`` or ``None`` (``$GEM_SANDBOX``, else bwrap).
        sandbox_backend: ``"local"`` or ``"ray"`` (tests run on Ray nodes labelled ``gem_sandbox``,
            :mod:`gem_core.tools.sandbox.ray_pool`); None reads ``$GEM_SANDBOX_BACKEND`` (default local).

    Raises:
        InvalidArgument: if ``max_tests`` is not a whole number of at least 1, ``memory_mb`` not a whole number of
            MiB of at least the sandbox's :data:`~gem_core.tools.sandbox.pool.MIN_MEMORY_MB`, ``reward`` is not
            ``"all"`` or ``"fraction"``, or ``timeout`` is not a number of seconds above 0 (at most
            :data:`~gem_core.envs.scoring_pool.MAX_CALL_SECONDS`).
    """

    def __init__(
        self,
        dataset_path: str | None = None,
        *,
        dataset_name: str | None = None,
        split: str = "train",
        data_files: DataFiles | None = None,
        question_field: str = "problem",
        tests_field: str = "tests",
        fn_name_field: str | None = None,
        reward: str = "all",
        max_tests: int = 20,
        timeout: float = 5.0,
        memory_mb: int = 512,
        sandbox_mode: str | None = None,
        sandbox_backend: str | None = None,
    ):
        if reward not in ("all", "fraction"):
            raise InvalidArgument(f"reward must be 'all' (every test passes) or 'fraction', got {reward!r}.")
        from gem_core.tools.sandbox.pool import check_memory_mb
        from gem_core.vector.calls import check_count

        # Checked here, by the sandbox's own rule: a bad limit otherwise built fine and failed every reset or step.
        max_tests = check_count("max_tests", max_tests)
        memory_mb = check_memory_mb("memory_mb", memory_mb)
        self.timeout = check_time_limit("timeout", timeout)
        super().__init__(
            dataset_path, dataset_name=dataset_name, split=split, data_files=data_files,
            fields={"question_field": question_field, "tests_field": tests_field},
        )
        from gem_core.tools.sandbox import resolve_mode  # fail at construction if no sandbox can run
        from gem_core.tools.sandbox.config import mode_from_environment, resolve_backend

        self.sandbox_backend = resolve_backend(sandbox_backend)
        # On Ray the sandbox nodes check the mode; this machine need not have bubblewrap.
        self.sandbox_mode = resolve_mode(sandbox_mode) if self.sandbox_backend == "local" else (sandbox_mode or mode_from_environment())
        self.question_field, self.tests_field, self.fn_name_field = question_field, tests_field, fn_name_field
        self.reward, self.max_tests, self.memory_mb = reward, max_tests, memory_mb
        self.problem = ""
        self.tests: list[TestCase] = []

    @property
    def max_step_seconds(self) -> float:  # type: ignore[override]
        """Every test run to its timeout, each with the sandbox's start and report (tests run one after
        another)."""
        return self.max_tests * (self.timeout + 2.0)

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
        """Draw a problem; ``options={"index": i}`` picks row ``i`` instead.

        Raises:
            InvalidArgument: ``options["index"]`` names no row, or the row's tests cell holds no test cases
                (a dataset error, named by row and column: nothing could be judged).
        """
        row = self.draw_row(seed, options)
        fn_name = row.get(self.fn_name_field) if self.fn_name_field else None
        try:
            tests = parse_test_cases(row[self.tests_field], fn_name or None)
        except InvalidArgument as error:
            index, self.index, self.problem, self.tests = self.index, None, "", []  # no half-set episode to step
            raise InvalidArgument(
                f"Row {index} of the dataset, column {self.tests_field!r} (tests_field): {str(error).rstrip('.')}. Fix or drop the row."
            ) from error
        self.problem = str(row[self.question_field]).strip()
        self.tests = tests[: self.max_tests]
        call_names = {test.fn_name for test in self.tests if test.is_call}
        hint = CALL_HINT.format(fn_name=call_names.pop()) if call_names else STDIO_HINT
        return f"{self.problem}\n\n{hint}", {"index": self.index, "num_tests": len(self.tests)}

    def step(self, action: str) -> StepResult:
        if self.index is None:
            raise ResetNeeded("Call reset() before step().")
        program = extract_program(action) if isinstance(action, str) else None
        if program is None:
            return self.invalid_action("No program found: reply with your code inside one ```python code block.")
        report = judge(
            program,
            self.tests,
            timeout=self.timeout,
            memory_mb=self.memory_mb,
            mode=self.sandbox_mode,
            stop_on_failure=self.reward == "all",
            backend=self.sandbox_backend,
        )
        reward = float(report.all_passed) if self.reward == "all" else report.passed / max(report.total, 1)
        failures = [o for o in report.outcomes if not o.passed]
        info = {
            "correct": report.all_passed,
            "tests_passed": report.passed,
            "tests_total": report.total,
            "verdicts": [o.verdict for o in report.outcomes],
        }
        if report.all_passed:
            obs = f"All {report.total} tests passed."
        else:
            first = failures[0]
            obs = f"Failed: {first.verdict.replace('_', ' ')} on a test ({report.passed}/{report.total} passed)."
        return obs, reward, True, False, info

    def sample_random_action(self) -> str:
        value = int(self.np_random.integers(0, 100))
        return f"```python\nprint({value})\n```"

    def render(self) -> str:
        return f"CodeEnv row={self.index} tests={len(self.tests)}\n{self.problem}"
