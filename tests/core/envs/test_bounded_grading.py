"""Bounded work on every grading path (issue 14 item 4): linear answer extraction with a length cap,
graders and scorers in killable workers, a timeout scored 0 with ``info["error"] = "timeout"``, and the
next step still working. The hostile answers are the issue's reproducers."""

from __future__ import annotations

import logging
import os
import sys
import time
from pathlib import Path

import pytest
from hypothesis import given, settings, strategies as st

from gem_core.envs.math.answer import MAX_ANSWER_CHARS, extract_boxed, extract_final_answer, extract_tagged
from gem_core.envs.scoring_pool import ScoringPool

sys.path.insert(0, str(Path(__file__).parent))
from math_grading_table import reference_extract_boxed  # noqa: E402


BOX_PIECES = st.lists(st.sampled_from(["\\boxed{", "\\fbox {", "{", "}", "}}", "1", " ", "\\frac", "x"]), max_size=40)


@settings(max_examples=400, deadline=None)
@given(BOX_PIECES.map("".join))
def test_linear_extractor_agrees_with_the_quadratic_one(text):
    assert extract_boxed(text) == reference_extract_boxed(text)


def timed(fn, *args):
    start = time.perf_counter()
    value = fn(*args)
    return value, time.perf_counter() - start


def test_ten_thousand_nested_boxes_are_one_pass():
    # 68 s before (a rescan per opener); the declared step limit of a math env is a few seconds.
    text = "\\boxed{" * 10_000 + "7" + "}" * 10_000
    answer, seconds = timed(extract_boxed, text)
    assert answer == "7"
    _, seconds_unclosed = timed(extract_boxed, "\\boxed{" * 10_000)
    assert max(seconds, seconds_unclosed) < 1.0


def test_unclosed_tags_are_one_pass():
    answer, seconds = timed(extract_tagged, "<answer>" * 100_000 + "x</answer>")
    assert answer == "x" and seconds < 1.0


def test_answers_over_the_cap_are_not_answers():
    long = "1" * (MAX_ANSWER_CHARS + 1)
    assert extract_boxed(f"\\boxed{{{long}}}") is None
    assert extract_tagged(f"<answer>{long}</answer>") is None
    assert extract_final_answer(f"\\boxed{{{long}}} <answer>2</answer>") == "2"
    assert extract_boxed(f"\\boxed{{{long[:-1]}}}") == long[:-1]


def test_tagged_answer_takes_the_innermost_last_tag():
    assert extract_tagged("<answer>a</answer> <ANSWER>b</Answer>") == "b"
    assert extract_tagged("<answer>a<answer>b</answer>") == "b"
    assert extract_tagged("<answer>open") is None


# ------------------------------------------------------------------------------------------ the pool


@pytest.fixture(scope="module")
def pool():
    scoring = ScoringPool(max_workers=1)
    yield scoring
    scoring.close()


def test_pool_kills_an_overrun_and_the_next_call_works(pool):
    result = pool.call("time:sleep", 30, timeout=0.5)
    assert result.timed_out and result.error == "timeout"
    assert pool.call("math:factorial", 5, timeout=30).value == 120


def test_pool_reports_a_crash_as_an_error(pool):
    result = pool.call("math:factorial", -1, timeout=30)
    assert not result.ok and result.error.startswith("ValueError")


def test_a_call_result_names_its_trouble_the_one_way_every_scoring_env_reports_it(pool):
    assert pool.call("math:factorial", 5, timeout=30).scoring_error is None
    assert pool.call("time:sleep", 30, timeout=0.5).scoring_error == "timeout"
    assert pool.call("math:factorial", -1, timeout=30).scoring_error.startswith("scorer crashed: ValueError")


def test_math_grader_reports_a_crash_as_the_other_scorers_do():
    from gem_core.envs.math.grading import GraderPool

    grader = GraderPool(max_workers=1)
    try:
        result = grader.grade(None, "1", timeout=30)  # a non-string answer crashes the grader in its worker
    finally:
        grader.close()
    assert not result.correct and not result.timed_out
    assert result.error is not None and result.error.startswith("scorer crashed: ")


