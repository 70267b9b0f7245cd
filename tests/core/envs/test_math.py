"""math:<Dataset> envs: answer extraction, the grading table, time-limited grading and the env contract."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from ci_guard import skip_unless_ci

pytest.importorskip("datasets")
pytest.importorskip("math_verify")

from hypothesis import given, settings, strategies as st  # noqa: E402

import gem_core.envs.math as math_envs  # noqa: E402
from gem_core.envs.dataset import clear_cache, load_rows  # noqa: E402
from gem_core.envs.math.answer import extract_boxed, extract_final_answer  # noqa: E402
from gem_core.envs.math.env import MathEnv, gold_from_field  # noqa: E402
from gem_core.envs.math.grading import GraderPool, grade, normalized_equal  # noqa: E402
from gem_core.registry import list_envs, make  # noqa: E402

sys.path.insert(0, str(Path(__file__).parent))
from math_grading_table import GRADING_TABLE  # noqa: E402

PATHOLOGICAL = "9^{9^{9^{9}}}"


@pytest.fixture(scope="module")
def pool():
    graders = GraderPool(max_workers=2)
    yield graders
    graders.close()


def test_grading_table_is_large_enough_and_covers_both_verdicts():
    assert len(GRADING_TABLE) >= 60
    assert {label for *_, label in GRADING_TABLE} == {True, False}


def test_every_labelled_answer_gets_the_right_verdict(pool):
    wrong = []
    for response, gold, label in GRADING_TABLE:
        answer = extract_boxed(response)
        verdict = bool(answer) and pool.grade(answer, gold, timeout=30.0).correct
        if verdict != label:
            wrong.append((response, gold, label))
    assert wrong == []


def test_pathological_answer_times_out_and_the_next_grade_still_works(pool):
    result = pool.grade(PATHOLOGICAL, "5", timeout=1.0)
    assert result.timed_out and not result.correct
    assert pool.grade("\\frac{1}{2}", "0.5", timeout=30.0).correct
    assert not pool.grade("3", "0.5", timeout=30.0).correct


def test_time_limit_holds_outside_the_main_thread(pool):
    results = []
    threads = [threading.Thread(target=lambda: results.append(pool.grade(PATHOLOGICAL, "5", timeout=1.0))) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert [r.timed_out for r in results] == [True, True]
    assert pool.grade("x^2+2x+1", "(x+1)^2", timeout=30.0).correct


def test_inline_grading_needs_no_worker():
    assert grade("\\frac{1}{2}", "0.5", timeout=None).correct
    assert not grade("2", "0.5", timeout=None).correct


def test_normalized_fallback_handles_plain_strings():
    assert normalized_equal(" 1,000 ", "1000")
    assert normalized_equal("\\text{Paris}", "paris")
    assert not normalized_equal("12", "21")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("\\boxed{\\frac{1}{2}}", "\\frac{1}{2}"),
        ("a \\boxed{1} then \\boxed{ 2 }", "2"),
        ("\\boxed{\\{1,2\\}}", "\\{1,2\\}"),
        ("\\boxed{1} then \\boxed{2", "1"),
        ("no box", None),
    ],
)
def test_extract_boxed_takes_the_last_complete_box(text, expected):
    assert extract_boxed(text) == expected


def test_extract_final_answer_takes_whichever_comes_last():
    assert extract_final_answer("\\boxed{1} <answer>2</answer>") == "2"
    assert extract_final_answer("<answer>2</answer> \\boxed{1}") == "1"


def test_gold_formats():
    assert gold_from_field("She pays 3*4=12.\n#### 1,200", "gsm8k") == "1200"
    assert gold_from_field("So $x=\\boxed{\\frac{1}{2}}$.", "boxed") == "\\frac{1}{2}"
    assert gold_from_field(" 7 ") == "7"
    with pytest.raises(ValueError, match="answer_format"):
        gold_from_field("7", "latex")


def test_sample_env_rewards_the_gold_answer_and_penalizes_no_box():
    env = make("math:Sample")
    _, info = env.reset(seed=3)
    obs, reward, terminated, truncated, info = env.step(f"Thinking... so \\boxed{{{env.gold}}}.")
    assert (reward, terminated, truncated, info["correct"]) == (1.0, True, False, True)
    env.reset(seed=3)
    _, reward, terminated, _, info = env.step(f"The answer is {env.gold}")
    assert reward == env.format_penalty and terminated and info["format_error"]


def test_reset_is_deterministic_in_the_seed_and_covers_the_dataset():
    env = make("math:Sample")
    first = [env.reset(seed=s)[0] for s in range(30)]
    again = [env.reset(seed=s)[0] for s in range(30)]
    assert first == again
    assert len(set(first)) > 5


def test_sample_random_action_is_a_boxed_string():
    env = make("math:Sample")
    env.reset(seed=0)
    action = env.sample_random_action()
    assert isinstance(action, str) and extract_boxed(action) is not None


@settings(max_examples=40, deadline=None)
@given(st.text(max_size=200) | st.builds(lambda s: f"\\boxed{{{s}}}", st.text(max_size=30)))
def test_step_never_raises(action):
    env = make("math:Sample", grade_timeout=None if "\\boxed" not in action else 10.0)
    env.reset(seed=0)
    obs, reward, terminated, truncated, info = env.step(action)
    assert isinstance(obs, str) and terminated
    assert reward in (0.0, 1.0, env.format_penalty)


def test_envs_share_one_loaded_dataset():
    clear_cache()
    a, b = make("math:Sample"), make("math:Sample")
    assert a.rows is b.rows


def test_local_file_replaces_the_hub_dataset(tmp_path):
    rows = [{"question": "What is 2+3?", "answer": "2+3=5\n#### 5"}]
    path = tmp_path / "gsm8k.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in rows))
    env = make("math:GSM8K", data_files=str(path))
    env.reset(seed=0)
    assert env.gold == "5"
    assert env.step("\\boxed{5}")[1] == 1.0


def test_every_dataset_has_a_plain_and_a_python_id():
    """Text datasets get a Python-tool twin; the figure dataset (math:Geometry3K, images in info) has none."""
    names = ["Sample", *math_envs.HUB_DATASETS]
    ids = [f"math:{n}" for n in names] + [f"math:{n}-python" for n in names] + ["math:Geometry3K"]
    assert list_envs("math:*") == sorted(ids)


@pytest.mark.parametrize("name", sorted(math_envs.HUB_DATASETS))
def test_every_hub_id_names_columns_a_local_copy_can_supply(name, tmp_path):
    env_id = f"math:{name}"
    _, _, _, question, answer, _ = math_envs.HUB_DATASETS[name]
    path = tmp_path / "rows.parquet"
    import datasets

    datasets.Dataset.from_list([{question: "What is 1+1?", answer: "\\boxed{2} #### 2"}]).to_parquet(path)
    env = make(env_id, data_files=str(path))
    assert env.reset(seed=0)[0].startswith("What is 1+1?")


def test_missing_column_error_names_the_columns(tmp_path):
    path = tmp_path / "rows.jsonl"
    path.write_text(json.dumps({"q": "1+1?", "a": "2"}))
    with pytest.raises(ValueError, match="question_field"):
        MathEnv(data_files=str(path))


def test_offline_hub_load_fails_with_a_hint_to_use_local_files():
    code = (
        "from gem_core.envs.math.env import MathEnv\n"
        "from gem_core.envs.dataset import DatasetUnavailableError\n"
        "try:\n    MathEnv('openai/gsm8k', dataset_name='main')\n"
        "except DatasetUnavailableError as e:\n    print('ERR', e)\n"
    )
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120).stdout
    assert "ERR" in out and "data_files=" in out


def test_load_rows_rejects_a_missing_local_file(tmp_path):
    with pytest.raises(FileNotFoundError):
        load_rows(None, data_files=str(tmp_path / "nope.jsonl"))


def test_python_variant_runs_code_then_grades_the_answer():
    from gem_core.tools import sandbox

    if not sandbox.available_modes():
        skip_unless_ci("no sandbox mode works on this machine")
    env = make("math:Sample-python", sandbox_mode=sandbox.available_modes()[0])
    obs, info = env.reset(seed=4)
    assert "<python>" in obs and info["tools"] == ["python"]
    obs, reward, terminated, _, info = env.step("Let me compute.\n<python>print(6 * 7 - 15)</python>")
    assert "27" in obs and reward == 0.0 and not terminated and info["tool_call_count"] == 1
    gold = env.unwrapped.gold
    _, reward, terminated, _, info = env.step(f"So the answer is \\boxed{{{gold}}}")
    assert (reward, terminated, info["correct"]) == (1.0, True, True)


def test_sample_kwargs_build_every_math_id_offline():
    from gem_core.registry import spec

    for env_id in list_envs("math:*"):
        if env_id.endswith("-python"):
            continue
        env_spec = spec(env_id)
        env = env_spec.make(**env_spec.sample_kwargs)
        assert env.reset(seed=0)[0]


def test_a_vector_env_loads_its_dataset_once(monkeypatch):
    import datasets

    from gem_core.vector import make_vec

    calls = []
    real_load = datasets.load_dataset
    monkeypatch.setattr(datasets, "load_dataset", lambda *a, **k: calls.append(a) or real_load(*a, **k))
    clear_cache()
    vec = make_vec("math:Sample", num_envs=4, backend="thread")
    try:
        vec.reset(seed=0)
    finally:
        vec.close()
    assert len(calls) == 1


def test_closing_a_pool_stops_its_workers():
    graders = GraderPool(max_workers=1)
    assert graders.grade("\\frac{1}{2}", "0.5", timeout=30.0).correct
    workers = list(graders._idle)
    graders.close()
    assert workers and all(worker.proc.poll() is not None for worker in workers)


@pytest.mark.parametrize(
    ("prediction", "gold", "expected"),
    [
        ("100000000000000000001", "100000000000000000000", False),  # a relative tolerance called these equal
        ("100000000000000000000", "100000000000000000000", True),
        ("-12", "12", False),
        ("007", "7", True),
        ("1,000,000", "1000000", True),
        ("9" * 5000, "9" * 4999 + "8", False),  # past int()'s digit limit, still exact
    ],
)
def test_integers_are_compared_exactly(prediction, gold, expected):
    assert normalized_equal(prediction, gold) is expected
    assert grade(prediction, gold, timeout=30.0).correct is expected
    assert grade(prediction, gold, timeout=None).correct is expected


@pytest.mark.parametrize(
    ("prediction", "gold", "expected"),
    [
        ("0.\\overline{3}", "\\frac{1}{3}", True),
        ("\\frac{1}{3}", "0.\\overline{3}", True),
        ("0.\\overline{6}", "\\frac{2}{3}", True),
        ("0.1\\overline{6}", "\\frac{1}{6}", True),
        ("0.\\overline{142857}", "\\frac{1}{7}", True),
        ("1.\\overline{3}", "\\frac{4}{3}", True),
        ("-0.\\overline{3}", "-\\frac{1}{3}", True),
        ("0.(3)", "1/3", True),
        ("0.\\bar{3}", "\\frac{1}{3}", True),
        ("0.\\overline{9}", "1", True),
        ("0.\\overline{3}", "0.333", False),
        ("0.\\overline{3}", "\\frac{1}{4}", False),
        ("0.\\overline{12}", "\\frac{12}{99}", True),
        ("$0.\\overline{3}$", "\\dfrac{1}{3}", True),
    ],
)
def test_repeating_decimals_are_the_fractions_they_denote(prediction, gold, expected):
    assert grade(prediction, gold, timeout=30.0).correct is expected
    assert grade(prediction, gold, timeout=None).correct is expected


def test_repeating_decimal_against_an_expression_goes_to_math_verify(pool):
    assert pool.grade("0.\\overline{3}", "\\frac{2}{6}", timeout=30.0).correct
    assert pool.grade("0.\\overline{3}", "\\sqrt{1/9}", timeout=30.0).correct
