"""ChartQA on the shipped charts: the picture holds the answer, a pixel-reading solver wins, the data is reproducible.

The contract tests (gymnasium checker, determinism, hostile actions, state) cover ``vision:ChartQA-v0``
through ``list_envs()``; these check the env itself.
"""

from __future__ import annotations

import asyncio
import re

import pytest

pytest.importorskip("PIL")

import gem_core
from gem_core.envs.vision.chart_qa import DATA_DIR, load_image, load_items
from gem_core.envs.vision.charts import BASELINE, UNIT, draw_chart, make_items

ORDINALS = ("first", "second", "third", "fourth", "fifth")


def read_bars(image) -> list[int]:
    """The bar values a viewer reads off the picture: runs of coloured columns above the baseline,
    each bar's height in gridline units (grey gridlines and the black baseline are not coloured)."""
    rgb = image.convert("RGB")
    width = rgb.width

    def coloured(x: int, y: int) -> bool:
        r, g, b = rgb.getpixel((x, y))
        return max(r, g, b) - min(r, g, b) > 60

    runs, x = [], 0
    while x < width:
        if coloured(x, BASELINE - 1):
            start = x
            while x < width and coloured(x, BASELINE - 1):
                x += 1
            runs.append((start + x - 1) // 2)
        x += 1
    heights = []
    for centre in runs:
        y = BASELINE - 1
        while y >= 0 and coloured(centre, y):
            y -= 1
        heights.append((BASELINE - 1 - y) // UNIT)
    return heights


def answer_from_picture(observation: str, image) -> int:
    values = read_bars(image)
    if "sum" in observation:
        return sum(values)
    if "exceed" in observation:
        return max(values) - min(values)
    ordinal = re.search(r"value of the (\w+) bar", observation).group(1)
    return values[ORDINALS.index(ordinal)]


def test_a_solver_that_reads_the_pixels_wins_seeds_0_to_19():
    env = gem_core.make("vision:ChartQA-v0")
    for seed in range(20):
        observation, info = env.reset(seed=seed)
        (image,) = info["images"]
        _, reward, terminated, truncated, step_info = env.step(f"\\boxed{{{answer_from_picture(observation, image)}}}")
        assert (reward, terminated, truncated, step_info["success"]) == (1.0, True, False, True), seed


def test_every_shipped_chart_shows_its_values_and_the_answer_follows_from_them():
    for item in load_items():
        assert tuple(read_bars(load_image(item))) == item.values, item.image


def test_the_shipped_set_is_what_the_generator_draws():
    """The PNGs and questions in data/ are reproducible from the generator (same pixels, same questions)."""
    generated = make_items()
    assert [(i.image, i.values, i.question, i.answer) for i in generated] == [
        (i.image, i.values, i.question, i.answer) for i in load_items()
    ]
    for item in generated[:8]:
        assert draw_chart(item.values).tobytes() == load_image(item).tobytes(), item.image


def test_the_shipped_images_are_small():
    import os

    total = sum(os.path.getsize(os.path.join(DATA_DIR, name)) for name in os.listdir(DATA_DIR))
    assert total < 40_000


def test_a_wrong_answer_leaves_an_attempt_then_the_episode_ends():
    env = gem_core.make("vision:ChartQA-v0")
    observation, info = env.reset(seed=3)
    right = answer_from_picture(observation, info["images"][0])
    obs, reward, terminated, truncated, _ = env.step(f"\\boxed{{{right + 1}}}")
    assert (reward, terminated, truncated) == (0.0, False, False) and "Attempts left: 1" in obs
    obs, reward, terminated, truncated, info = env.step("no box")
    assert reward < 0 and truncated and info["format_error"] and f"answer was {right}" in obs


@pytest.mark.parametrize("action", ["\\boxed{1e9999}", "\\boxed{" + "9" * 5000 + "}", "\\boxed{<|image_pad|>}", "\\boxed{}", "\x00" * 10_000])
def test_hostile_answers_are_format_errors(action):
    env = gem_core.make("vision:ChartQA-v0", max_turns=1)
    env.reset(seed=0)
    _, reward, terminated, truncated, info = env.step(action)
    assert reward == env.unwrapped.format_penalty and truncated and info["format_error"]


def test_one_episode_through_run_episode_with_a_scripted_policy(tiny_tokenizer):
    """A text-only policy plays (blind); the trajectory still records the chart in the prompt."""
    from gem_core.rollout import run_episode
    from gem_core.testing import ScriptedPolicy, make_vision_processor

    processor = make_vision_processor()
    env = gem_core.make("vision:ChartQA-v0")
    observation, info = env.reset(seed=7)
    answer = answer_from_picture(observation, info["images"][0])
    policy = ScriptedPolicy(processor.tokenizer, ["\\boxed{0}" if answer else "\\boxed{1}", f"\\boxed{{{answer}}}"])
    trajectory = asyncio.run(run_episode(env, policy, processor, seed=7, env_id="vision:ChartQA-v0"))
    assert trajectory.rewards == [0.0, 1.0] and trajectory.metrics["success"]
    (image,) = trajectory.images
    assert image.turn == 0 and image.start < len(trajectory.prompt_ids)
