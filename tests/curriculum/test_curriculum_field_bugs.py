"""Field bugs of the curriculum: a ladder's state restored into another task order, and spec text JSON refuses
with errors other than a JSONDecodeError."""

from __future__ import annotations

import pytest

from gem_core.curriculum import SamplerStateError, TaskError, TaskSampler, sampler_from_spec, shared_group_starts
from gem_core.curriculum.shared import sampler_spec
from gem_core.rows.label import EpisodeLabel

EASY, MID, HARD = "game:GuessTheNumber-v0-easy", "game:GuessTheNumber-v0", "game:GuessTheNumber-v0-hard"


def ladder(order: list[str]) -> TaskSampler:
    return TaskSampler(order, unlock_at=0.9, min_episodes=2, floor=0.05, seed=0)


def passed_first_rung() -> TaskSampler:
    """A ladder [EASY, MID, HARD] whose easy rung is passed: EASY and MID open, HARD at the floor."""
    s = ladder([EASY, MID, HARD])
    for i in range(4):
        s.update(EpisodeLabel(EASY, i, {}), True)
    assert s.state_dict()["unlocked"] == 2
    return s


def test_a_ladder_state_restored_into_the_tasks_in_another_order_is_refused_naming_both_orders():
    """'unlocked' was applied by position: in the reversed order the hardest rung opened and the easiest was held
    at the floor, silently (load_state_dict compared only the set of task names)."""
    state = passed_first_rung().state_dict()
    restored = ladder([HARD, MID, EASY])
    before = restored.state_dict()
    with pytest.raises(TaskError) as refused:
        restored.load_state_dict(state)
    message = str(refused.value)
    assert f"[{EASY!r}, {MID!r}, {HARD!r}]" in message and f"[{HARD!r}, {MID!r}, {EASY!r}]" in message, message
    assert restored.state_dict() == before


def test_an_older_ladder_state_with_only_the_count_is_refused_in_another_order_and_loads_in_its_own():
    """A state saved before the unlocked task names were kept had only 'unlocked'; it too was applied by position."""
    original = passed_first_rung()
    legacy = original.state_dict()
    legacy.pop("unlocked_tasks", None)
    with pytest.raises(TaskError, match="order"):
        ladder([HARD, MID, EASY]).load_state_dict(legacy)
    same = ladder([EASY, MID, HARD])
    same.load_state_dict(legacy)
    assert same.probabilities() == original.probabilities()


def test_a_ladder_state_keeps_its_unlocked_rungs_by_name_when_they_still_come_first():
    """Guard for the fix: an order whose first rungs are the saved unlocked ones (in any order) restores them."""
    original = passed_first_rung()
    restored = ladder([MID, EASY, HARD])
    restored.load_state_dict(original.state_dict())
    assert restored.probabilities() == original.probabilities()
    assert restored.probabilities()[HARD] == pytest.approx(0.05)


@pytest.mark.parametrize("unlocked_tasks", [[EASY], [EASY, "nope"], [EASY, EASY], "EASY", [EASY, 3]])
def test_damaged_unlocked_task_names_are_a_damaged_state(unlocked_tasks):
    """Before the fix the entry was not there to check: a state naming the wrong rungs loaded as if they were open."""
    state = passed_first_rung().state_dict()
    state["unlocked_tasks"] = unlocked_tasks
    fresh = ladder([EASY, MID, HARD])
    before = fresh.state_dict()
    with pytest.raises(SamplerStateError, match="unlocked_tasks"):
        fresh.load_state_dict(state)
    assert fresh.state_dict() == before


BAD_TEXT = [
    ("huge int", '{"tasks": ["game:GuessTheNumber-v0"], "seed": ' + "9" * 5000 + "}"),
    ("deep nesting", "[" * 200_000 + "]" * 200_000),
    ("deep nesting in tasks", '{"tasks": ' + "[" * 5000 + "]" * 5000 + "}"),
]


@pytest.mark.parametrize("text", [case[1] for case in BAD_TEXT], ids=[case[0] for case in BAD_TEXT])
@pytest.mark.parametrize("read", [sampler_spec, sampler_from_spec, lambda text: shared_group_starts(text, 2)],
                         ids=["sampler_spec", "sampler_from_spec", "shared_group_starts"])
def test_spec_text_json_refuses_is_a_task_error(read, text):
    """An int past Python's 4300-digit limit escaped as a bare ValueError and deep nesting as a RecursionError,
    though these functions promise a TaskError for spec text that is not JSON."""
    with pytest.raises(TaskError, match="spec"):
        read(text)
