"""Issue 14's reward hack against the installed wheel (nox session ``package``): installed as a wheel,
the code envs' datasets sit in site-packages, under the interpreter the sandbox must show. A program that
globs ``sys.path`` for them and prints the expected output must score nothing on ``code:Sample``."""

import subprocess
import sys

import pytest
from ci_guard import skip_unless_ci

import gem_core
from gem_core.tools.sandbox import available_modes

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


@pytest.fixture(scope="module")
def bwrap():
    if "bwrap" not in available_modes():
        reason = "bubblewrap is not usable here (apt-get install -y bubblewrap)"
        skip_unless_ci(reason)
    return "bwrap"


def test_the_answers_are_on_the_interpreters_path_outside_the_sandbox():
    done = subprocess.run([sys.executable, "-c", READS_THE_ANSWERS], input="1 2\n", capture_output=True, text=True, timeout=60)
    assert done.stdout == "3\n"  # the hack works wherever the data is visible


def test_reading_the_shipped_answers_scores_nothing_in_the_sandbox(bwrap):
    env = gem_core.make("code:Sample", sandbox_mode=bwrap, reward="fraction", timeout=5.0)
    stdin_problems = [i for i, tests in enumerate(env.rows["tests"]) if "fn_name" not in tests]
    assert len(stdin_problems) >= 4
    for index in stdin_problems:
        env.reset(options={"index": index})
        _, reward, _, _, info = env.step(f"```python\n{READS_THE_ANSWERS}\n```")
        assert reward == 0.0, info


def test_a_real_solution_still_passes_in_the_sandbox(bwrap):
    env = gem_core.make("code:Sample", sandbox_mode=bwrap)
    env.reset(options={"index": env.rows["title"].index("Sum of two integers")})
    _, reward, _, _, _ = env.step("```python\na, b = map(int, input().split())\nprint(a + b)\n```")
    assert reward == 1.0
