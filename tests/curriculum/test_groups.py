"""gem_core.curriculum.groups and .shared: the copies of a group share a start however a trainer delivers
them, finished episodes update the sampler, and the state comes back from ``state_dir``."""

from __future__ import annotations

import json
import sys
from collections import UserList
from types import MappingProxyType, ModuleType

import pytest

from gem_core.curriculum import (
    SAMPLER_STATE_FILE, GroupStarts, RowStarts, Task, TaskError, TaskSampler, episode_outcome, group_starts, record_outcomes,
    sampler_from_spec, shared_group_starts,
)
from gem_core.rollout import TokenTrajectory
from gem_core.rows import EpisodeLabel

EASY, MID, HARD = "game:GuessTheNumber-v0-easy", "game:GuessTheNumber-v0", "game:GuessTheNumber-v0-hard"


def sampler(**kwargs) -> TaskSampler:
    return TaskSampler([EASY, MID, HARD], seed=5, min_episodes=2, window=8, **kwargs)


def trajectory(success: bool, episode_return: float) -> TokenTrajectory:
    return TokenTrajectory(
        prompt_ids=[1], response_ids=[2], loss_mask=[1], logprobs=[0.0], turn_spans=[(0, 1)], rewards=[episode_return],
        terminated=True, truncated=False, env_id=EASY, seed=0, infos=[{"success": success}],
    )


def test_group_starts_give_each_process_its_slice_of_one_draw_per_global_group():
    # 12 rows over 2 processes in groups of 4: the middle group spans both processes.
    rows = ["p0"] * 4 + ["p1"] * 4 + ["p2"] * 4
    whole = group_starts(sampler(), rows, 4)
    assert whole[:4] == [whole[0]] * 4 and whole[4:8] == [whole[4]] * 4 and whole[8:] == [whole[8]] * 4
    assert len({whole[0].to_json(), whole[4].to_json(), whole[8].to_json()}) == 3
    first, second = sampler(), sampler()
    assert group_starts(first, rows[:6], 4, rank=0, world=2) + group_starts(second, rows[6:], 4, rank=1, world=2) == whole
    assert first.draws == second.draws == 3


def test_group_starts_refuse_partial_groups_and_copies_that_differ():
    with pytest.raises(ValueError, match="not a whole number of groups of 4"):
        group_starts(sampler(), ["a"] * 6, 4)
    with pytest.raises(ValueError, match="Rows 0 and 1 belong to one group of 2 but differ"):
        group_starts(sampler(), ["a", "b", "c", "c"], 2)
    # Rows 6..11 of the global batch: the end of the group of rows 4..7, then the group of rows 8..11.
    starts = group_starts(sampler(), ["x", "x", "y", "y", "y", "y"], 4, rank=1, world=2)
    assert starts[0] == starts[1] != starts[2] == starts[5]
    with pytest.raises(ValueError, match="Rows 2 and 3 belong to one group of 4"):
        group_starts(sampler(), ["x", "x", "y", "z", "y", "y"], 4, rank=1, world=2)


def test_outcomes_update_the_sampler_in_order():
    s = sampler()
    (start,) = s.draw(1)
    record_outcomes(s, [episode_outcome(start, trajectory(True, 1.0)), episode_outcome(start.env_id, trajectory(False, 0.25))])
    stats = s.stats(start)
    assert (stats.episodes, stats.successes, stats.return_sum) == (2, 1, 1.25)


async def test_copies_arriving_one_at_a_time_share_their_keys_start_until_all_copies_came():
    s = sampler()
    starts = GroupStarts(s, copies=3)
    a1, b1, a2, a3, b2 = [await starts.start(key) for key in ("a", "b", "a", "a", "b")]
    assert a1 == a2 == a3 and b1 == b2 and a1 != b1
    assert s.draws == 2
    # All three copies of "a" came: the key seen again (the same row next epoch) is a new group.
    assert await starts.start("a") != a1 and s.draws == 3
    assert await starts.start("b") == b1 and s.draws == 3


async def test_the_oldest_waiting_key_is_forgotten_past_max_open():
    starts = GroupStarts(sampler(), copies=2, max_open=1)
    first = await starts.start("a")
    await starts.start("b")  # "a" is forgotten: its second copy never came
    assert await starts.start("a") != first


