"""code:<Dataset> envs: defects found in the field (a correct answer after another fenced block, a row with
no tests, a call-style answer returning a numpy value)."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("datasets")
from ci_guard import needs

from gem_core.envs.code.env import CodeEnv, extract_program
from gem_core.errors import InvalidArgument
from gem_core.registry import make
from gem_core.tools import sandbox

MODE = sandbox.available_modes()[0] if sandbox.available_modes() else None
needs_sandbox = needs(MODE is not None, "no sandbox mode works on this machine")

SUM = "a, b = map(int, input().split())\nprint(a + b)\n"


def reset_to(env: CodeEnv, title: str) -> None:
    env.reset(options={"index": env.rows["title"].index(title)})


@pytest.mark.parametrize("lang", ["bash", "text", "json", "", "console"])
def test_a_block_before_the_python_block_is_not_judged(lang):
    """Before the fix the earlier block's closing fence was read as an untagged opening one, so the prose
    between the blocks ("My solution:") was the program."""
    action = f"Example input:\n```{lang}\n1 2\n```\nMy solution:\n```python\n{SUM}```\n"
    assert extract_program(action) == SUM


def test_the_last_python_block_wins_over_other_blocks_and_untagged_ones_are_a_fallback():
    """Fences pair up in order; a tagged block is judged before any untagged one (an example output after
    the program is not the program), and an untagged block is judged only where no tagged one exists."""
    assert extract_program(f"```python\n{SUM}```\nOutput:\n```\n3\n```") == SUM
    assert extract_program(f"```py\nold\n```\n```Python3\n{SUM}```\n```bash\npython a.py\n```") == SUM
    assert extract_program(f"```bash\nls\n```\n```\n{SUM}```") == SUM
    assert extract_program("```bash\nls\n```\ntext") is None
    assert extract_program("use ```x``` inline, then\n```python\nprint(1)\n```") == "print(1)\n"
    assert extract_program("```python\nprint(1)\n") is None  # never closed


@needs_sandbox
@pytest.mark.parametrize("lang", ["bash", "text", "json"])
def test_a_correct_answer_after_another_block_scores_one(lang):
    """Before the fix it scored 0.0 (runtime error: the prose between the blocks was run)."""
    env = make("code:Sample", sandbox_mode=MODE, timeout=2.0)
    reset_to(env, "Sum of two integers")
    _, reward, _, _, info = env.step(f"Example input:\n```{lang}\n1 2\n```\nMy solution:\n```python\n{SUM}```\n")
    assert reward == 1.0, info


@needs_sandbox
@pytest.mark.parametrize("tests", [{"inputs": [], "outputs": []}, [], {"test_cases": []}])
def test_a_row_without_tests_is_refused_at_reset(tmp_path, tests):
    """Before the fix reset() accepted the row (num_tests 0) and every step() raised a raw IndexError."""
    path = tmp_path / "rows.jsonl"
    rows = [{"problem": "Print 1.", "tests": json.dumps({"inputs": ["\n"], "outputs": ["1\n"]})},
            {"problem": "Print 1.", "tests": json.dumps(tests)}]
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    env = make("code:Sample", data_files=str(path), sandbox_mode=MODE, timeout=2.0)
    env.reset(options={"index": 0})
    with pytest.raises(InvalidArgument, match=r"(?si)row 1\b.*'tests'.*no test"):
        env.reset(options={"index": 1})
    assert env.tests == [] and env.index is None  # the refused row is not left half in play


NUMPY_RETURNS = {
    "Fibonacci modulo": (
        "import numpy as np\ndef fib(n):\n    a, b = 0, 1\n    for _ in range(n):\n"
        "        a, b = b, (a + b) % 1000000007\n    return np.int64(a)"
    ),
    "Two sum": (
        "import numpy as np\ndef two_sum(nums, target):\n    seen = {}\n    for j, x in enumerate(nums):\n"
        "        if target - x in seen:\n            return np.array([seen[target - x], j])\n        seen[x] = j"
    ),
    "Palindrome check": (
        "import numpy as np\nclass Solution:\n    def is_palindrome(self, s):\n"
        "        t = [c.lower() for c in s if c.isalnum()]\n        return np.bool_(t == t[::-1])"
    ),
}


@needs_sandbox
@pytest.mark.parametrize("title", sorted(NUMPY_RETURNS))
def test_a_numpy_return_value_is_judged_by_its_value(title):
    """Before the fix the value was sent as its repr ("np.int64(55)", "array([0, 1])"): wrong_answer, 0.0."""
    env = make("code:Sample", sandbox_mode=MODE, timeout=5.0)
    reset_to(env, title)
    _, reward, _, _, info = env.step(f"```python\n{NUMPY_RETURNS[title]}\n```")
    assert reward == 1.0, info


FAKES_NUMPY = {
    "a class naming numpy as its module": (
        "class Fake:\n    __module__ = 'numpy'\n    def item(self):\n        return 55\n"
        "    def tolist(self):\n        return 55\n"
        "def fib(n):\n    return Fake()"
    ),
    "an ndarray subclass with its own tolist": (
        "import numpy as np\nclass Fake(np.ndarray):\n    __module__ = 'numpy'\n    def tolist(self):\n        return 55\n"
        "def fib(n):\n    return np.array(7).view(Fake)"
    ),
}


@needs_sandbox
@pytest.mark.parametrize("name", sorted(FAKES_NUMPY))
def test_only_numpys_own_conversions_run(name):
    """The conversion calls numpy's own item()/tolist(), never one the returned object defines."""
    env = make("code:Sample", sandbox_mode=MODE, timeout=5.0, reward="fraction")
    reset_to(env, "Fibonacci modulo")
    _, reward, _, _, info = env.step(f"```python\n{FAKES_NUMPY[name]}\n```")
    assert info["tests_passed"] == 0, info
