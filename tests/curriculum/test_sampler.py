"""gem_core.curriculum.TaskSampler: seeded draws, per-task statistics, the floor, and state that restores."""

from __future__ import annotations

import json
import math
from collections import Counter

import numpy as np
import pytest

from gem_core.curriculum import Task, TaskError, TaskSampler, informative_group_probability
from gem_core.rows import EpisodeLabel

EASY, MID, HARD = "game:GuessTheNumber-v0-easy", "game:GuessTheNumber-v0", "game:GuessTheNumber-v0-hard"
#: Success probability of each task in the simulated runs below.
SKILL = {EASY: 0.95, MID: 0.5, HARD: 0.0}


def simulate(sampler: TaskSampler, rounds: int, rng_seed: int = 0, group: int = 4) -> list[EpisodeLabel]:
    """Draw one start per round, play ``group`` simulated episodes of it, update; returns the starts drawn."""
    rng = np.random.default_rng(rng_seed)
    drawn = []
    for _ in range(rounds):
        (start,) = sampler.draw(1)
        drawn.append(start)
        for _ in range(group):
            success = bool(rng.random() < SKILL[start.env_id])
            sampler.update(start, success, float(success))
    return drawn


def test_draws_and_statistics_are_the_same_for_the_same_seed_and_outcomes():
    a, b = TaskSampler([EASY, MID, HARD], seed=3), TaskSampler([EASY, MID, HARD], seed=3)
    assert simulate(a, 300) == simulate(b, 300)
    for task in a.tasks:
        assert a.stats(task).to_json() == b.stats(task).to_json()
    assert a.probabilities() == b.probabilities()
    other = TaskSampler([EASY, MID, HARD], seed=4)
    assert [s.env_id for s in simulate(other, 300)] != [s.env_id for s in simulate(TaskSampler([EASY, MID, HARD], seed=3), 300)]


def test_a_draw_does_not_depend_on_how_draws_are_batched():
    a, b = TaskSampler([EASY, MID, HARD], seed=1), TaskSampler([EASY, MID, HARD], seed=1)
    assert a.draw(12) == [start for _ in range(4) for start in b.draw(3)]


def test_statistics_count_a_window_of_recent_episodes_and_lifetime_totals():
    sampler = TaskSampler([EASY, MID], window=4, min_episodes=2)
    for success in [True, True, False, False, False, True]:
        sampler.update(EpisodeLabel(EASY, 0, {}), success, 2.0 if success else 0.0)
    stats = sampler.stats(EASY)
    assert list(stats.recent_success) == [False, False, False, True]
    assert stats.success_rate == 0.25 and stats.mean_return == 0.5
    assert (stats.episodes, stats.successes, stats.return_sum) == (6, 3, 6.0)
    assert stats.learning_progress == 0.5  # newer half 1/2, older half 0/2
    assert sampler.stats(MID).success_rate is None


def test_a_restored_sampler_makes_the_same_future_draws():
    original = TaskSampler([EASY, MID, HARD], seed=7, window=16)
    simulate(original, 120)
    state = json.loads(json.dumps(original.state_dict()))  # what a checkpoint file holds
    restored = TaskSampler([EASY, MID, HARD], seed=999, window=16)  # the saved seed wins
    restored.load_state_dict(state)
    assert restored.probabilities() == original.probabilities()
    assert simulate(restored, 200, rng_seed=5) == simulate(original, 200, rng_seed=5)
    assert restored.state_dict() == original.state_dict()


def test_band_weighting_favours_the_task_whose_groups_disagree_and_floors_the_others():
    sampler = TaskSampler([EASY, MID, HARD], floor=0.05, min_episodes=8, window=32)
    for env_id, rate in ((EASY, 1.0), (MID, 0.5), (HARD, 0.0)):
        for i in range(32):
            sampler.update(EpisodeLabel(env_id, i, {}), i < rate * 32)
    p = sampler.probabilities()
    assert p[EASY] == pytest.approx(0.05) and p[HARD] == pytest.approx(0.05)
    assert p[MID] == pytest.approx(0.9)
    assert sum(p.values()) == pytest.approx(1.0)


def test_a_task_not_yet_measured_is_drawn_as_the_most_promising():
    sampler = TaskSampler([EASY, MID], floor=0.0, min_episodes=4, window=8)
    for i in range(8):
        sampler.update(EpisodeLabel(EASY, i, {}), True)  # mastered
    assert sampler.probabilities() == {EASY: 0.0, MID: 1.0}


def test_no_task_falls_below_its_floor_over_many_draws():
    floor = 0.05
    sampler = TaskSampler([EASY, MID, HARD], floor=floor, window=32, min_episodes=4)
    n = 4000
    drawn = simulate(sampler, n, group=2)
    counts = Counter(start.env_id for start in drawn)
    for env_id in (EASY, MID, HARD):
        # Each draw gives the task at least `floor`: its count is at least a Binomial(n, floor) one.
        assert counts[env_id] >= n * floor - 4 * math.sqrt(n * floor * (1 - floor)), counts
    assert counts[MID] > counts[EASY] and counts[MID] > counts[HARD]  # the informative task gets the most


