"""``gem.utils.debug``: GEM's episode printers, including the ones for a subset of a vector env's envs
(dict-of-actions steps) and for async envs."""

from __future__ import annotations

import asyncio

import numpy as np
import pytest

import gem


def test_selective_step_printer_steps_a_random_subset(capsys: pytest.CaptureFixture[str]) -> None:
    from gem.utils.debug import run_and_print_episode_with_selective_step

    np.random.seed(0)
    envs = gem.make_vec(["game:GuessTheNumber-v0-easy"] * 3, max_turns=3)
    run_and_print_episode_with_selective_step(envs, lambda _: ["\\boxed{5}"] * 3, ignore_done=True, max_steps=2)
    out = capsys.readouterr().out
    assert out.count("Step ") == 2 and "next_observation" in out


def test_async_printer_awaits_reset_and_step(capsys: pytest.CaptureFixture[str]) -> None:
    from gem.utils.debug import ppprint, run_and_print_episode_async

    class Countdown:
        async def reset(self):
            self.left = 2
            return "start", {}

        async def step(self, action):
            self.left -= 1
            return f"left {self.left}", 0.0, self.left == 0, False, {}

    asyncio.run(run_and_print_episode_async(Countdown(), lambda _: "go"))
    out = capsys.readouterr().out
    assert "left 1" in out and out.count("Step ") == 2
    ppprint(["a", "b"])
    assert "----- 2/2:" in capsys.readouterr().out
