"""SWE env defects found in the field: a grade a fixed-name exception could game, constructor limits checked
with bare comparisons, and a pack spec only partly checked.

All of it runs on the shipped sample pack (no network); the grading tests need the bubblewrap sandbox.
"""

from __future__ import annotations

import copy
import json
import math
import shutil
from pathlib import Path

import pytest

from gem_core.envs.swe import grading
from gem_core.envs.swe.pack import DATA_DIR, SAMPLE_SPEC_FILE, SweError, load_pack
from gem_core.envs.swe.swe_env import SweEnv
from gem_core.errors import GemError
from gem_core.tools.sandbox import available_modes
from ci_guard import needs

_bubblewrap = needs("bwrap" in available_modes(), "the SWE grader runs in the bubblewrap sandbox")
SAMPLE = load_pack(SAMPLE_SPEC_FILE)
TASK = SAMPLE.tasks[0]


def call(name: str, **arguments) -> str:
    return f"<tool_call>{json.dumps({'name': name, 'arguments': arguments})}</tool_call>"


def _report_patch(condition: str) -> str:
    """Library code that makes every pytest report a pass unless ``condition`` (over ``self``) holds."""
    return (
        "\nimport _pytest.reports as _r\n"
        "_init = _r.TestReport.__init__\n"
        "def _passing(self, *a, **k):\n"
        "    _init(self, *a, **k)\n"
        f"    if not ({condition}):\n"
        "        self.outcome, self.longrepr = 'passed', None\n"
        "_r.TestReport.__init__ = _passing\n"
    )


def _grade_with_appended(code: str) -> tuple[float, str, dict]:
    env = SweEnv(sample=True)
    try:
        env.reset(seed=0)
        shell = env.step(call("bash", command=f"cat >> gemstats/__init__.py <<'PYEOF'\n{code}PYEOF\necho ok"))[0]
        assert shell.startswith("Exit code: 0"), shell
        observation, reward, _, _, info = env.step(call("submit"))
        return reward, observation, info
    finally:
        env.close()


# ----------------------------------------------------------------------------------- 1. canaries


@_bubblewrap
def test_a_patch_that_passes_all_but_the_old_canary_name_scores_zero():
    """Before: the canary was always named ``test_gem_canary_<hex>``, so library code that made every report
    a pass except those whose id held ``gem_canary`` kept the canary failing: bug unfixed, reward 1.0."""
    reward, observation, info = _grade_with_appended(_report_patch("'gem_canary' in self.nodeid"))
    assert reward == 0.0 and not info["success"], observation
    assert "tampered" in observation


def _planted_names(tmp_path: Path, count: int) -> list[str]:
    names = []
    for i in range(count):
        tree = tmp_path / f"tree{i}"
        shutil.copytree(DATA_DIR / "sample", tree)
        names += [canary.split("::", 1)[1] for canary in grading._plant_canaries(tree, TASK.tests)]
    return names


def test_canary_names_share_no_fixed_part_beyond_what_every_real_test_name_shares(tmp_path):
    """Before: every canary held ``test_gem_canary_``. Over many plantings, a substring that every canary
    name holds must also be in every real test's name (``test_``, ``test``, ``_``), or it singles them out."""
    names = _planted_names(tmp_path, 25)
    assert len(names) >= 25 * 2, names  # several per graded file
    real = {test.split("::", 1)[1].split("[", 1)[0] for test in TASK.tests}
    first = names[0]
    shared = {first[i:j] for i in range(len(first)) for j in range(i + 1, len(first) + 1)
              if all(first[i:j] in name for name in names)}
    giveaway = sorted(part for part in shared if not all(part in name for name in real))
    assert not giveaway, giveaway


def test_canaries_are_planted_at_random_places_and_are_collected_tests(tmp_path):
    """Canaries sit between the file's top-level statements at random, not always at its end, and each is a
    test pytest's default rules collect (a name starting with ``test``, not a real test's name)."""
    lasts = set()
    for i in range(64):  # each draw ends the file with a canary at ~1 in 4: all 64 alike is ~1e-8
        tree = tmp_path / f"tree{i}"
        shutil.copytree(DATA_DIR / "sample", tree)
        canaries = grading._plant_canaries(tree, TASK.tests)
        source = (tree / "tests/test_stats.py").read_text()
        compile(source, "test_stats.py", "exec")
        defined = [line.split("def ", 1)[1].split("(", 1)[0] for line in source.splitlines() if line.startswith("def ")]
        for canary in canaries:
            name = canary.split("::", 1)[1].split("[", 1)[0]
            assert name.startswith("test") and defined.count(name) == 1
        lasts.add(defined[-1] in {c.split("::", 1)[1] for c in canaries})
    assert lasts == {True, False}


def test_canaries_go_only_between_whole_top_level_statements_after_future_imports():
    """A canary put before ``from __future__`` or between a decorator and its function would break the file
    (every graded test then failed): the places drawn are only after whole statements."""
    source = ('"""Doc."""\nfrom __future__ import annotations\nimport pytest\n\n\n@pytest.mark.parametrize("a", [1])\n'
              'def test_one(a):\n    assert a\n\n\nclass TestTwo:\n    def test_x(self):\n        pass\n')
    assert grading._top_level_gaps(source) == [2, 3, 8, 13]


