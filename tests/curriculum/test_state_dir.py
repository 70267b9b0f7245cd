"""gem_core.curriculum.GroupStarts' state_dir: one owner at a time, and a path that cannot be a folder refused at once."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from gem_core.curriculum import SAMPLER_STATE_FILE, GroupStarts, TaskError, TaskSampler, shared_group_starts

EASY, MID = "game:GuessTheNumber-v0-easy", "game:GuessTheNumber-v0"

OWNER = textwrap.dedent("""
    import sys
    from gem_core.curriculum import shared_group_starts
    starts = shared_group_starts({"tasks": [%r, %r], "seed": 0, "state_dir": sys.argv[1]}, 2)
    print("owned", flush=True)
    sys.stdin.read()  # hold the folder until the test closes our stdin
""") % (EASY, MID)


def sampler() -> TaskSampler:
    return TaskSampler([EASY, MID], seed=0)


def test_a_state_dir_another_process_uses_is_refused_naming_the_folder_and_its_pid(tmp_path):
    owner = subprocess.Popen([sys.executable, "-c", OWNER, str(tmp_path)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert owner.stdout.readline().strip() == "owned"
        with pytest.raises(TaskError) as refused:
            GroupStarts(sampler(), 2, state_dir=tmp_path)
        message = str(refused.value)
        assert str(tmp_path) in message and f"pid {owner.pid}" in message
        assert "another process" in message and "give each run its own state_dir" in message
    finally:
        owner.stdin.close()
        assert owner.wait(timeout=60) == 0
    # The owner has exited: the folder is free again.
    GroupStarts(sampler(), 2, state_dir=tmp_path).close()


def test_a_killed_owner_frees_its_state_dir(tmp_path):
    owner = subprocess.Popen([sys.executable, "-c", OWNER, str(tmp_path)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert owner.stdout.readline().strip() == "owned"
    owner.kill()
    owner.wait(timeout=60)
    owner.stdin.close()
    GroupStarts(sampler(), 2, state_dir=tmp_path).close()


async def test_two_samplers_of_one_process_cannot_share_a_state_dir_until_the_first_closes(tmp_path):
    first = GroupStarts(sampler(), 2, state_dir=tmp_path)
    with pytest.raises(TaskError, match="give each run its own state_dir"):
        GroupStarts(sampler(), 2, state_dir=tmp_path)
    with pytest.raises(TaskError, match="give each run its own state_dir"):
        shared_group_starts({"tasks": [EASY, MID], "seed": 99, "state_dir": str(tmp_path)}, 2)
    first.close()
    first.close()  # closing twice is harmless
    with pytest.raises(TaskError, match="closed"):  # a closed GroupStarts no longer writes the folder it gave up
        await first.record((first.sampler.draw(1)[0], True, 1.0))
    with GroupStarts(sampler(), 2, state_dir=tmp_path) as second:
        start = await second.start("k")
        await second.record((start, True, 1.0))
        await second.record((start, True, 1.0))
        assert (tmp_path / SAMPLER_STATE_FILE).is_file()
    GroupStarts(sampler(), 2, state_dir=tmp_path).close()  # the with block released it


def test_a_state_dir_that_is_a_file_is_refused_at_construction_naming_it(tmp_path):
    afile = tmp_path / "afile"
    afile.write_text("x")
    with pytest.raises(TaskError, match=f"state_dir {afile} is a file, not a folder"):
        GroupStarts(sampler(), 2, state_dir=afile)
    with pytest.raises(TaskError, match="state_dir .* is a file, not a folder"):
        shared_group_starts({"tasks": [EASY, MID], "seed": 98, "state_dir": str(afile)}, 2)
    assert afile.read_text() == "x"


def test_a_missing_state_dir_is_created(tmp_path):
    GroupStarts(sampler(), 2, state_dir=tmp_path / "new" / "run").close()
    assert (tmp_path / "new" / "run").is_dir()