def test_the_probabilities_never_go_below_the_floor_whatever_the_statistics():
    rng = np.random.default_rng(0)
    for trial in range(200):
        floor = float(rng.uniform(0, 1 / 3))
        weighting = ("band", "progress")[trial % 2]
        sampler = TaskSampler([Task(EASY, weight=float(rng.uniform(0.1, 5))), MID, HARD], floor=floor, weighting=weighting,
                              window=8, min_episodes=2)
        for _ in range(int(rng.integers(0, 40))):
            sampler.update(EpisodeLabel(str(rng.choice([EASY, MID, HARD])), 0, {}), bool(rng.random() < 0.5))
        p = sampler.probabilities()
        assert min(p.values()) >= floor - 1e-12 and sum(p.values()) == pytest.approx(1.0)


def test_uniform_weighting_is_the_static_mixture_of_the_weights():
    sampler = TaskSampler({EASY: 3, HARD: 1}, weighting="uniform", seed=2)
    n = 8000
    counts = Counter(start.env_id for start in sampler.draw(n))
    assert abs(counts[EASY] - 0.75 * n) <= 4 * math.sqrt(n * 0.75 * 0.25)
    for _ in range(50):
        sampler.update(EpisodeLabel(EASY, 0, {}), True)
    assert sampler.probabilities() == {EASY: 0.75, HARD: 0.25}  # the statistics do not move it


def test_progress_weighting_favours_a_task_whose_success_is_changing():
    sampler = TaskSampler([EASY, MID], weighting="progress", floor=0.0, window=20, min_episodes=4)
    for i in range(20):
        sampler.update(EpisodeLabel(EASY, i, {}), i >= 10)  # 0/10 then 10/10: learning
        sampler.update(EpisodeLabel(MID, i, {}), i % 2 == 0)  # flat at 0.5
    p = sampler.probabilities()
    assert p[EASY] == pytest.approx(1.0) and p[MID] == pytest.approx(0.0)


def test_a_ladder_opens_a_rung_when_the_one_below_is_passed():
    sampler = TaskSampler([EASY, MID, HARD], unlock_at=0.8, floor=0.02, min_episodes=4, window=8)
    assert sampler.probabilities()[MID] == pytest.approx(0.02)
    for i in range(4):
        sampler.update(EpisodeLabel(EASY, i, {}), True)
    assert sampler.metrics()["gem/curriculum/unlocked"] == 2.0
    p = sampler.probabilities()
    assert p[MID] > 0.9 and p[HARD] == pytest.approx(0.02)
    for i in range(8):
        sampler.update(EpisodeLabel(EASY, i, {}), False)  # forgetting does not close an open rung
    assert sampler.metrics()["gem/curriculum/unlocked"] == 2.0


def test_each_task_counts_its_own_seeds_and_a_pinned_task_replays_its_episode():
    sampler = TaskSampler([Task(EASY), Task(HARD, seed=42)], weighting="uniform", seed_start=100)
    starts = sampler.draw(40)
    easy = [s.seed for s in starts if s.env_id == EASY]
    assert easy == list(range(100, 100 + len(easy)))
    assert {s.seed for s in starts if s.env_id == HARD} == {42}
    sampler.update(EpisodeLabel(HARD, 42, {}), True)
    assert sampler.stats(f"{HARD}#42").episodes == 1


def test_tasks_with_kwargs_are_told_apart_by_name_and_carry_their_kwargs_in_each_start():
    small, big = Task(MID, {"max_number": 4}), Task(MID, {"max_number": 8})
    sampler = TaskSampler([small, big], weighting="uniform")
    assert [t.name for t in sampler.tasks] == [f"{MID}[max_number=4]", f"{MID}[max_number=8]"]
    for start in sampler.draw(10):
        assert start.env_kwargs in ({"max_number": 4}, {"max_number": 8})
        assert sampler.task_of(start).env_kwargs == start.env_kwargs


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        (dict(tasks=[EASY, MID], floor=0.6), "floor 0.6 is no probability every one of the 2 tasks can get"),
        (dict(tasks=[EASY, MID], weighting="greedy"), "weighting must be one of"),
        (dict(tasks=[EASY, EASY]), "given more than once"),
        (dict(tasks=[]), "at least one task"),
        (dict(tasks=[EASY], window=8, min_episodes=9), "must not exceed window"),
        (dict(tasks=[EASY], group_size=1), "group_size must be an integer of at least 2"),
        (dict(tasks=[EASY], unlock_at=0), "unlock_at must be a success rate"),
        (dict(tasks={EASY: -1}), f"weight of '{EASY}' is -1"),
    ],
)
def test_a_bad_configuration_fails_at_construction_with_the_fix(kwargs, message):
    with pytest.raises(ValueError, match=message):
        TaskSampler(**kwargs)