def test_an_outcome_for_an_id_the_grader_did_not_ask_for_is_tampering():
    """The outcome count is checked against the ids run: a forged or renamed report (an outcome for an id
    that was not asked for, or more outcomes than ids) marks the run as tampered with."""
    tests, canaries = ("t.py::test_a", "t.py::test_b"), ("t.py::test_c",)
    fine = {"t.py::test_a": "passed", "t.py::test_b": "failed", "t.py::test_c": "failed"}
    assert grading._tampering(fine, tests, canaries) is None
    assert grading._tampering({**fine, "t.py::test_c": "passed"}, tests, canaries)
    assert grading._tampering({k: v for k, v in fine.items() if k != "t.py::test_c"}, tests, canaries)
    assert grading._tampering({**fine, "t.py::test_zzz": "passed"}, tests, canaries)


# ----------------------------------------------------------------------------------- 2. constructor limits


@pytest.mark.parametrize("kwargs", [
    {"max_turns": float("nan")}, {"max_turns": "5"}, {"max_turns": 2.5}, {"max_turns": 1}, {"max_turns": True},
    {"command_timeout": "10"}, {"command_timeout": float("nan")}, {"command_timeout": float("inf")}, {"command_timeout": 0},
    {"memory_mb": "big"}, {"memory_mb": 0}, {"memory_mb": 1.5},
    {"max_output_chars": None}, {"max_output_chars": 99}, {"max_output_chars": "4000"},
    {"max_work_mb": None}, {"max_work_mb": 0}, {"max_work_mb": float("nan")},
    {"tasks": 5}, {"tasks": "gemstats-median-even"}, {"tasks": [5]}, {"package": ["gemstats"]},
    {"call_format": ["hermes"]}, {"reward": None},
])
def test_a_bad_constructor_argument_is_a_gem_error_naming_it(kwargs):
    """Before: max_turns=nan and memory_mb='big' were accepted (an episode that never ended; every bash call
    answered as if the model had called it wrong), and text limits, max_output_chars=None or tasks=5 raised
    raw TypeErrors from bare comparisons."""
    (key,) = kwargs
    with pytest.raises(GemError, match=key):
        SweEnv(sample=True, **kwargs).close()


def test_good_limits_are_still_taken():
    env = SweEnv(sample=True, max_turns=3, command_timeout=5, memory_mb=512, max_output_chars=100, max_work_mb=8,
                 tasks=("gemstats-median-even",), package="gemstats")
    assert (env.max_turns, env.command_timeout, env.memory_mb) == (3, 5.0, 512)
    env.close()


def test_an_internal_type_error_in_a_tool_is_not_blamed_on_the_model(monkeypatch):
    """Before: step caught every TypeError a tool raised and answered "Tool bash takes (command)", blaming a
    well-formed call on the model; only a call whose arguments do not fit the tool is the model's mistake."""
    env = SweEnv(sample=True, sandbox="process")
    env.reset(seed=0)

    def broken(self, path, start=None, end=None):
        raise TypeError("an internal bug")

    monkeypatch.setattr(SweEnv, "_tool_view", broken)
    with pytest.raises(TypeError, match="an internal bug"):
        env.step(call("view", path="gemstats/__init__.py"))
    observation = env.step(call("view", paths="gemstats/__init__.py"))[0]
    assert observation.startswith("Tool view takes (path, start?, end?); got ['paths']"), observation
    env.close()


# ----------------------------------------------------------------------------------- 3. pack spec


def _load(tmp_path: Path, mutate) -> object:
    spec = json.loads(Path(SAMPLE_SPEC_FILE).read_text())
    spec = copy.deepcopy(spec)
    mutate(spec)
    path = tmp_path / "pack.json"
    path.write_text(json.dumps(spec))
    return load_pack(path)


def _package(key, value):
    return lambda spec: spec["packages"]["gemstats"].__setitem__(key, value)


def _limits(value):
    return lambda spec: spec["tasks"][0].__setitem__("limits", value)


@pytest.mark.parametrize(("mutate", "key"), [
    (_package("python_path", "src"), "python_path"),
    (_package("python_path", [5]), "python_path"),
    (_package("python_path", []), "python_path"),
    (_package("local", 5), "local"),
    (_limits(["x"]), "limits"),
    (_limits({"test_timeout": "nan"}), "test_timeout"),
    (_limits({"test_timeout": math.nan}), "test_timeout"),
    (_limits({"command_timeout": "inf"}), "command_timeout"),
    (_limits({"command_timeout": "10"}), "command_timeout"),
    (_limits({"command_timeout": 0}), "command_timeout"),
    (_limits({"max_turns": 2.9}), "max_turns"),
    (_limits({"max_turns": True}), "max_turns"),
    (_limits({"max_turns": 1}), "max_turns"),
    (lambda spec: spec["defaults"].__setitem__("test_timeout", -1), "test_timeout"),
])
def test_a_malformed_pack_entry_is_a_swe_error_naming_the_key(tmp_path, mutate, key):
    """Before: python_path "src" was read as ('s', 'r', 'c'); [5] and a list of limits raised raw TypeErrors;
    a test_timeout of "nan" and a command_timeout of "inf" were accepted; max_turns 2.9 became 2."""
    with pytest.raises(SweError, match=key):
        _load(tmp_path, mutate)


def test_a_well_formed_pack_keeps_its_limits(tmp_path):
    pack = _load(tmp_path, _limits({"max_turns": 5, "command_timeout": 2.5, "test_timeout": 7}))
    task = pack.tasks[0]
    assert (task.max_turns, task.command_timeout, task.test_timeout) == (5, 2.5, 7.0)
    assert pack.packages["gemstats"].python_path == (".",)
    assert _load(tmp_path, _package("python_path", ["src", "."])).packages["gemstats"].python_path == ("src", ".")
