"""Task mistakes caught when a TaskSampler (or its spec) is made, not mid-run in a worker; metric keys that loggers keep whole."""

from __future__ import annotations

import math
import pathlib

import pytest

from gem_core.curriculum import Task, TaskError, TaskSampler, numeric_ladder, sampler_from_spec, tag_task, task_metrics
from gem_core.rollout import TokenTrajectory
from gem_core.rows import EpisodeLabel

EASY, MID = "game:GuessTheNumber-v0-easy", "game:GuessTheNumber-v0"


# -- 2: seed_start and env kwargs ----------------------------------------------------------------------------
@pytest.mark.parametrize("seed_start", [-5, -1, 2.0, "0", True])
def test_seed_start_must_be_a_whole_number_of_at_least_zero(seed_start):
    with pytest.raises(TaskError, match=f"seed_start must be an integer of at least 0, got {seed_start!r}"):
        TaskSampler([MID], seed_start=seed_start)


@pytest.mark.parametrize("kwargs,message", [
    ({"nope": 1}, "unexpected keyword argument 'nope'"),
    ({"max_number": "abc"}, "max_number='abc' must be a whole number"),
    ({"min_number": 5, "max_number": 2}, "must be below max_number"),
])
def test_kwargs_the_env_refuses_fail_when_the_sampler_is_made_naming_the_task_and_the_registered_kwargs(kwargs, message):
    task = Task(MID, kwargs)
    with pytest.raises(TaskError) as refused:
        TaskSampler([Task(EASY), task])
    text = str(refused.value)
    assert f"Task {task.name!r}" in text and message in text and "its registered kwargs are" in text
    assert "Fix the task's env_kwargs" in text
    with pytest.raises(TaskError, match="its registered kwargs are"):
        sampler_from_spec({"tasks": [{"env_id": MID, "env_kwargs": kwargs}]})


def test_a_dataset_backed_task_whose_data_file_is_missing_fails_when_the_sampler_is_made(tmp_path):
    missing = tmp_path / "rows.jsonl"
    with pytest.raises(TaskError, match=r"Task 'judge:Sample\[data_files=.*\]': building judge:Sample failed \(.*rows.jsonl.*\)"):
        TaskSampler([Task("judge:Sample", {"data_files": str(missing)})])


def test_each_distinct_env_is_built_once_to_check_it_however_many_tasks_share_it(monkeypatch):
    import gem_core.curriculum.task as task_module

    built = []
    real = task_module.make_label_env
    monkeypatch.setattr(task_module, "make_label_env", lambda label: built.append(label) or real(label))
    monkeypatch.setattr(task_module, "_CHECKED", set())
    pinned = [Task(MID, {"max_number": 7}, seed=s) for s in range(50)]  # one dataset row each: one env
    TaskSampler([*pinned, Task(MID, {"max_number": 9})])
    assert sorted(label.env_kwargs["max_number"] for label in built) == [7, 9]
    TaskSampler([Task(MID, {"max_number": 9})])  # checked before in this process: not built again
    assert len(built) == 2
    numeric_ladder(MID, "max_number", [11, 12])  # the ladder checks its rungs the same way
    assert len(built) == 4


# -- 5: a spec's tasks ------------------------------------------------------------------------------------
@pytest.mark.parametrize("tasks,message", [
    ([{"env_id": MID, "bogus": 1}], "unknown keys ['bogus']"),
    ([{"weight": 1}], "has no 'env_id'"),
    (5, "'tasks' must be"),
    (None, "'tasks' must be"),
    ([5], "is 5, not an env id or a task object"),
    ([{"env_id": MID, "env_kwargs": "max_number=4"}], "env_kwargs must be an object"),
    ([{"env_id": 7}], "env_id must be an env id (text)"),
])
def test_bad_tasks_in_a_spec_are_a_task_error_saying_what_a_task_is(tasks, message):
    with pytest.raises(TaskError) as refused:
        sampler_from_spec({"tasks": tasks})
    assert message in str(refused.value)