def test_a_state_saved_with_other_tasks_or_not_a_state_is_refused():
    state = TaskSampler([EASY, MID]).state_dict()
    with pytest.raises(TaskError, match=r"not saved: \['game:GuessTheNumber-v0-hard'\]"):
        TaskSampler([EASY, MID, HARD]).load_state_dict(state)
    with pytest.raises(TaskError, match="Not a TaskSampler state"):
        TaskSampler([EASY]).load_state_dict({"draws": 3})


def test_an_episode_of_another_task_is_refused_by_update():
    with pytest.raises(TaskError, match="none of this sampler's tasks"):
        TaskSampler([EASY]).update(EpisodeLabel(HARD, 0, {}), True)


def test_the_informative_group_probability_is_zero_at_the_ends_and_highest_at_one_half():
    assert informative_group_probability(0.0, 2) == informative_group_probability(1.0, 8) == 0.0
    assert informative_group_probability(0.5, 2) == 0.5
    grid = [informative_group_probability(p, 4) for p in np.linspace(0, 1, 101)]
    assert int(np.argmax(grid)) == 50


def test_an_unknown_task_is_the_curriculums_mistake_not_a_datasets():
    from gem_core.curriculum import TaskError, sampler_from_spec

    with pytest.raises(TaskError, match=r"No env registered as 'game:Wordel-v0'.*Did you mean 'game:Wordle-v0'.*curriculum's tasks") as caught:
        sampler_from_spec({"tasks": ["game:GuessTheNumber-v0", "game:Wordel-v0"]})
    assert "dataset" not in str(caught.value)


def test_a_curriculum_that_is_not_json_is_a_task_error_wherever_it_is_read():
    """OpenRLHF and RL2 hand shared_group_starts the text of their curriculum option; oat reads it with sampler_spec."""
    from gem_core.curriculum import TaskError, sampler_spec, shared_group_starts

    for read in (shared_group_starts, sampler_spec):
        args = ("{bad", 4) if read is shared_group_starts else ("{bad",)
        with pytest.raises(TaskError, match=r"The task sampler spec '\{bad' is not JSON"):
            read(*args)
    assert sampler_spec('{"tasks": ["game:GuessTheNumber-v0"]}') == {"tasks": ["game:GuessTheNumber-v0"]}


# -- an episode start names its task exactly ------------------------------------------------------------
def test_a_task_with_its_own_name_is_updated_with_the_starts_it_hands_out():
    """task_of rebuilt the default name from the start's env id and kwargs, so a named task refused its own starts."""
    from gem_core.curriculum import sampler_from_spec

    sampler = TaskSampler([Task(MID, name="easy"), Task(MID, {"max_number": 4}, seed=3, name="row3")], weighting="uniform")
    for start in sampler.draw(10):
        sampler.update(start, True, 1.0)
    assert sampler.stats("easy").episodes + sampler.stats("row3").episodes == 10
    assert sampler.task_of(EpisodeLabel(MID, 3, {"max_number": 4})).name == "row3"
    spec = sampler_from_spec({"tasks": [{"env_id": MID, "name": "guess"}]})
    spec.update(spec.draw(1)[0], False)
    assert spec.stats("guess").episodes == 1


@pytest.mark.parametrize("tasks", [
    [Task(MID, name="a"), Task(MID, name="b")],                          # two names for one env: whose is a start?
    [Task(MID), Task(MID, seed=2)],                                     # the unpinned task draws seed 2 too
    [Task(MID, seed=2, name="x"), Task(MID, seed=2, name="y")],         # one episode under two names
])
def test_tasks_whose_episode_starts_could_not_be_told_apart_are_refused(tasks):
    """Outcomes went to the wrong task (or to none): an unpinned draw that got a pinned task's seed was credited to it."""
    with pytest.raises(TaskError, match="could not be told apart"):
        TaskSampler(tasks)


def test_a_ladder_state_is_refused_by_a_sampler_without_a_ladder():
    """Its 'unlocked' was taken, and with no unlock_at nothing ever unlocked the later tasks again: starved forever."""
    ladder = TaskSampler([EASY, MID, HARD], unlock_at=0.5)
    flat = TaskSampler([EASY, MID, HARD])
    before = flat.state_dict()
    with pytest.raises(TaskError, match="unlock_at"):
        flat.load_state_dict(ladder.state_dict())
    assert flat.state_dict() == before
    TaskSampler([EASY, MID, HARD], unlock_at=0.5).load_state_dict(flat.state_dict())  # all unlocked: a ladder may be there too
