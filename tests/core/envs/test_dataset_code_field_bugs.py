"""Arguments of dataset and code envs that used to pass ``make`` and then fail every reset or step:
sandbox limits (``memory_mb``, ``max_tests``, ``python_memory_mb``) and empty or None column names."""

from __future__ import annotations

import pytest

pytest.importorskip("datasets")

import gem_core
from ci_guard import skip_unless_ci
from gem_core.errors import GemError


def _kwargs(env_id: str, **changes: object) -> dict[str, object]:
    return {**gem_core.spec(env_id).sample_kwargs, **changes}


@pytest.mark.parametrize(
    "key, value",
    [("memory_mb", 8), ("memory_mb", "512"), ("memory_mb", float("nan")), ("memory_mb", 0),
     ("max_tests", 2.5), ("max_tests", "3"), ("max_tests", 0), ("max_tests", True)],
)
def test_code_env_refuses_a_bad_sandbox_limit_at_make(key: str, value: object) -> None:
    """Before the fix, memory_mb=8/"512"/nan and max_tests=2.5 built a CodeEnv whose every reset or step then raised
    (InvalidArgument "memory_mb must be at least 16" from the sandbox pool, TypeError, ValueError), and max_tests="3"
    raised a bare TypeError ('<' not supported between str and int) at make."""
    with pytest.raises(GemError, match=key):
        gem_core.make("code:CodeContest", **_kwargs("code:CodeContest", **{key: value}))


def test_code_env_takes_the_smallest_sandbox_memory() -> None:
    """The bound is the sandbox's own (16 MiB): 16 itself is a valid limit and must stay accepted."""
    from gem_core.tools.sandbox import available_modes

    if not available_modes():
        skip_unless_ci("no sandbox mode works on this machine")
    env = gem_core.make("code:CodeContest", **_kwargs("code:CodeContest", memory_mb=16, max_tests=1))
    assert env.unwrapped.memory_mb == 16 and env.unwrapped.max_tests == 1
    env.close()


def test_math_python_env_refuses_python_memory_below_the_sandbox_minimum() -> None:
    """Before the fix, math:AIME24-python with python_memory_mb=8 built fine, and every tool call of every episode
    answered "[python failed] InvalidArgument: memory_mb must be at least 16 (MiB), got 8." (the episode went on
    with a broken tool)."""
    with pytest.raises(GemError, match="memory_mb"):
        gem_core.make("math:AIME24-python", **_kwargs("math:AIME24-python", python_memory_mb=8))


@pytest.mark.parametrize(
    "env_id, key",
    [("qa:HotpotQA", "answer_field"), ("math:AIME24", "question_field"), ("code:CodeContest", "tests_field"),
     ("logic:RuleTaker-d0", "answer_field")],
)
@pytest.mark.parametrize("value", ["", None])
def test_an_empty_or_missing_column_name_is_refused_at_make(env_id: str, key: str, value: object) -> None:
    """Before the fix, an empty or None column name slipped past DatasetEnv's column check (it skipped falsy names):
    make() succeeded and every reset raised a bare KeyError('') / KeyError(None)."""
    with pytest.raises(GemError, match=key):
        gem_core.make(env_id, **_kwargs(env_id, **{key: value}))