async def test_finished_copies_update_the_sampler_and_state_dir_saves_and_restores_it(tmp_path):
    s = sampler()
    starts = GroupStarts(s, copies=2, state_dir=tmp_path)
    start = await starts.start("row")
    await starts.start("row")
    won = trajectory(True, 1.0)
    await starts.finish(start, won)
    assert won.metrics["task"] == s.task_of(start).name
    assert not (tmp_path / SAMPLER_STATE_FILE).exists(), "saved once a group's worth of copies finished"
    await starts.record(episode_outcome(start, trajectory(False, 0.0)))
    assert s.stats(start).episodes == 2 and s.stats(start).successes == 1
    assert json.loads((tmp_path / SAMPLER_STATE_FILE).read_text()) == s.state_dict()

    # A new run with the same folder (once the first gave it up) continues: same statistics, the next draw
    # the first run would make.
    starts.close()
    restored = GroupStarts(sampler(), copies=2, state_dir=tmp_path)
    assert restored.sampler.state_dict() == s.state_dict()
    assert await restored.start("next") == await starts.start("next")
    assert (await restored.metrics())[f"gem/curriculum/{s.task_of(start).name}/success"] == 0.5


def test_a_sampler_spec_is_plain_data_or_its_json():
    spec = {"tasks": [EASY, {"env_id": MID, "env_kwargs": {"max_turns": 3}, "weight": 2}], "weighting": "uniform", "seed": 2}
    built = sampler_from_spec(spec)
    assert built.tasks == (Task(EASY), Task(MID, {"max_turns": 3}, weight=2))
    assert built.weighting == "uniform" and built.seed == 2
    assert sampler_from_spec(json.dumps(spec)).draw(4) == built.draw(4)
    assert [t.weight for t in sampler_from_spec({"tasks": {EASY: 1, MID: 3}}).tasks] == [1, 3]
    with pytest.raises(TaskError, match="its keys are 'tasks' and TaskSampler's arguments"):
        sampler_from_spec({"tasks": [EASY], "temperature": 1})
    with pytest.raises(TaskError, match="is not JSON"):
        sampler_from_spec("{tasks")
    with pytest.raises(TaskError, match="an object with 'tasks'"):
        sampler_from_spec({"weighting": "band"})


async def test_row_starts_keep_the_rows_label_and_tag_the_task():
    row = EpisodeLabel(MID, 7, {"max_turns": 3})
    starts = shared_group_starts(None, 4)
    assert isinstance(starts, RowStarts) and shared_group_starts({}, 2) is starts
    assert await starts.start("key", row) == row
    finished = trajectory(True, 1.0)
    await starts.finish(row, finished)
    assert finished.metrics["task"] == f'{MID}[max_turns=3]'
    with pytest.raises(ValueError, match="pass start"):
        await starts.start("key")


def test_shared_group_starts_are_one_object_per_process_and_arguments(tmp_path):
    spec = {"tasks": [EASY, MID], "seed": 11, "state_dir": str(tmp_path)}
    shared = shared_group_starts(spec, 4)
    assert isinstance(shared, GroupStarts) and shared.copies == 4 and shared.state_dir == str(tmp_path)
    assert shared.sampler.tasks == (Task(EASY), Task(MID)) and shared.sampler.seed == 11
    assert shared_group_starts(json.dumps(spec), 4) is shared
    # Other arguments, another sampler: it needs its own state_dir (one owner per folder).
    assert shared_group_starts({**spec, "state_dir": str(tmp_path / "b")}, 2) is not shared
    assert shared_group_starts({**spec, "seed": 12, "state_dir": str(tmp_path / "c")}, 4) is not shared


def test_a_module_that_only_shares_rays_name_is_not_taken_for_ray(monkeypatch, tmp_path):
    """Without Ray, a folder named ``ray`` on the path imports as an empty namespace package (the core test
    session's tests/core/ray did): that is no running Ray job."""
    monkeypatch.setitem(sys.modules, "ray", ModuleType("ray"))
    shared = shared_group_starts({"tasks": [EASY, MID], "seed": 21, "state_dir": str(tmp_path)}, 2)
    assert isinstance(shared, GroupStarts)


def test_shared_group_starts_take_mappings_and_sequences_that_are_not_dicts_and_lists():
    # As a YAML config's nodes (OmegaConf's DictConfig/ListConfig, which the verl test passes for real).
    node = MappingProxyType({"tasks": UserList([EASY, MappingProxyType({"env_id": MID, "env_kwargs": {"max_turns": 3}})]), "seed": 13})
    shared = shared_group_starts(node, 2)
    assert shared.sampler.tasks == (Task(EASY), Task(MID, {"max_turns": 3}))
    assert shared_group_starts({"tasks": [EASY, {"env_id": MID, "env_kwargs": {"max_turns": 3}}], "seed": 13}, 2) is shared


@pytest.mark.parametrize("rank,world", [("0", 1), (0, "2"), (0, 0), (1.0, 2), (True, 2)])
def test_group_starts_refuse_a_rank_or_world_that_is_not_a_count(rank, world):
    """A rank given as text raised a bare TypeError from the comparison."""
    from gem_core.errors import InvalidArgument

    with pytest.raises(InvalidArgument, match="rank|world"):
        group_starts(sampler(), ["a", "a"], 2, rank=rank, world=world)