# -- 6: metric keys ----------------------------------------------------------------------------------------
def test_metric_keys_have_no_slashes_spaces_or_quotes_in_the_task_part():
    sampler = TaskSampler([Task(MID, name='lvl "1"/x y'), Task(EASY)])
    assert sorted(sampler.metrics()) == [
        "gem/curriculum/game:GuessTheNumber-v0-easy/probability", "gem/curriculum/lvl_1_x_y/probability", "gem/curriculum/unlocked"]
    trajectory = TokenTrajectory(prompt_ids=[1], response_ids=[2], loss_mask=[1], logprobs=[0.0], turn_spans=[(0, 1)], rewards=[1.0],
                                 terminated=True, truncated=False, env_id=MID, seed=0, infos=[{"success": True}])
    tag_task(trajectory, EpisodeLabel(MID, 0, {}), 'lvl "1"/x y')
    assert sorted(task_metrics([trajectory])) == ["gem/task/lvl_1_x_y/episodes", "gem/task/lvl_1_x_y/return", "gem/task/lvl_1_x_y/success"]


def test_tasks_whose_metric_keys_would_collide_are_refused():
    with pytest.raises(TaskError, match=r"Tasks 'a/b' and 'a_b' share the metric name 'a_b'.*rename one"):
        TaskSampler([Task(MID, name="a/b"), Task(EASY, name="a_b")])


def test_a_kwarg_that_is_not_json_data_is_a_task_error():
    with pytest.raises(TaskError, match=r"env_kwargs are not JSON data \(.*PosixPath.*\): give .* str\(path\)"):
        Task("judge:Sample", {"data_files": pathlib.Path("/tmp/rows.jsonl")})


# -- 7: weights -------------------------------------------------------------------------------------------
@pytest.mark.parametrize("weighting", ["uniform", "band"])
def test_weights_whose_sum_is_not_finite_are_refused(weighting):
    with pytest.raises(TaskError, match="weights sum to inf: scale them down"):
        TaskSampler([Task(MID, weight=1e308), Task(EASY, weight=1e308)], weighting=weighting)
    sampler = TaskSampler([Task(MID, weight=1e307), Task(EASY, weight=1e307)], weighting=weighting)
    assert all(math.isclose(p, 0.5) for p in sampler.probabilities().values())


@pytest.mark.parametrize("success, episode_return", [(True, None), (True, "abc"), (True, math.nan), (False, math.inf), (math.nan, 1.0),
                                                     ("yes", 1.0), (0.5, 1.0)])
def test_a_bad_outcome_is_refused_and_leaves_the_statistics_as_they_were(tmp_path, success, episode_return):
    """The success was recorded before the return was converted: a return of None or "abc" raised a bare error and
    left the window's successes one longer than its returns, which the sampler's own checkpoint then refused to
    load; a NaN success counted as a success (bool(nan)), a NaN return went into the checkpoint as NaN (not JSON)."""
    from gem_core.curriculum.checkpoint import load_sampler_state, save_sampler_state
    from gem_core.errors import InvalidArgument

    sampler = TaskSampler(["game:GuessTheNumber-v0"], seed=0)
    start = sampler.draw(1)[0]
    sampler.update(start, success=True, episode_return=1.0)
    before = sampler.stats(start).to_json()
    with pytest.raises(InvalidArgument, match="success|episode_return"):
        sampler.update(start, success=success, episode_return=episode_return)
    assert sampler.stats(start).to_json() == before
    save_sampler_state(sampler, tmp_path)
    assert load_sampler_state(TaskSampler(["game:GuessTheNumber-v0"], seed=0), tmp_path)


