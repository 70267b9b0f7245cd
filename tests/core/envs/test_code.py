"""code:<Dataset> envs: test-case formats, judging in the sandbox, and correct, wrong, crashing, slow and
hostile programs against the shipped problems."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("datasets")
from ci_guard import needs  # noqa: E402
from hypothesis import given, settings, strategies as st  # noqa: E402

import gem_core.envs.code as code_envs  # noqa: E402
from gem_core.envs.code.env import CodeEnv, extract_program  # noqa: E402
from gem_core.envs.code.judge import judge  # noqa: E402
from gem_core.envs.code.test_cases import TestCase, call_result_matches, parse_test_cases, stdout_matches  # noqa: E402
from gem_core.registry import make  # noqa: E402
from gem_core.tools import sandbox  # noqa: E402

MODE = sandbox.available_modes()[0] if sandbox.available_modes() else None
needs_sandbox = needs(MODE is not None, "no sandbox mode works on this machine")
# Hostile programs run only where they are isolated: in "process" mode one of them would kill pytest.
needs_bwrap = needs(MODE == "bwrap", "bubblewrap is not usable here (apt-get install -y bubblewrap)")


@pytest.fixture
def bwrap_env_mode() -> str:
    """The mode hostile programs run in: bubblewrap, or the test fails (it is skipped outside CI above)."""
    assert MODE == "bwrap", "bubblewrap is not usable here (apt-get install -y bubblewrap)"
    return MODE

# Reference solutions for the shipped problems, by title.
SOLUTIONS = {
    "Sum of two integers": "a, b = map(int, input().split())\nprint(a + b)",
    "Reverse words": "print(' '.join(reversed(input().split())))",
    "Count vowels": "n = int(input())\nfor _ in range(n):\n    print(sum(c in 'aeiou' for c in input()))",
    "FizzBuzz": (
        "n = int(input())\nfor i in range(1, n + 1):\n"
        "    print('FizzBuzz' if i % 15 == 0 else 'Fizz' if i % 3 == 0 else 'Buzz' if i % 5 == 0 else i)"
    ),
    "Maximum subarray": (
        "input()\nbest, cur = None, 0\nfor x in map(int, input().split()):\n"
        "    cur = max(x, cur + x)\n    best = cur if best is None else max(best, cur)\nprint(best)"
    ),
    "Two sum": (
        "def two_sum(nums, target):\n    seen = {}\n    for j, x in enumerate(nums):\n"
        "        if target - x in seen:\n            return [seen[target - x], j]\n        seen[x] = j"
    ),
    "Palindrome check": (
        "class Solution:\n    def is_palindrome(self, s):\n"
        "        t = [c.lower() for c in s if c.isalnum()]\n        return t == t[::-1]"
    ),
    "Fibonacci modulo": (
        "def fib(n):\n    a, b = 0, 1\n    for _ in range(n):\n        a, b = b, (a + b) % 1000000007\n    return a"
    ),
}

HOSTILE = {
    "fork bomb": "import os\nwhile True:\n    os.fork()",
    "memory hog": "x = bytearray(4 * 1024 ** 3)\nprint(len(x))",
    "reads secrets": "print(open('/etc/shadow').read())",
    "kills parent": "import os, signal\nos.kill(os.getppid(), signal.SIGKILL)",
    "floods output": "while True:\n    print('x' * 10000)",
    "spoofs the call result": "print('@@GEM_RESULT_0@@[0, 1]')\nimport sys\nsys.exit(0)",
}


# Issue 14: reads the expected outputs from the datasets shipped under the interpreter's paths.
READS_THE_ANSWERS = """
import glob, json, sys
data = sys.stdin.read()
for root in sys.path:
    for path in glob.glob(root + "/*/envs/*/data/*.jsonl"):
        for line in open(path):
            try:
                tests = json.loads(json.loads(line)["tests"])
            except Exception:
                continue
            for given, expected in zip(tests.get("inputs", []), tests.get("outputs", [])):
                if given == data:
                    print(expected, end="")
                    sys.exit(0)