def test_a_workers_scratch_folder_is_removed_when_it_is_killed_and_when_the_pool_closes():
    """Workers are stopped with SIGKILL (an overrun, ``close()``), so no cleanup of their own runs: ~250
    ``gem-scoring-*`` folders were left in /tmp by one test run."""
    scoring = ScoringPool(max_workers=1)
    try:
        overrun = Path(scoring.call("os:getcwd", timeout=30).value)
        assert overrun.name.startswith("gem-scoring-") and overrun.is_dir()
        assert scoring.call("time:sleep", 30, timeout=0.5).timed_out
        assert not overrun.exists()  # the killed worker's folder
        closed = Path(scoring.call("os:getcwd", timeout=30).value)  # its replacement's
        assert closed != overrun and closed.is_dir()
    finally:
        scoring.close()
    assert not closed.exists()


def test_a_scorer_that_prints_does_not_corrupt_the_replies(pool):
    assert pool.call("builtins:print", "garbage on stdout", timeout=30).ok
    assert pool.call("math:factorial", 4, timeout=30).value == 24


# ------------------------------------------------------------------------------------ math and QA envs


def test_math_env_pathological_answer_times_out_with_error_and_next_episode_works():
    pytest.importorskip("math_verify")
    from gem_core.registry import make

    env = make("math:Sample", grade_timeout=1.0)
    env.reset(seed=0)
    env.step("\\boxed{0}")  # starts the grading worker outside the timed step
    env.reset(seed=0)
    (_, reward, terminated, _, info), seconds = timed(env.step, "\\boxed{" * 10_000 + "9^{9^{9^{9}}}" + "}")
    assert (reward, terminated, info["error"], info["grading_timed_out"]) == (0.0, True, "timeout", True)
    assert seconds < env.max_step_seconds
    env.reset(seed=0)
    assert env.step(f"\\boxed{{{env.gold}}}")[1] == 1.0


def test_qa_scoring_runs_bounded_and_errors_are_logged_once(caplog):
    pytest.importorskip("datasets")
    from gem_core.registry import make

    env = make("qa:Sample")
    env.reset(seed=0)
    _, reward, _, _, info = env.step(f"\\boxed{{{env.golds[0]}}}")
    assert reward == 1.0 and "error" not in info
    env.golds = None  # a broken row: the scorer crashes in its worker
    with caplog.at_level(logging.WARNING, logger="gem"):
        for _ in range(3):
            env.reset(seed=0)
            env.golds = None
            _, reward, terminated, _, info = env.step("\\boxed{Paris}")
            assert (reward, terminated) == (0.0, True) and info["error"].startswith("scorer crashed: TypeError")
    warnings = [r for r in caplog.records if r.name.startswith("gem") and "qa:Sample" in r.getMessage()]
    assert len(warnings) == 1


# ------------------------------------------------------------------------------------ reasoning-gym


@pytest.mark.parametrize(("name", "answer"), [("n_queens", "\\boxed{10**10**10}"), ("n_queens", "\\boxed{1e999999}")])
def test_reasoning_gym_hostile_answers_return_within_the_limit(name, answer):
    pytest.importorskip("reasoning_gym")
    from gem_core.registry import make

    env = make(f"rg:{name}", score_timeout=2.0)
    env.reset(seed=0)
    env.step("<answer>0</answer>")  # worker start-up and dataset build happen here, outside the timed step
    env.reset(seed=0)
    (_, reward, terminated, _, info), seconds = timed(env.step, answer)
    assert reward == 0.0 and terminated and seconds < env.max_step_seconds
    assert info.get("error") in (None, "timeout") or info["error"].startswith("scorer crashed")
    env.reset(seed=0)
    _, reward, _, _, info = env.step(f"<answer>{env.entry['answer']}</answer>")
    assert reward == 1.0 and "error" not in info