@pytest.mark.parametrize("success", [True, False, 1, 0, 1.0])
def test_an_outcome_given_as_a_number_is_taken(success):
    import numpy as np

    sampler = TaskSampler(["game:GuessTheNumber-v0"], seed=0)
    start = sampler.draw(1)[0]
    sampler.update(start, success=success, episode_return=np.float32(0.5))
    sampler.update(start, success=np.bool_(success), episode_return=np.float64(0.5))
    assert sampler.stats(start).successes == 2 * int(success)


def test_a_task_pinned_to_a_negative_seed_is_refused_when_the_sampler_is_made():
    """It was accepted, and every episode of it failed later in the trainer (gymnasium refuses negative seeds)."""
    with pytest.raises(TaskError, match="seed -4"):
        sampler_from_spec({"tasks": [{"env_id": "game:GuessTheNumber-v0", "seed": -4}]})


def test_a_task_name_that_is_not_text_is_a_task_error_naming_it():
    """It was reported as "Bad task sampler spec []" with a regex error: neither the key nor the fix."""
    with pytest.raises(TaskError, match="name"):
        sampler_from_spec({"tasks": [{"env_id": "game:GuessTheNumber-v0", "name": 7}]})


def test_a_state_dir_given_as_a_path_is_taken(tmp_path):
    """A Path (GroupStarts takes one) raised a bare TypeError from json.dumps of the spec."""
    from gem_core.curriculum.shared import shared_group_starts

    starts = shared_group_starts({"tasks": ["game:GuessTheNumber-v0"], "state_dir": tmp_path / "state"}, 2)
    assert starts is shared_group_starts({"tasks": ["game:GuessTheNumber-v0"], "state_dir": str(tmp_path / "state")}, 2)


# -- 8: upper bounds ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("seed_start", [2**63, 2**64])
def test_seed_start_past_the_largest_seed_is_refused_at_construction(seed_start):
    with pytest.raises(TaskError, match="seed_start"):
        TaskSampler([MID], seed_start=seed_start)


def test_a_task_pinned_past_the_largest_seed_is_refused():
    with pytest.raises(TaskError, match="seed 9223372036854775808"):
        Task(MID, seed=2**63)


@pytest.mark.parametrize("k", [1, 3])
def test_a_draw_past_the_largest_seed_is_a_task_error_and_changes_nothing(k):
    """It raised a dataset LabelError after the draw count and the task's next seed had moved on."""
    from gem_core.env import MAX_SEED

    sampler = TaskSampler([MID], seed_start=MAX_SEED - 1)
    assert sampler.draw(1)[0].seed == MAX_SEED - 1
    before = sampler.state_dict()
    with pytest.raises(TaskError, match="every seed"):
        sampler.draw(k + 1)
    assert sampler.state_dict() == before
    assert sampler.draw(1)[0].seed == MAX_SEED


@pytest.mark.parametrize("setting,value", [("window", 10**19), ("group_size", 10**400), ("window", 10**7)],
                         ids=["window 10**19", "group_size 10**400", "window 10**7"])
def test_counts_past_their_upper_bound_are_refused_at_construction(setting, value):
    """They were accepted, then failed deep inside with a bare OverflowError."""
    with pytest.raises(TaskError, match=f"{setting} must be an integer of at least 2 and at most"):
        TaskSampler([MID], **{setting: value})


def test_returns_whose_sum_would_not_be_finite_are_refused_and_the_state_stays_json(tmp_path):
    """Two returns of 1e308 made return_sum inf, and the saved file held Infinity (not JSON)."""
    import json

    from gem_core.curriculum.checkpoint import save_sampler_state
    from gem_core.errors import InvalidArgument

    sampler = TaskSampler([MID])
    sampler.update(MID, True, 1e308)
    before = sampler.stats(MID).to_json()
    with pytest.raises(InvalidArgument, match="return sum"):
        sampler.update(MID, True, 1e308)
    assert sampler.stats(MID).to_json() == before
    json.loads(save_sampler_state(sampler, tmp_path).read_text(), parse_constant=lambda c: pytest.fail(f"{c} in the file"))