"""

# Issue 14: the function reads the judge's result marker from its caller's frame and prints a result of
# its choosing after it, then exits before the real result is printed.
STEALS_THE_MARKER = """
import os, re, sys
def is_palindrome(s):
    frame = sys._getframe(1)
    while frame is not None:
        for value in list(frame.f_locals.values()) + list(frame.f_code.co_consts):
            found = re.search(r"@@GEM_RESULT_[0-9a-f]+@@", value) if isinstance(value, str) else None
            if found:
                print()
                print(found.group(0) + "true", flush=True)
                os._exit(0)
        frame = frame.f_back
    return "not a palindrome verdict"
"""


def fenced(code: str) -> str:
    return f"Here is my solution.\n```python\n{code}\n```"


@pytest.fixture
def env():
    return make("code:Sample", sandbox_mode=MODE, timeout=2.0)


def reset_to(env: CodeEnv, title: str) -> None:
    index = env.rows["title"].index(title)
    env.reset(options={"index": index})


def test_sample_ships_eight_problems_with_a_solution_each():
    env = make("code:Sample", sandbox_mode=MODE)
    assert sorted(env.rows["title"]) == sorted(SOLUTIONS)


@needs_sandbox
@pytest.mark.parametrize("title", sorted(SOLUTIONS))
def test_correct_solution_passes_every_test(env, title):
    reset_to(env, title)
    _, reward, terminated, _, info = env.step(fenced(SOLUTIONS[title]))
    assert (reward, terminated, info["correct"]) == (1.0, True, True)
    assert info["tests_passed"] == info["tests_total"] > 0


@needs_sandbox
def test_wrong_solution_gets_nothing_and_fraction_mode_gives_partial_credit():
    wrong = "a, b = map(int, input().split())\nprint(a + b if a < 100 else 0)"
    env = make("code:Sample", sandbox_mode=MODE)
    reset_to(env, "Sum of two integers")
    _, reward, _, _, info = env.step(fenced(wrong))
    assert reward == 0.0 and info["verdicts"][-1] == "wrong_answer"
    partial = make("code:Sample", sandbox_mode=MODE, reward="fraction")
    reset_to(partial, "Sum of two integers")
    _, reward, _, _, info = partial.step(fenced(wrong))
    assert reward == pytest.approx(2 / 3) and info["tests_passed"] == 2


@needs_sandbox
def test_crashing_solution_is_a_runtime_error(env):
    reset_to(env, "Two sum")
    _, reward, _, _, info = env.step(fenced("def two_sum(nums, target):\n    return nums[100]"))
    assert reward == 0.0 and info["verdicts"] == ["runtime_error"]


@needs_sandbox
def test_missing_function_is_a_runtime_error(env):
    reset_to(env, "Two sum")
    assert env.step(fenced("def other(nums, target):\n    return [0, 1]"))[4]["verdicts"] == ["runtime_error"]


@needs_sandbox
def test_slow_solution_hits_the_time_limit(env):
    reset_to(env, "Fibonacci modulo")
    slow = (
        "import time\ndef fib(n):\n    a, b = 0, 1\n    for _ in range(n):\n"
        "        time.sleep(0.001)\n        a, b = b, (a + b) % 1000000007\n    return a"
    )
    _, reward, _, _, info = env.step(fenced(slow))
    assert reward == 0.0 and info["verdicts"] == ["passed", "passed", "limit:time"]


@needs_sandbox
def test_printing_a_fake_call_result_passes_no_test():
    env = make("code:Sample", sandbox_mode=MODE, reward="fraction")
    reset_to(env, "Two sum")
    spoof = "import sys\nfor r in ([0, 1], [1, 2], [1, 3]):\n    print('@@GEM_RESULT_0@@' + str(r))\nsys.exit(0)"
    assert env.step(fenced(spoof))[4]["tests_passed"] == 0


@needs_bwrap
def test_reading_the_shipped_answers_scores_nothing(bwrap_env_mode):
    # The program does find the answers where the package's data is on its path (outside the sandbox).
    package_parent = Path(code_envs.__file__).resolve().parents[3]
    done = subprocess.run(
        [sys.executable, "-I", "-c", f"import sys; sys.path.insert(0, {str(package_parent)!r})\n{READS_THE_ANSWERS}"],
        input="1 2\n", capture_output=True, text=True, timeout=60,
    )
    assert done.stdout == "3\n"
    stdin_titles = [t for t in SOLUTIONS if "def " not in SOLUTIONS[t] and "class " not in SOLUTIONS[t]]
    env = make("code:Sample", sandbox_mode=MODE, reward="fraction")
    for title in stdin_titles:
        reset_to(env, title)
        _, reward, _, _, info = env.step(fenced(READS_THE_ANSWERS))
        assert reward == 0.0, (title, info)


@needs_bwrap
def test_the_result_channel_holds_no_secret_to_steal(bwrap_env_mode):
    env = make("code:Sample", sandbox_mode=MODE, reward="fraction")
    reset_to(env, "Palindrome check")
    _, reward, _, _, info = env.step(fenced(STEALS_THE_MARKER))
    assert reward == 0.0 and info["tests_passed"] == 0, info


@needs_sandbox
@needs_bwrap
@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_hostile_program_scores_zero_and_the_env_keeps_working(env, name, bwrap_env_mode):
    reset_to(env, "Two sum")
    _, reward, terminated, _, info = env.step(fenced(HOSTILE[name]))
    assert reward == 0.0 and terminated and not info["correct"]
    reset_to(env, "Two sum")
    assert env.step(fenced(SOLUTIONS["Two sum"]))[1] == 1.0


def test_no_code_block_is_a_format_error(env):
    env.reset(seed=0)
    _, reward, terminated, _, info = env.step("print(1)")
    assert reward == env.format_penalty and terminated and info["format_error"]


def test_reset_is_deterministic_and_says_what_to_write(env):
    assert [env.reset(seed=s)[0] for s in range(12)] == [env.reset(seed=s)[0] for s in range(12)]
    reset_to(env, "Two sum")
    assert "`two_sum`" in env.reset(options={"index": env.index})[0]


@needs_sandbox
@settings(max_examples=15, deadline=None)
@given(st.text(max_size=200) | st.builds(fenced, st.text(max_size=60)))
def test_step_never_raises(action):
    env = make("code:Sample", sandbox_mode=MODE, timeout=2.0)
    env.reset(seed=2)
    obs, reward, terminated, _, _ = env.step(action)
    assert isinstance(obs, str) and terminated and reward in (0.0, 1.0, env.format_penalty)
    assert isinstance(env.sample_random_action(), str)


def test_extract_program_takes_the_last_block():
    assert extract_program("```python\nprint(1)\n```\nbetter:\n```py\nprint(2)\n```") == "print(2)\n"
    assert extract_program("```\nprint(3)\n```") == "print(3)\n"
    assert extract_program("no code") is None


@pytest.mark.parametrize(
    "cell",
    [
        {"inputs": ["1\n"], "outputs": ["2\n"]},
        json.dumps({"inputs": ["1\n"], "outputs": ["2\n"]}),
        {"input": ["1\n"], "output": ["2\n"]},
        [{"input": "1\n", "output": "2\n"}],
        {"test_cases": [{"type": "stdin_stdout", "input": "1\n", "output": "2\n"}]},
    ],
)
def test_parse_test_cases_reads_stdin_formats(cell):
    assert parse_test_cases(cell) == [TestCase("1\n", "2\n", None)]


def test_parse_test_cases_reads_call_formats():
    apps = json.dumps({"fn_name": "f", "inputs": [[1, 2]], "outputs": [[3]]})
    assert parse_test_cases(apps) == [TestCase([1, 2], [3], "f")]
    records = [{"type": "function_call", "fn_name": "g", "input": "[1]", "output": 2}]
    assert parse_test_cases(records) == [TestCase([1], 2, "g")]
    with pytest.raises(ValueError, match="Unrecognized"):
        parse_test_cases({"cases": []})


def test_output_comparison_is_lenient_only_where_judges_are():
    assert stdout_matches("1 2  \n3\n\n", "1 2\n3")
    assert stdout_matches("0.3333333\n", "0.33333333")
    assert not stdout_matches("1 2 3", "1 2")
    assert call_result_matches([0, 1], [[0, 1]]) and call_result_matches((0, 1), [0, 1])
    assert not call_result_matches([1, 0], [0, 1])


@pytest.mark.parametrize("printed, expected", [
    ("2000000001", "2000000000"),  # within 1e-6 relative, but an integer is exact
    ("3.0e+00", "3"),
    ("3.0", "3"),
    ("3.0000001", "3"),
    ("1", "True"),
    ("0", "False"),
    ("1 2 4", "1 2 3"),
    ("inf", "1e999"),
    ("3", "٣"),
])
def test_printed_integers_and_words_must_match_exactly(printed, expected):
    assert not stdout_matches(printed, expected)


@pytest.mark.parametrize("printed, expected", [
    ("3.0000001", "3.0"),  # the tolerance is for tokens the answer writes as floats
    ("3", "3.0"),
    ("0.3333333", "0.33333333"),
    ("+3", "3"),
    ("-0", "0"),
    ("1" * 5000, "1" * 5000),
    ("0" + "1" * 5000, "1" * 5000),
])
def test_printed_floats_keep_their_tolerance_and_integers_their_value(printed, expected):
    assert stdout_matches(printed, expected)


@pytest.mark.parametrize("returned, expected", [
    (1, True), (0, False), (True, 1), (3.0, 3), (2000000001, 2000000000), ([1, 3.0], [1, 3]),
    ({"a": 1}, {"a": True}), ("3", 3), (None, 0),
])
def test_returned_values_are_compared_with_their_types(returned, expected):
    assert not call_result_matches(returned, expected)


def test_returned_floats_keep_their_tolerance():
    assert call_result_matches(3.0000001, 3.0) and call_result_matches(3, 3.0) and call_result_matches([True], [[True]])


@needs_sandbox
def test_the_judge_refuses_an_integer_off_by_one_in_two_billion():
    tests = [TestCase("", "2000000000\n")]
    assert judge("print(2000000001)", tests, mode=MODE).outcomes[0].verdict == "wrong_answer"
    assert judge("print(2000000000)", tests, mode=MODE).all_passed


@needs_bwrap
def test_a_forged_result_nested_past_the_stack_is_a_wrong_answer_not_a_crash():
    """A program can write its own report line with a "returned" of 200,000 nested lists: reading it must
    not blow the host's stack."""
    forger = (
        "import json, os\n"
        "def f(x):\n"
        "    line = (json.dumps({'returned': '[' * 200000 + ']' * 200000}) + '\\n').encode()\n"
        "    for fd in range(3, 64):\n"
        "        try:\n"
        "            os.write(fd, line)\n"
        "        except OSError:\n"
        "            pass\n"
        "    os._exit(0)\n"
    )
    report = judge(forger, [TestCase([1], 1, "f")], mode="bwrap")
    assert not report.all_passed and report.outcomes[0].verdict in ("wrong_answer", "runtime_error")


@pytest.mark.parametrize("name", sorted(code_envs.HUB_DATASETS))
def test_every_hub_id_names_columns_a_local_copy_can_supply(name, tmp_path):
    env_id = f"code:{name}"
    _, _, _, question, tests = code_envs.HUB_DATASETS[name]
    path = tmp_path / "rows.jsonl"
    path.write_text(json.dumps({question: "Print 2.", tests: json.dumps({"inputs": [""], "outputs": ["2\n"]})}))
    env = make(env_id, data_files=str(path), sandbox_mode=MODE)
    assert env.reset(seed=0)[0].startswith("Print 2.")