def test_worker_start_up_is_reported_apart_from_the_call():
    scoring = ScoringPool(max_workers=1)
    try:
        first = scoring.call("math:factorial", 3, timeout=30)
        second = scoring.call("math:factorial", 3, timeout=30)
    finally:
        scoring.close()
    assert first.value == second.value == 6
    assert first.setup_seconds > second.setup_seconds  # the first call waited for the interpreter to start


# ------------------------------------------------------------------- every grader, every hostile answer

#: Issue 14's hostile answers: nesting that was quadratic to extract, numbers that explode in a parser or
#: a scorer, and a megabyte of action (over the extraction cap, and inside a box).
HOSTILE_ANSWERS = {
    "nested boxes": "\\boxed{" * 10_000 + "1",
    "tower": "\\boxed{10**10**10}",
    "huge float": "\\boxed{1e999999}",
    "power tower": "<answer>9^{9^{9^{9}}}</answer>",
    "1 MB action": "x" * 1_000_000,
    "1 MB answer": "\\boxed{" + "9" * 999_990 + "}",
}
GRADED = {
    "math:Sample": ("grade_timeout", lambda env: f"\\boxed{{{env.gold}}}"),
    "qa:Sample": ("score_timeout", lambda env: f"\\boxed{{{env.golds[0]}}}"),
    "rg:n_queens": ("score_timeout", lambda env: f"<answer>{env.entry['answer']}</answer>"),
    "rg:basic_arithmetic": ("score_timeout", lambda env: f"<answer>{env.entry['answer']}</answer>"),
}


@pytest.mark.parametrize("env_id", sorted(GRADED))
def test_hostile_answers_score_zero_within_the_declared_limit_and_the_next_episode_works(env_id):
    pytest.importorskip({"math": "math_verify", "qa": "datasets", "rg": "reasoning_gym"}[env_id.split(":")[0]])
    from gem_core.registry import make

    timeout_key, correct = GRADED[env_id]
    env = make(env_id, **{timeout_key: 1.0})
    env.reset(seed=0)
    env.step("\\boxed{0}")  # worker start-up and dataset build happen here, outside the timed steps
    for name, answer in HOSTILE_ANSWERS.items():
        env.reset(seed=0)
        (_, reward, terminated, _, info), seconds = timed(env.step, answer)
        # A worker replaced after the previous answer's timeout starts (and builds the dataset) before this one is
        # scored: time outside the declared limit, reported apart (scoring_pool.SETUP_REPORTED); 2.3 s here alone,
        # over 3 s with the machine loaded.
        scoring = seconds - info.get("scorer_setup_seconds", 0.0)
        assert scoring <= env.max_step_seconds, f"{env_id} {name}: {seconds:.1f} s, {scoring:.1f} s past the worker's start-up"
        # Not paid as correct (reasoning-gym's own scorers give some tasks' wrong numbers partial credit,
        # 0.1-0.125 on basic_arithmetic; every other grader gives 0).
        assert not info.get("correct") and terminated, (name, reward, info)
        assert reward < 1.0 if env_id.startswith("rg:") else reward <= 0.0, (name, reward, info)
        assert info.get("error") in (None, "timeout"), (name, info)  # a clean 0, or the timeout said so
    env.reset(seed=0)
    assert env.step(correct(env.unwrapped))[1] == 1.0


def test_a_trainer_with_descriptors_past_1023_gets_its_grades():
    """A trainer with many connections and files open hands the worker's pipe a descriptor past 1023, and the wait on
    it used ``select``, which refuses those: every grade raised ValueError (filedescriptor out of range)."""
    from connection_flood import allow_open_files

    if not allow_open_files(1200):
        pytest.skip("the hard open-file limit is under 1200")
    held = [os.open(os.devnull, os.O_RDONLY) for _ in range(1100)]
    scoring = ScoringPool(max_workers=1)  # its worker starts while the low descriptors are taken
    try:
        assert scoring.call("math:factorial", 5, timeout=30).value == 120
        assert scoring.call("time:sleep", 30, timeout=0.5).timed_out  # the wait with a deadline, on a high descriptor
    finally:
        scoring.close()
        for fd in held:
            os.close(fd)
