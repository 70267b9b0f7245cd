"""TokenTrajectory and the trajectory loader refuse, when the trajectory is made, what used to crash or mislead later.

Text rewards built, then ``episode_return`` raised TypeError; float turn spans built, then every view raised
TypeError; an unknown ``history``, rendered fields that do not match it, and rendered context ends past
``rendered_ids`` or going back loaded, then ``as_transitions`` raised IndexError or cut a wrong context.
"""

from __future__ import annotations

import json

import pytest

from gem_core.errors import InvalidArgument, MalformedFile
from gem_core.rollout import TokenTrajectory
from gem_core.rollout.trajectory_io import TRAJECTORY_FORMAT, read_trajectories, trajectory_from_record


def trajectory(**overrides):
    fields = dict(
        prompt_ids=[1], response_ids=[5, 6, 7, 8], loss_mask=[1, 0, 1, 1], logprobs=[0.0] * 4, turn_spans=[(0, 1), (2, 4)],
        rewards=[0.5, 1.0], terminated=True, truncated=False,
    )
    return TokenTrajectory(**{**fields, **overrides})


def rendered(**overrides):
    return trajectory(**{"history": "as_rendered", "rendered_ids": [1, 2, 3, 4, 5], "rendered_context_ends": [1, 4],
                         "generation_prompt_ids": [9], **overrides})


@pytest.mark.parametrize("rewards, shown", [(["1.0", 2.0], "text"), ([1.0, 1 + 0j], "complex")])
def test_rewards_that_are_not_real_numbers_are_refused(rewards, shown):
    with pytest.raises(InvalidArgument, match=rf"^rewards must be finite numbers, got .*{shown}"):
        trajectory(rewards=rewards)


@pytest.mark.parametrize("rewards", [[True, 1.0], [1.0, False], (0.5, True)])
def test_bool_rewards_are_refused_as_the_loader_refuses_them(rewards):
    """A bool reward is written as JSON true, which read_trajectories refuses: the file could not be read back."""
    with pytest.raises(InvalidArgument, match=r"^rewards\[[01]\] is (True|False): rewards must be numbers, not bools"):
        trajectory(rewards=rewards)


def test_int_and_float_rewards_still_build():
    assert trajectory(rewards=[0, 2]).episode_return == 2.0
    assert trajectory(rewards=(0.5, 2.0)).episode_return == 2.5


@pytest.mark.parametrize("span", [(0.5, 1.5), (0, 1.0), (True, 1), ("0", "1")])
def test_turn_spans_that_are_not_int_indices_are_refused(span):
    with pytest.raises(InvalidArgument, match=r"^turn_spans\[0\] is .*: span bounds must be int token indices"):
        trajectory(turn_spans=[span, (2, 4)])


@pytest.mark.parametrize("history", ["bogus", "", None, ["as_sampled"]])
def test_an_unknown_history_is_refused(history):
    with pytest.raises(InvalidArgument, match=r"^history is .*: must be one of \('as_sampled', 'as_rendered'\)"):
        trajectory(history=history)


@pytest.mark.parametrize(
    "fields",
    [{"rendered_ids": [1, 2]}, {"rendered_context_ends": [0, 1]}, {"generation_prompt_ids": [9]}],
    ids=["rendered_ids", "rendered_context_ends", "generation_prompt_ids"],
)
def test_an_as_sampled_trajectory_with_rendered_fields_is_refused(fields):
    (name,) = fields
    with pytest.raises(InvalidArgument, match=rf"^{name} is set but history is 'as_sampled'"):
        trajectory(**fields)


@pytest.mark.parametrize(
    "overrides, message",
    [
        ({"rendered_ids": None}, r"needs rendered_ids"),
        ({"rendered_context_ends": [1]}, r"1 rendered context ends for 2 turns"),
        ({"rendered_context_ends": [1, 999]}, r"rendered_context_ends\[1\] is 999: need 0 <= end <= len\(rendered_ids\) \(5\)"),
        ({"rendered_context_ends": [-2, 4]}, r"rendered_context_ends\[0\] is -2: need 0 <= end"),
        ({"rendered_context_ends": [4, 1]}, r"rendered_context_ends\[1\] is 1: it goes back before rendered_context_ends\[0\] \(4\)"),
        ({"rendered_context_ends": [1, 2.5]}, r"rendered_context_ends\[1\] is 2.5: need an int"),
        ({"rendered_context_ends": [True, 2]}, r"rendered_context_ends\[0\] is True: need an int"),
    ],
)
def test_as_rendered_context_ends_must_be_one_per_turn_within_rendered_ids_in_order(overrides, message):
    with pytest.raises(InvalidArgument, match=message):
        rendered(**overrides)


def test_a_consistent_as_rendered_trajectory_gives_each_turns_rendered_context():
    contexts = [t.context_ids for t in rendered(rendered_context_ends=[1, 5]).as_transitions()]
    assert contexts == [[1, 9], [1, 2, 3, 4, 5, 9]]
    assert rendered(rendered_context_ends=[3, 3]).num_turns == 2  # an empty observation between turns: ends may repeat


def _record(**fields):
    return {"format": TRAJECTORY_FORMAT, "prompt_ids": [1], "response_ids": [5, 6], "loss_mask": [1, 1], "logprobs": [0.0, 0.0],
            "turn_spans": [[0, 2]], "rewards": [1.0], "terminated": True, "truncated": False, **fields}


@pytest.mark.parametrize(
    "fields",
    [
        {"history": "as_sampled", "rendered_ids": [1, 2]},
        {"history": "bogus"},
        {"history": "as_rendered", "rendered_ids": [1, 2], "rendered_context_ends": [999]},
        {"history": "as_rendered", "rendered_ids": [1, 2, 3], "rendered_context_ends": [-2]},
    ],
    ids=["as_sampled-with-rendered_ids", "bogus-history", "end-past-rendered_ids", "negative-end"],
)
def test_the_loader_refuses_records_whose_history_fields_do_not_agree(tmp_path, fields):
    with pytest.raises(InvalidArgument):
        trajectory_from_record(_record(**fields))
    path = tmp_path / "episodes.jsonl"
    path.write_text(json.dumps(_record(**fields)) + "\n")
    with pytest.raises(MalformedFile, match=rf"^{path}:1: (history|rendered)"):
        read_trajectories(path)


@pytest.mark.parametrize("span", [(0, 1, 2), 3, (1,)], ids=["three bounds", "a number", "one bound"])
def test_a_turn_span_that_is_not_a_pair_is_refused_naming_it(span):
    """A (start, end, extra) span raised a bare ValueError when unpacked; a number, a TypeError."""
    with pytest.raises(InvalidArgument, match=r"turn_spans\[0\] is .*a \(start, end\) pair"):
        TokenTrajectory(prompt_ids=[1], response_ids=[2, 3], loss_mask=[1, 1], logprobs=[0.0, 0.0], turn_spans=[span], rewards=[1.0], terminated=True, truncated=False)
