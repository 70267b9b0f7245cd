"""The curriculum lock file in a state_dir is never followed through a link nor written when it is not this
user's own file (issue 47.4): another user who plants ``.gem_task_sampler.lock`` as a symbolic link in a
folder they own must not get a root run to truncate and write the link's target."""

from __future__ import annotations

import os

import pytest

from gem_core.curriculum import GroupStarts, TaskError, TaskSampler
from gem_core.curriculum.groups import LOCK_FILE

ROOT = hasattr(os, "geteuid") and os.geteuid() == 0
VICTIM_TEXT = "precious contents\n"


def sampler() -> TaskSampler:
    return TaskSampler(["game:GuessTheNumber-v0-easy", "game:GuessTheNumber-v0"], seed=0)


def test_a_lock_file_that_is_a_symbolic_link_is_refused_and_its_target_untouched(tmp_path):
    state_dir, victim = tmp_path / "state", tmp_path / "victim"
    state_dir.mkdir()
    victim.write_text(VICTIM_TEXT)
    (state_dir / LOCK_FILE).symlink_to(victim)
    with pytest.raises(TaskError) as caught:
        GroupStarts(sampler(), 2, state_dir=state_dir)
    message = str(caught.value)
    assert str(state_dir / LOCK_FILE) in message and "symbolic link" in message and f"rm {state_dir / LOCK_FILE}" in message
    assert victim.read_text() == VICTIM_TEXT


def test_a_dangling_link_does_not_create_its_target(tmp_path):
    state_dir, target = tmp_path / "state", tmp_path / "created-through-the-link"
    state_dir.mkdir()
    (state_dir / LOCK_FILE).symlink_to(target)
    with pytest.raises(TaskError, match="symbolic link"):
        GroupStarts(sampler(), 2, state_dir=state_dir)
    assert not target.exists()


def test_a_lock_file_hard_linked_to_another_file_is_refused(tmp_path):
    state_dir, victim = tmp_path / "state", tmp_path / "victim"
    state_dir.mkdir()
    victim.write_text(VICTIM_TEXT)
    os.link(victim, state_dir / LOCK_FILE)
    with pytest.raises(TaskError, match="hard links"):
        GroupStarts(sampler(), 2, state_dir=state_dir)
    assert victim.read_text() == VICTIM_TEXT


@pytest.mark.skipif(not ROOT, reason="making a file another user's needs root")
def test_another_users_lock_file_is_not_truncated(tmp_path):
    state_dir = tmp_path / "state"
    state_dir.mkdir()
    lock = state_dir / LOCK_FILE
    lock.write_text(VICTIM_TEXT)
    os.chown(lock, 65534, 65534)
    with pytest.raises(TaskError) as caught:
        GroupStarts(sampler(), 2, state_dir=state_dir)
    assert "uid 65534" in str(caught.value) and str(lock) in str(caught.value)
    assert lock.read_text() == VICTIM_TEXT


def test_an_own_lock_file_left_by_an_earlier_run_is_reused(tmp_path):
    (tmp_path / LOCK_FILE).write_text("12345\n")
    GroupStarts(sampler(), 2, state_dir=tmp_path).close()
    assert (tmp_path / LOCK_FILE).read_text() == f"{os.getpid()}\n"
