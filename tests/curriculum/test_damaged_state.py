"""A damaged gem_task_sampler.json is refused whole, with the file named and the fix, and never half-loaded."""

from __future__ import annotations

import copy
import json
import math
import os

import pytest

from gem_core.curriculum import SAMPLER_STATE_FILE, SamplerStateError, TaskError, TaskSampler, load_sampler_state, save_sampler_state

EASY, MID, HARD = "game:GuessTheNumber-v0-easy", "game:GuessTheNumber-v0", "game:GuessTheNumber-v0-hard"
AFRESH = "delete it to start the curriculum afresh"


def sampler(**kwargs) -> TaskSampler:
    return TaskSampler([EASY, MID, HARD], seed=0, **kwargs)


def played() -> TaskSampler:
    s = sampler()
    for i, start in enumerate(s.draw(30)):
        s.update(start, i % 3 == 0, 1.0)
    return s


def set_(path, value):
    """A function that sets the state's entry at ``path`` (keys) to ``value`` (``...``: delete it)."""
    def change(state):
        *parents, last = path
        for key in parents:
            state = state[key]
        if value is ...:
            del state[last]
        else:
            state[last] = value
    return change


def returns_(value):
    """A function that sets every return in the window of MID to ``value``."""
    def change(state):
        stats = state["tasks"][MID]["stats"]
        stats["recent_return"] = [value] * len(stats["recent_return"])
    return change


DAMAGE = [
    ("draws -5", set_(["draws"], -5), "draws"),
    ("draws 3.7", set_(["draws"], 3.7), "draws"),
    ("draws text", set_(["draws"], "abc"), "draws"),
    ("seed -3", set_(["seed"], -3), "seed"),
    ("no seed", set_(["seed"], ...), "seed"),
    ("no draws", set_(["draws"], ...), "draws"),
    ("no tasks", set_(["tasks"], ...), "tasks"),
    ("tasks a list", set_(["tasks"], []), "tasks"),
    ("unlocked 0", set_(["unlocked"], 0), "unlocked"),
    ("unlocked -1", set_(["unlocked"], -1), "unlocked"),
    ("unlocked 99", set_(["unlocked"], 99), "unlocked"),
    ("next_seed text", set_(["tasks", MID, "next_seed"], "x"), "next_seed"),
    ("next_seed null", set_(["tasks", MID, "next_seed"], None), "next_seed"),
    ("next_seed -1", set_(["tasks", MID, "next_seed"], -1), "next_seed"),
    ("no next_seed", set_(["tasks", MID, "next_seed"], ...), "next_seed"),
    ("task entry a list", set_(["tasks", MID], []), MID),
    ("stats a number", set_(["tasks", MID, "stats"], 5), "stats"),
    ("no stats", set_(["tasks", MID, "stats"], ...), "stats"),
    ("recent_success text", set_(["tasks", MID, "stats", "recent_success"], "1111"), "recent_success"),
    ("recent_success not 0/1", set_(["tasks", MID, "stats", "recent_success"], [5, -1, "no"]), "recent_success"),
    ("recent_return text", set_(["tasks", MID, "stats", "recent_return"], ["nan"]), "recent_return"),
    ("episodes -1", set_(["tasks", MID, "stats", "episodes"], -1), "episodes"),
    ("successes above episodes", set_(["tasks", MID, "stats", "successes"], 10**6), "successes"),
    ("return_sum text", set_(["tasks", MID, "stats", "return_sum"], "x"), "return_sum"),
    # numbers JSON holds but a float does not (an OverflowError), and NaN/Infinity (which json.loads takes)
    ("recent_return 10**400", returns_(10**400), "recent_return"),
    ("recent_return NaN", returns_(math.nan), "recent_return"),
    ("recent_return Infinity", returns_(-math.inf), "recent_return"),
    ("return_sum 10**400", set_(["tasks", MID, "stats", "return_sum"], 10**400), "return_sum"),
    ("return_sum NaN", set_(["tasks", MID, "stats", "return_sum"], math.nan), "return_sum"),
    ("return_sum Infinity", set_(["tasks", MID, "stats", "return_sum"], math.inf), "return_sum"),
    ("next_seed past the largest seed", set_(["tasks", MID, "next_seed"], 2**63 + 1), "next_seed"),
]


