"""Field bugs of image observations: trajectory records, EpisodeSession's images, ChartQA's arguments (each test
says what went wrong before its fix)."""

from __future__ import annotations

import asyncio

import pytest

from gem_core.env import Env
from gem_core.errors import InvalidArgument, MalformedFile
from gem_core.rollout import EpisodeSession, run_episode
from gem_core.rollout.trajectory import TokenTrajectory
from gem_core.rollout.trajectory_io import trajectory_from_record, trajectory_to_record
from gem_core.testing import ScriptedPolicy, make_tokenizer, make_vision_processor

Image = pytest.importorskip("PIL.Image")


def _record_with(image: dict) -> dict:
    t = TokenTrajectory(prompt_ids=[1, 2, 3], response_ids=[4, 5], loss_mask=[1, 1], logprobs=[0.0, 0.0], rewards=[1.0],
                        turn_spans=[(0, 2)], terminated=True, truncated=False)
    record = trajectory_to_record(t)
    record["images"] = [image]
    return record


GOOD = {"turn": 0, "start": 1, "num_tokens": 2, "grid_thw": [1, 2, 4]}


@pytest.mark.parametrize(
    "change",
    [{"start": 10_000}, {"start": -1}, {"num_tokens": -7}, {"grid_thw": [1, 2]}, {"grid_thw": ["a", "b", "c"]},
     {"turn": "zero"}, {"turn": -3}, {"start": 4, "num_tokens": 2}, {"start": True}],
    ids=lambda change: "-".join(f"{k}={v}" for k, v in change.items()),
)
def test_a_record_with_an_impossible_image_entry_is_refused(change):
    """Before: image entries with a start past the tokens, negative counts, a 2-item grid_thw or a text turn loaded
    silently, misaligning pixels and placeholders later."""
    trajectory_from_record(_record_with(GOOD))  # the good one loads
    with pytest.raises(MalformedFile, match="images"):
        trajectory_from_record(_record_with({**GOOD, **change}))


class _Shows(Env):
    def __init__(self, images, *, later: bool = False):
        self.images, self.later, self.t = images, later, 0

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return "look", {} if self.later else {"images": self.images}

    def step(self, action):
        self.t += 1
        if self.later and self.t == 1:
            return "here", 0.0, False, False, {"images": self.images}
        return "bye", 1.0, True, False, {}


@pytest.mark.parametrize("name", ["not-a-list", "none-in-list", "banner"])
def test_bad_reset_images_are_an_invalid_argument_naming_info_images(name):
    """Before: a PIL image not in a list, a None in the list, or a 6000x28 banner came out of EpisodeSession.start as
    the image processor's raw TypeError/ValueError, naming neither info["images"] nor the image."""
    images = {"not-a-list": Image.new("RGB", (56, 56)), "none-in-list": [None], "banner": [Image.new("RGB", (6000, 28))]}[name]
    with pytest.raises(InvalidArgument, match=r"info\['images'\]"):
        asyncio.run(asyncio.wait_for(EpisodeSession(_Shows(images), make_vision_processor()).start(0), 20))


@pytest.mark.parametrize("config", ["tokenizer", "as_rendered"])
def test_an_image_config_error_after_a_step_is_raised_not_swallowed(config):
    """Before: a tokenizer where the processor goes, or history='as_rendered', with images first shown after a step,
    was swallowed as an env error: every episode ended truncated with reward 0."""
    processor = make_vision_processor()
    tokenizer = make_tokenizer("chatml") if config == "tokenizer" else processor
    kwargs = {"history": "as_rendered"} if config == "as_rendered" else {}
    policy = ScriptedPolicy(tokenizer if config == "tokenizer" else processor.tokenizer, ["a", "b"])
    env = _Shows([Image.new("RGB", (56, 56))], later=True)
    with pytest.raises(InvalidArgument, match="processor|as_rendered"):
        asyncio.run(asyncio.wait_for(run_episode(env, policy, tokenizer, seed=0, **kwargs), 20))


def test_bad_step_images_still_end_the_episode_as_an_env_error():
    """A bad image from a step is the env's fault: the episode ends truncated with the error, as before."""
    processor = make_vision_processor()
    env = _Shows([None], later=True)
    t = asyncio.run(asyncio.wait_for(run_episode(env, ScriptedPolicy(processor.tokenizer, ["a", "b"]), processor, seed=0), 20))
    assert t.truncated and "info['images']" in t.infos[-1]["error"]


@pytest.mark.parametrize("value", ["2", None, 1.5, True, 0])
def test_chart_qa_refuses_a_max_turns_that_is_not_a_count(value):
    """Before: "2" and None raised a raw TypeError from the comparison; 1.5 and True were accepted and played."""
    from gem_core.envs.vision.chart_qa import ChartQA

    with pytest.raises(InvalidArgument, match="max_turns"):
        ChartQA(max_turns=value)
