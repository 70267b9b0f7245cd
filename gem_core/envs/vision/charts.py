"""The shipped bar charts: drawn here, deterministically, from a seed (no fonts, so every Pillow draws the same pixels).

A chart has 3 to 5 bars of distinct colours on a white canvas, light grey gridlines one unit apart
and a black baseline; a bar of value ``v`` is ``v`` units tall. Every chart comes with one question
whose answer is an integer read off the picture: one bar's value, the sum of all bars, or the
difference between the tallest and the shortest bar. ``python -m gem_core.envs.vision.charts DIR``
writes the set that ships in ``data/`` (``questions.json`` plus one PNG per chart).
"""

from __future__ import annotations

import argparse
import json
import os
from dataclasses import asdict, dataclass
from typing import Any

__all__ = ["ChartItem", "WIDTH", "HEIGHT", "UNIT", "BASELINE", "COLORS", "make_items", "draw_chart", "write_charts"]

WIDTH = 112
"""Chart image width in pixels."""
HEIGHT = 84
"""Chart image height in pixels."""
UNIT = 7
"""Pixels per unit of value."""
BASELINE = 76
"""Row of the black baseline; bars stand on the row above it."""
BAR_WIDTH, BAR_GAP, LEFT = 12, 8, 8
COLORS = ((214, 39, 40), (31, 119, 180), (44, 160, 44), (255, 127, 14), (148, 103, 189))
"""RGB colours of the bars, in order; a question names a bar by its colour."""
GRID = (225, 225, 225)
ORDINALS = ("first", "second", "third", "fourth", "fifth")


@dataclass(frozen=True)
class ChartItem:
    """One chart and its question."""

    image: str
    """File name of the PNG in the data folder."""
    values: tuple[int, ...]
    question: str
    answer: int


def draw_chart(values: tuple[int, ...]) -> Any:
    """The chart of ``values`` (1-9 each, 3-5 bars) as a PIL RGB image."""
    from PIL import Image, ImageDraw

    image = Image.new("RGB", (WIDTH, HEIGHT), (255, 255, 255))
    draw = ImageDraw.Draw(image)
    for unit in range(1, 10):
        y = BASELINE - unit * UNIT
        draw.line([(0, y), (WIDTH - 1, y)], fill=GRID)
    for i, value in enumerate(values):
        x = LEFT + i * (BAR_WIDTH + BAR_GAP)
        draw.rectangle([x, BASELINE - value * UNIT, x + BAR_WIDTH - 1, BASELINE - 1], fill=COLORS[i])
    draw.line([(0, BASELINE), (WIDTH - 1, BASELINE)], fill=(0, 0, 0))
    return image


def _question(values: tuple[int, ...], kind: int, bar: int) -> tuple[str, int]:
    intro = f"The bar chart shows {len(values)} bars; gridlines are one unit apart. "
    if kind == 0:
        return intro + f"What is the value of the {ORDINALS[bar]} bar from the left?", values[bar]
    if kind == 1:
        return intro + "What is the sum of the values of all bars?", sum(values)
    return intro + "By how much does the tallest bar exceed the shortest one?", max(values) - min(values)


def make_items(count: int = 32, seed: int = 2024) -> list[ChartItem]:
    """``count`` charts with questions, the same for the same ``seed`` (numpy's PCG64)."""
    import numpy as np

    rng = np.random.default_rng(seed)
    items = []
    for index in range(count):
        n = int(rng.integers(3, 6))
        values = tuple(int(v) for v in rng.integers(1, 10, size=n))
        question, answer = _question(values, index % 3, int(rng.integers(n)))
        items.append(ChartItem(f"chart_{index:02d}.png", values, question, answer))
    return items


def write_charts(directory: str, count: int = 32, seed: int = 2024) -> list[ChartItem]:
    """Write ``questions.json`` and the PNGs of :func:`make_items` into ``directory``."""
    os.makedirs(directory, exist_ok=True)
    items = make_items(count, seed)
    for item in items:
        # A palette PNG: the charts have eight colours, so each file is a few hundred bytes.
        draw_chart(item.values).quantize(colors=16, dither=0).save(os.path.join(directory, item.image), optimize=True)
    with open(os.path.join(directory, "questions.json"), "w", encoding="utf-8") as f:
        json.dump([asdict(item) for item in items], f, indent=1)
        f.write("\n")
    return items


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m gem_core.envs.vision.charts", description=__doc__.split("\n\n")[0])
    parser.add_argument("directory", help="where to write questions.json and the PNGs")
    parser.add_argument("--count", type=int, default=32)
    parser.add_argument("--seed", type=int, default=2024)
    args = parser.parse_args(argv)
    items = write_charts(args.directory, args.count, args.seed)
    print(f"wrote {len(items)} charts to {args.directory}")


if __name__ == "__main__":
    main()
