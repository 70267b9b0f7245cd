"""A task sampler behind RL2 main's ``generate`` hook: the ``responses_per_prompt`` copies of a row, gathered as RL2's
``SampleGroup.generate`` gathers them, play one drawn start; finished episodes update the sampler and its
state lands in ``state_dir``; per-task metrics go into ``sample.metrics``; ``rollout.test`` rows keep their labels.

RL2 main cannot be installed from the package registry (see test_generate.py): its ``Sample`` is the
stand-in there, and the router is the fake SGLang router from ``conftest.py``.
"""

from __future__ import annotations

import asyncio
import copy
import json

import pytest

from gem_adapters.rl2 import GenerateEnv
from gem_adapters.rl2.api import dataset_row
from gem_core.curriculum import SAMPLER_STATE_FILE, shared_group_starts
from gem_core.rows.label import EpisodeLabel
from gem_core.testing import ScriptedPolicy
from test_generate import Sample  # RL2 main's Sample stand-in (this folder is on sys.path, as for conftest)

OmegaConf = pytest.importorskip("omegaconf", reason="RL2 passes an OmegaConf config (nox -s rl2)").OmegaConf

TASKS = [
    {"env_id": "game:GuessTheNumber-v0-easy", "env_kwargs": {"max_turns": 2}},
    {"env_id": "game:Mastermind-v0-easy", "env_kwargs": {"max_turns": 2}},
]
COPIES = 3


def rollout_config(train: bool):
    """RL2 main's ``rollout.train`` / ``rollout.test`` (trainer/config/ppo.yaml): only train has ``partial_rollout``."""
    config = {"responses_per_prompt": COPIES, "sampling_params": {"temperature": 1.0, "max_new_tokens": 32, "stop": None}}
    if train:
        config.update(dynamic_filtering=True, partial_rollout=False)
    return OmegaConf.create(config)


async def group_generate(env: GenerateEnv, config, tokenizer, url: str, row: dict) -> list[Sample]:
    """What RL2 main's ``SampleGroup.generate`` does: deep copies of the row, ``generate`` gathered over them."""
    samples = [Sample(sample=copy.deepcopy(row)) for _ in range(config.responses_per_prompt)]
    await asyncio.gather(*(env.generate(config, tokenizer, url, sample) for sample in samples))
    assert all(sample.status == Sample.Status.DONE for sample in samples)
    return samples


async def test_the_copies_of_a_row_share_a_drawn_start_and_every_episode_updates_the_sampler(tokenizer, fake_router, tmp_path):
    spec = {"tasks": TASKS, "seed": 6, "min_episodes": 2, "window": 8, "state_dir": str(tmp_path)}
    env = GenerateEnv(curriculum=spec)
    sampler = shared_group_starts(spec, COPIES).sampler  # the env file's, shared in this process
    rows = [dataset_row(EpisodeLabel("game:Wordle-v0", seed)) for seed in (0, 1, 0)]  # row 0 again: the next epoch
    async with fake_router(ScriptedPolicy(tokenizer, ["\\boxed{1}", "\\boxed{2}"])) as (url, _):
        for round_, row in enumerate(rows, start=1):
            samples = await group_generate(env, rollout_config(train=True), tokenizer, url, row)
            # One draw per row: every copy played it (the scripted policy makes equal starts equal episodes).
            assert sampler.draws == round_
            states = [tuple(s.state_dicts[0]["states"]) for s in samples]
            assert len(set(states)) == 1
            assert "wordle" not in tokenizer.decode(list(states[0])).lower(), "the start is the sampler's, not the row's"
            assert sum(sampler.stats(t).episodes for t in sampler.tasks) == COPIES * round_
            assert json.loads((tmp_path / SAMPLER_STATE_FILE).read_text()) == sampler.state_dict()
            # Per-task metrics of the episode and the sampler's probabilities, for RL2's per-key means.
            (task,) = {name.split("/")[2] for name in samples[0].metrics if name.startswith("gem/task/")}
            assert task in {t.name for t in sampler.tasks}
            assert samples[0].metrics[f"gem/task/{task}/return"] == pytest.approx(samples[0].metrics["rewards"])
            assert samples[0].metrics[f"gem/task/{task}/success"] in ([0.0], [1.0])
            assert all(f"gem/curriculum/{t.name}/probability" in samples[0].metrics for t in sampler.tasks)

        # rollout.test: the row's own episode, and the sampler is left alone.
        test_row = dataset_row(EpisodeLabel("game:GuessTheNumber-v0", 9))
        samples = await group_generate(env, rollout_config(train=False), tokenizer, url, test_row)
    assert sampler.draws == 3 and sum(sampler.stats(t).episodes for t in sampler.tasks) == COPIES * 3
    assert all("gem/task/game:GuessTheNumber-v0/success" in s.metrics for s in samples)
