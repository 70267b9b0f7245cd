"""gem_core.tools.python: which block runs, and what the observation says."""

from __future__ import annotations

import pytest

from gem_core.tools.python import PythonTool, find_python_block, format_sandbox_result
from gem_core.tools.sandbox import SandboxResult


def result(stdout="", stderr="", exit_code=0, timed_out=False, limit=None):
    return SandboxResult(stdout, stderr, exit_code, timed_out, limit, "bwrap", 0.1)


@pytest.mark.parametrize(
    ("action", "code"),
    [
        ("<python>print(1)</python>", "print(1)"),
        ("text ```python\nprint(2)\n``` more", "print(2)\n"),
        ("```py\nx = 1\n```", "x = 1\n"),
        ("<python>a</python> <python>b</python>", "a"),
        ("```python\nfirst\n```\n<python>second</python>", "first\n"),
        ("<python>second</python>\n```python\nfirst\n```", "second"),
        ("<python>unclosed ```python\nclosed\n```", "closed\n"),
        ("<python>\n```python\nx = 2\n```\n</python>", "x = 2\n"),
    ],
)
def test_the_first_complete_block_runs(action, code):
    call = find_python_block(action)
    assert call is not None and call.content == code
    assert action[call.span[0] : call.span[1]].count(code) == 1


@pytest.mark.parametrize("action", ["no code", "<python>never closed", "```python\nnot closed", "```\nnot python\n```"])
def test_no_block_no_call(action):
    assert find_python_block(action) is None


def test_observation_has_stdout_stderr_tail_and_exit_code():
    stderr = "\n".join(f"line {i}" for i in range(100))
    text = format_sandbox_result(result("hello\n", stderr, 1), timeout=5, memory_mb=512)
    assert text.startswith("<output>\nhello\n[stderr]\n") and text.endswith("[exit code 1]\n</output>")
    assert "line 99" in text and "line 80" in text and "line 79" not in text


def test_observation_names_the_limit():
    assert "longer than 2.5 s" in format_sandbox_result(result(exit_code=None, timed_out=True, limit="time"), timeout=2.5, memory_mb=512)
    assert "out of memory (limit 64 MiB)" in format_sandbox_result(result(exit_code=1, limit="memory"), timeout=5, memory_mb=64)


def test_long_output_is_clipped_keeping_both_ends():
    text = format_sandbox_result(result("A" + "x" * 50_000 + "Z"), timeout=5, memory_mb=512, max_chars=1000)
    assert len(text) < 1200 and "A" in text and "Z" in text and "characters cut" in text


def test_silent_program_gets_a_hint():
    assert "no output" in format_sandbox_result(result(), timeout=5, memory_mb=512)


def test_tool_runs_code_and_reports_the_mode(bwrap_mode):
    tool = PythonTool(mode=bwrap_mode)
    (call,) = tool.parse("<python>print('hi')</python>")
    answer = tool.execute(call)
    assert answer.ok and answer.observation == "<output>\nhi\n</output>"
    assert answer.info["sandbox_mode"] == "bwrap" and answer.info["exit_code"] == 0


def test_tool_in_process_mode_says_so():
    answer = PythonTool(mode="process").execute(find_python_block("<python>print(1)</python>"))
    assert answer.info["sandbox_mode"] == "process"


@pytest.mark.parametrize(
    ("kwargs", "fragment"),
    [
        (dict(timeout=-5), "timeout=-5"),
        (dict(timeout="5"), "timeout='5'"),
        (dict(timeout=0), "timeout=0"),
        (dict(memory_mb=0), "memory_mb=0"),
        (dict(memory_mb=2.5), "memory_mb=2.5"),
        (dict(max_chars=-1), "max_chars=-1"),
    ],
)
def test_settings_of_the_wrong_type_or_range_are_refused_when_made(kwargs, fragment):
    """They were accepted, then every program failed (a bare TypeError from the sandbox, or an instant timeout)."""
    from gem_core.errors import InvalidArgument

    with pytest.raises(InvalidArgument) as caught:
        PythonTool(mode="process", **kwargs)
    assert fragment in str(caught.value) and "PythonTool" in str(caught.value)
