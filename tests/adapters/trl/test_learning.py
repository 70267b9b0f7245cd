"""The README's main job learns: ``examples/train_trl.py`` with its embedded defaults, on 3 seeds.

Each run trains a tiny random-weight model with TRL's GRPOTrainer through GEM's rollout_func on CPU.
What the README states is what is asserted: every seed's mean return over its last 20% of steps beats
its first 20% by at least ``MIN_GAIN``, and the mean over the seeds of that last 20% beats a policy
of random well-formed moves (``env.sample_random_action()``) by at least ``MIN_MARGIN_OVER_RANDOM``.
Not every seed beats random moves on its own: seed 0 settles early on a fixed guessing order at about
0.50 (random: 0.57), which is why the margin is asserted on the mean (issue 22 tracks the recipe).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gem_core.testing import load_script

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "train_trl.py"
SEEDS = (0, 1, 2)
MIN_GAIN = 0.25
MIN_MARGIN_OVER_RANDOM = 0.05


def load_example():
    return load_script(EXAMPLE, "train_trl")


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    example = load_example()
    results = {}
    for seed in SEEDS:
        out = tmp_path_factory.mktemp(f"seed{seed}")
        metrics = example.main(example.Args(seed=seed, out=str(out)))
        print(json.dumps({"seed": seed, **{k: v for k, v in metrics.items() if not k.endswith("_per_step")}}))
        results[seed] = (metrics, out)
    return example, results


@pytest.mark.slow
@pytest.mark.parametrize("seed", SEEDS)
def test_each_seed_improves_on_its_start(runs, seed):
    example, results = runs
    metrics, out = results[seed]
    assert metrics["steps"] == example.Args.steps and not metrics["interrupted"]
    assert metrics["last_20pct_reward"] >= metrics["first_20pct_reward"] + MIN_GAIN
    assert (out / "reward_curve.png").stat().st_size > 10_000


@pytest.mark.slow
def test_the_seeds_together_beat_random_moves(runs):
    _, results = runs
    last = [metrics["last_20pct_reward"] for metrics, _ in results.values()]
    random_moves = {metrics["random_move_reward"] for metrics, _ in results.values()}
    assert len(random_moves) == 1
    assert sum(last) / len(last) >= random_moves.pop() + MIN_MARGIN_OVER_RANDOM, last
