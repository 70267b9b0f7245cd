"""TokenTrajectory refuses a non-finite reward and turn spans outside response_ids, reversed, out of
order or overlapping (a later turn would silently get the wrong action_ids)."""

from __future__ import annotations

import pytest

from gem_core.rollout import TokenTrajectory


def trajectory(response_ids=(10, 11, 20, 12), turn_spans=((0, 2), (3, 4)), rewards=(0.5, 1.0)):
    n = len(response_ids)
    return TokenTrajectory(
        prompt_ids=[1], response_ids=list(response_ids), loss_mask=[1] * n, logprobs=[0.0] * n,
        turn_spans=list(turn_spans), rewards=list(rewards), terminated=True, truncated=False,
    )


@pytest.mark.parametrize("reward, shown", [(float("nan"), "nan"), (float("inf"), "inf"), (None, "None")])
def test_a_non_finite_reward_is_refused(reward, shown):
    with pytest.raises(ValueError, match=rf"^rewards\[1\] is {shown}: rewards must be finite numbers"):
        trajectory(rewards=[0.5, reward])


def test_spans_outside_response_ids_or_reversed_are_refused():
    with pytest.raises(ValueError, match=r"^turn_spans\[0\] is \(0, 10\): need 0 <= start <= end <= len\(response_ids\) \(2\)"):
        trajectory(response_ids=[2, 3], turn_spans=[(0, 10), (5, 1)])
    with pytest.raises(ValueError, match=r"^turn_spans\[1\] is \(2, 1\): need 0 <= start <= end"):
        trajectory(turn_spans=[(0, 1), (2, 1)])
    with pytest.raises(ValueError, match=r"^turn_spans\[0\] is \(-1, 1\)"):
        trajectory(turn_spans=[(-1, 1), (2, 3)])


def test_spans_out_of_order_or_overlapping_are_refused():
    with pytest.raises(ValueError, match=r"^turn_spans\[1\] is \(1, 3\): it starts before turn_spans\[0\] ends \(2\)"):
        trajectory(turn_spans=[(0, 2), (1, 3)])
    with pytest.raises(ValueError, match=r"^turn_spans\[1\] is \(0, 1\): it starts before turn_spans\[0\] ends \(3\)"):
        trajectory(turn_spans=[(2, 3), (0, 1)])


def test_legit_edge_cases_still_build():
    assert trajectory(response_ids=[], turn_spans=[], rewards=[]).num_turns == 0  # an episode cut before its first turn
    assert trajectory(turn_spans=[(0, 0), (0, 0)]).num_turns == 2  # empty turns, back to back
    assert trajectory(turn_spans=[(0, 2), (2, 4)]).as_transitions()[1].action_ids == [20, 12]  # adjacent, to the end