@pytest.mark.parametrize("change,what", [case[1:] for case in DAMAGE], ids=[case[0] for case in DAMAGE])
def test_a_damaged_state_is_refused_naming_the_file_and_the_entry_and_leaves_the_sampler_untouched(tmp_path, change, what):
    state = played().state_dict()
    # Damage a task late in the file, so that a load that assigns as it goes would be half done when it fails.
    state["tasks"] = dict(reversed(list(state["tasks"].items()))) if isinstance(state.get("tasks"), dict) else state["tasks"]
    damaged = copy.deepcopy(state)
    change(damaged)
    (tmp_path / SAMPLER_STATE_FILE).write_text(json.dumps(damaged))
    fresh = sampler(unlock_at=0.5)
    before = fresh.state_dict()
    with pytest.raises(TaskError) as refused:
        load_sampler_state(fresh, tmp_path)
    message = str(refused.value)
    assert str(tmp_path / SAMPLER_STATE_FILE) in message and what in message and AFRESH in message, message
    assert fresh.state_dict() == before


def test_load_state_dict_validates_everything_before_it_changes_anything():
    state = played().state_dict()
    state["tasks"][HARD]["stats"]["recent_success"] = "1111"  # the last task: the others would have been restored
    fresh = sampler()
    before = fresh.state_dict()
    with pytest.raises(TaskError, match="recent_success"):
        fresh.load_state_dict(state)
    assert fresh.state_dict() == before


def test_a_state_file_that_is_not_utf8_gets_the_start_afresh_message(tmp_path):
    (tmp_path / SAMPLER_STATE_FILE).write_bytes(b"\xff\xfe\x00garbage")
    with pytest.raises(ValueError, match=f"{tmp_path / SAMPLER_STATE_FILE} is not UTF-8 JSON .*; {AFRESH}"):
        load_sampler_state(sampler(), tmp_path)


def test_a_state_file_that_is_a_folder_is_refused_not_taken_for_no_state(tmp_path):
    (tmp_path / SAMPLER_STATE_FILE).mkdir()
    with pytest.raises(TaskError, match=f"{tmp_path / SAMPLER_STATE_FILE} is a folder, not the sampler's state file"):
        load_sampler_state(sampler(), tmp_path)


def test_a_good_state_still_loads_and_its_seed_replaces_the_constructors(tmp_path):
    original = played()
    save_sampler_state(original, tmp_path)
    resumed = TaskSampler([EASY, MID, HARD], seed=123)
    assert load_sampler_state(resumed, tmp_path) is True
    assert resumed.seed == 0 and resumed.state_dict() == original.state_dict() and resumed.draw(5) == original.draw(5)
    legacy = original.state_dict()
    del legacy["unlocked"]  # optional: every task unlocked
    fresh = sampler()
    fresh.load_state_dict(legacy)
    assert fresh.state_dict() == original.state_dict()


@pytest.mark.parametrize("text", ["[" * 100_000 + "]" * 100_000, '{"tasks": ' + "[" * 5000 + "]" * 5000 + "}", "{" + '"a":{' * 3000 + "}" * 3001])
def test_a_deeply_nested_state_file_is_a_damaged_state_not_a_recursion_error(tmp_path, text):
    (tmp_path / SAMPLER_STATE_FILE).write_text(text)
    s = sampler()
    before = s.state_dict()
    with pytest.raises(TaskError) as caught:
        load_sampler_state(s, tmp_path)
    assert str(tmp_path / SAMPLER_STATE_FILE) in str(caught.value) and AFRESH in str(caught.value)
    assert s.state_dict() == before


def test_a_number_too_long_for_python_is_a_damaged_state_naming_the_file(tmp_path):
    """json.loads refuses an int of over 4300 digits with a plain ValueError, which escaped as it was."""
    (tmp_path / SAMPLER_STATE_FILE).write_text('{"format": "gem_core.curriculum.TaskSampler/1", "seed": %s}' % ("1" * 5000))
    with pytest.raises(SamplerStateError) as refused:
        load_sampler_state(sampler(), tmp_path)
    assert str(tmp_path / SAMPLER_STATE_FILE) in str(refused.value) and AFRESH in str(refused.value)


@pytest.mark.parametrize("text", ["{}", "[]", "null", '{"format": "gem_core.curriculum.TaskSampler/0"}'])
def test_a_file_that_holds_no_sampler_state_is_a_damaged_state_naming_the_file(tmp_path, text):
    """It was a plain TaskError that named no file and said to pass what state_dict() returned."""
    (tmp_path / SAMPLER_STATE_FILE).write_text(text)
    with pytest.raises(SamplerStateError) as refused:
        load_sampler_state(sampler(), tmp_path)
    message = str(refused.value)
    assert str(tmp_path / SAMPLER_STATE_FILE) in message and AFRESH in message and "state_dict()" not in message, message


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs here")
def test_a_state_file_that_is_a_fifo_is_not_called_a_folder(tmp_path):
    os.mkfifo(tmp_path / SAMPLER_STATE_FILE)
    with pytest.raises(SamplerStateError, match="not a regular file") as refused:
        load_sampler_state(sampler(), tmp_path)
    assert "is a folder" not in str(refused.value)
