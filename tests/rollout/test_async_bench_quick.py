"""bench/async_rollouts.py on a tiny workload: its rows count what they claim (no timing asserted)."""

from __future__ import annotations

import argparse
from pathlib import Path

from gem_core.testing import load_script

BENCH = load_script(Path(__file__).resolve().parents[2] / "bench" / "async_rollouts.py", "bench_async_rollouts")


def tiny_args(**changes):
    values = dict(steps=2, batch=8, slots=8, token_time=0.0001, tokens_per_turn=4, train_time=0.001, mean_turns=3.0,
                  max_turns=16, max_in_flight=16, staleness=[1])
    values.update(changes)
    return argparse.Namespace(**values)


def test_episode_turns_are_geometric_with_mean_three_capped_at_sixteen():
    turns = [BENCH.episode_turns(seed, 3.0, 16) for seed in range(20_000)]
    assert min(turns) == 1 and max(turns) == 16
    assert 2.9 < sum(turns) / len(turns) < 3.05  # seeds are fixed: the same numbers every run
    assert sum(t == 1 for t in turns) / len(turns) > 0.3  # P(1 turn) = 1/3


async def test_sync_and_async_rows_hand_the_trainer_a_full_batch_per_step(tiny_tokenizer):
    args = tiny_args()
    sync = await BENCH.run_sync(args, tiny_tokenizer)
    fast = await BENCH.run_async(args, tiny_tokenizer, staleness=1)
    assert sync.episodes == fast.episodes == args.steps * args.batch
    assert 0.0 <= fast.idle <= 1.0 and 0.0 < fast.slot_use <= 1.0
    assert sync.mean_turns >= 1.0 and fast.mean_turns >= 1.0
