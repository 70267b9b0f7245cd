"""gem_core.curriculum.checkpoint: the sampler's state as gem_task_sampler.json in a checkpoint folder."""

from __future__ import annotations

import pytest

from gem_core.curriculum import SAMPLER_STATE_FILE, TaskError, TaskSampler, load_sampler_state, save_sampler_state
from gem_core.rows import EpisodeLabel

TASKS = ["game:GuessTheNumber-v0-easy", "game:GuessTheNumber-v0"]


def test_a_saved_state_restores_into_a_fresh_sampler(tmp_path):
    sampler = TaskSampler(TASKS, seed=5)
    for start in sampler.draw(10):
        sampler.update(start, start.seed % 2 == 0)
    path = save_sampler_state(sampler, tmp_path / "checkpoint-3")
    assert path.name == SAMPLER_STATE_FILE
    assert [p.name for p in path.parent.iterdir()] == [SAMPLER_STATE_FILE]  # no temporary file left behind
    fresh = TaskSampler(TASKS)
    assert load_sampler_state(fresh, path.parent) is True
    assert fresh.state_dict() == sampler.state_dict() and fresh.draw(20) == sampler.draw(20)


def test_a_folder_without_state_leaves_the_sampler_as_it_is(tmp_path):
    sampler = TaskSampler(TASKS)
    before = sampler.state_dict()
    assert load_sampler_state(sampler, tmp_path) is False
    assert sampler.state_dict() == before


def test_a_broken_or_foreign_state_file_is_refused(tmp_path):
    (tmp_path / SAMPLER_STATE_FILE).write_text("{not json")
    with pytest.raises(ValueError, match="is not JSON"):
        load_sampler_state(TaskSampler(TASKS), tmp_path)
    other = TaskSampler(["game:Wordle-v0"])
    other.update(EpisodeLabel("game:Wordle-v0", 0, {}), True)
    save_sampler_state(other, tmp_path)
    with pytest.raises(TaskError, match="other tasks"):
        load_sampler_state(TaskSampler(TASKS), tmp_path)


def test_a_save_that_fails_midway_keeps_the_previous_file_and_leaves_no_temporary(tmp_path, monkeypatch):
    """A full disk (or a kill) while saving: the checkpoint folder keeps the last whole state and no debris."""
    import errno
    import json
    import os

    sampler = TaskSampler(TASKS, seed=3)
    save_sampler_state(sampler, tmp_path)
    before = (tmp_path / SAMPLER_STATE_FILE).read_text()
    sampler.update(sampler.draw(1)[0], True, 1.0)

    def disk_full(*args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "replace", disk_full)
    with pytest.raises(OSError, match="No space left"):
        save_sampler_state(sampler, tmp_path)
    assert [p.name for p in tmp_path.iterdir()] == [SAMPLER_STATE_FILE]
    assert (tmp_path / SAMPLER_STATE_FILE).read_text() == before and json.loads(before)
