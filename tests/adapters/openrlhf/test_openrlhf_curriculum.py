"""A task sampler behind OpenRLHF's own ``MultiTurnAgentExecutor.execute``: the ``n_samples_per_prompt`` copies of a
label, run concurrently as OpenRLHF's engine runs them, play one drawn start; finished episodes update the
sampler, its state lands in ``state_dir``, and ``extra_logs`` carry the same keys for every sample."""

from __future__ import annotations

import asyncio
import json

import pytest

pytest.importorskip("openrlhf.utils.agent", reason="needs openrlhf==0.11.2 (nox -s openrlhf)")

from gem_adapters.openrlhf.agent import AgentConfig, GemAgentExecutor
from gem_core.curriculum import SAMPLER_STATE_FILE, shared_group_starts
from gem_core.rows.label import EpisodeLabel
from gem_core.testing import ScriptedPolicy

TASKS = [
    {"env_id": "game:GuessTheNumber-v0-easy", "env_kwargs": {"max_turns": 2}},
    {"env_id": "game:Mastermind-v0-easy", "env_kwargs": {"max_turns": 2}},
]
COPIES = 3


async def generate_responses(executor, label: str, engine, tokenizer, sampling_params) -> list[dict]:
    """What OpenRLHF's ``RolloutRayActor.generate_responses`` does for one prompt (vLLM cannot be imported on CPU):
    ``n_samples_per_prompt`` concurrent ``execute`` calls with the prompt's label."""
    return await asyncio.gather(
        *(executor.execute("ignored prompt", label, sampling_params, 1024, tokenizer, engine) for _ in range(COPIES))
    )


async def test_the_copies_of_a_label_share_a_drawn_start_and_every_episode_updates_the_sampler(
    tokenizer, engine_for, vllm_sampling_params, tmp_path
):
    spec = {"tasks": TASKS, "seed": 2, "min_episodes": 2, "window": 8, "state_dir": str(tmp_path)}

    class Executor(GemAgentExecutor):
        config = AgentConfig(max_new_tokens=16, curriculum=spec, n_samples_per_prompt=COPIES)

    executor = Executor()
    sampler = shared_group_starts(spec, COPIES).sampler  # the one every engine's agent shares in this process
    engine = engine_for(ScriptedPolicy(tokenizer, ["\\boxed{1}", "\\boxed{2}"]))
    labels = [EpisodeLabel("game:Wordle-v0", seed).to_json() for seed in (0, 1, 0)]  # row 0 again: the next epoch

    for round_, label in enumerate(labels, start=1):
        results = await generate_responses(executor, label, engine, tokenizer, vllm_sampling_params(temperature=1.0))
        # One draw per prompt: every copy played it (the scripted policy makes equal starts equal episodes), and
        # each copy counted once.
        assert sampler.draws == round_
        assert len({tuple(r["observation_tokens"]) for r in results}) == 1
        assert "wordle" not in tokenizer.decode(results[0]["observation_tokens"]).lower(), "the start is the sampler's, not the row's"
        assert sum(sampler.stats(t).episodes for t in sampler.tasks) == COPIES * round_
        assert all(r["label"] == label for r in results)
        # Same keys in every sample (OpenRLHF averages each key over the batch): each task's next-draw probability.
        keys = {frozenset(r["extra_logs"]) for r in results}
        assert len(keys) == 1 and {f"gem/curriculum/{t.name}/probability" for t in sampler.tasks} <= next(iter(keys))
        assert json.loads((tmp_path / SAMPLER_STATE_FILE).read_text()) == sampler.state_dict()
    # The three groups' starts (each task counts its seeds up once per draw): 3 draws, 3 seeds handed out.
    assert sum(int(task["next_seed"]) for task in sampler.state_dict()["tasks"].values()) == 3


async def test_without_a_curriculum_the_label_is_the_episode(tokenizer, engine_for, vllm_sampling_params):
    label = EpisodeLabel("game:GuessTheNumber-v0", 5).to_json()
    engine = engine_for(ScriptedPolicy(tokenizer, ["\\boxed{1}"]))
    (result,) = await asyncio.gather(
        GemAgentExecutor().execute("ignored", label, vllm_sampling_params(temperature=1.0), 1024, tokenizer, engine)
    )
    assert "guess" in tokenizer.decode(result["observation_tokens"]).lower() and not any(k.startswith("gem/curriculum/") for k in result["extra_logs"])
