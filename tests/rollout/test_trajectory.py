"""TokenTrajectory on a hand-built episode: token rewards and the two training views."""

from __future__ import annotations

import pytest

from gem_core.rollout import TokenTrajectory


def two_turn_trajectory(**overrides):
    # prompt [1, 2]; turn 0 samples [10, 11] then env [20, 21, 22]; turn 1 samples [12] then close [99]
    fields = dict(
        prompt_ids=[1, 2],
        response_ids=[10, 11, 20, 21, 22, 12, 99],
        loss_mask=[1, 1, 0, 0, 0, 1, 0],
        logprobs=[-0.1, -0.2, 0.0, 0.0, 0.0, -0.3, 0.0],
        turn_spans=[(0, 2), (5, 6)],
        rewards=[0.5, 2.0],
        terminated=True,
        truncated=False,
    )
    fields.update(overrides)
    return TokenTrajectory(**fields)


def test_token_rewards_sit_on_each_turns_last_sampled_token():
    traj = two_turn_trajectory()
    assert traj.token_rewards == [0.0, 0.5, 0.0, 0.0, 0.0, 2.0, 0.0]
    assert traj.episode_return == 2.5 and traj.num_turns == 2


def test_as_sequence_is_the_whole_episode():
    seq = two_turn_trajectory().as_sequence()
    assert seq.prompt_ids == [1, 2] and seq.response_ids == [10, 11, 20, 21, 22, 12, 99]
    assert seq.loss_mask == [1, 1, 0, 0, 0, 1, 0] and seq.reward == 2.5
    assert seq.token_rewards == [0.0, 0.5, 0.0, 0.0, 0.0, 2.0, 0.0]


def test_as_transitions_hold_context_action_and_discounted_return():
    first, second = two_turn_trajectory().as_transitions(gamma=0.5)
    assert first.context_ids == [1, 2] and first.action_ids == [10, 11] and first.action_logprobs == [-0.1, -0.2]
    assert second.context_ids == [1, 2, 10, 11, 20, 21, 22] and second.action_ids == [12]
    # G_1 = 2.0; G_0 = 0.5 + 0.5 * 2.0 = 1.5
    assert (first.return_, second.return_) == (1.5, 2.0)
    assert (first.reward, second.reward) == (0.5, 2.0)
    assert (first.done, second.done) == (False, True) and (first.turn, second.turn) == (0, 1)


def test_last_transition_is_not_done_while_the_episode_runs():
    transitions = two_turn_trajectory(terminated=False).as_transitions()
    assert [t.done for t in transitions] == [False, False]


def test_empty_turn_reward_goes_to_the_last_sampled_token_before_it():
    # Not on the env token before its span (loss_mask 0): token-level estimators (verl's GAE, REINFORCE++) skip those.
    traj = two_turn_trajectory(turn_spans=[(0, 2), (5, 5)])
    assert traj.token_rewards == [0.0, 2.5, 0.0, 0.0, 0.0, 0.0, 0.0]


def test_empty_turns_before_any_sampled_token_go_with_the_first_sampled_turn():
    traj = two_turn_trajectory(turn_spans=[(0, 0), (5, 6)])
    assert traj.token_rewards == [0.0, 0.0, 0.0, 0.0, 0.0, 2.5, 0.0]


def test_an_episode_that_sampled_no_token_keeps_its_return_on_the_last_token():
    traj = two_turn_trajectory(turn_spans=[(0, 0), (5, 5)])
    assert traj.token_rewards == [0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 2.5]


def test_misaligned_fields_are_rejected():
    with pytest.raises(ValueError, match="same length"):
        two_turn_trajectory(logprobs=[0.0])
    with pytest.raises(ValueError, match="one per turn"):
        two_turn_trajectory(rewards=[1.0])


@pytest.mark.parametrize(
    "rewards, ok",
    [
        ([0.5, 2.0], True),
        ([1e308, 1e308], True),  # finite rewards whose sum overflows: the quick check defers, the full one passes
        ([0.5, float("inf")], False),
        ([float("inf"), float("-inf")], False),  # their sum is NaN
        ([0.5, float("nan")], False),
        ([0.5, 2], True),  # an int: not the float-only quick path, still finite
    ],
)
def test_rewards_are_checked_finite_by_the_quick_path_and_the_full_one(rewards, ok):
    if ok:
        assert two_turn_trajectory(rewards=rewards).rewards == rewards
    else:
        with pytest.raises(ValueError, match=r"rewards\[1\]|rewards\[0\]"):
            two_turn_trajectory(rewards=rewards)


def test_the_unchecked_constructor_makes_the_same_trajectory_and_the_suite_checks_each_one():
    """A session builds its trajectories without the construction checks (issue 46); the object must equal the checked
    constructor's, and the suite's fixture (tests/conftest.py) still runs the checks on each one it builds."""
    import dataclasses

    checked = two_turn_trajectory(env_id="e", seed=3)
    fields = {f.name: getattr(checked, f.name) for f in dataclasses.fields(checked)}
    handed = dict(fields)
    unchecked = TokenTrajectory._from_checked_parts(handed)
    assert unchecked == checked
    assert vars(unchecked) is handed, "the dict handed over is the trajectory's __dict__, not copied into it"
    with pytest.raises(ValueError, match="same length"):
        TokenTrajectory._from_checked_parts({**fields, "logprobs": [0.0]})
    with pytest.raises(AssertionError, match="every field"):
        TokenTrajectory._from_checked_parts({"prompt_ids": [1]})
