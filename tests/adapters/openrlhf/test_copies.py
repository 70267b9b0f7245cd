"""The copies of one prompt under OpenRLHF's own ``MultiTurnAgentExecutor.execute``.

OpenRLHF 0.11.2's ``RolloutRayActor.generate_responses`` runs a prompt's ``n_samples_per_prompt`` copies as
concurrent ``execute`` calls that share the prompt's label and one ``sampling_params`` object, into which each
copy writes its remaining token budget before every turn. vLLM cannot be imported on CPU, so
:func:`generate_responses` does what that method does.
"""

from __future__ import annotations

import asyncio
import warnings

import pytest

pytest.importorskip("openrlhf.utils.agent", reason="needs openrlhf==0.11.2 (nox -s openrlhf)")

from gem_adapters.openrlhf.agent import AgentConfig, CopyCountWarning, GemAgentExecutor, GemAgentInstance
from gem_core.rows.label import EpisodeLabel
from gem_core.testing import ScriptedPolicy

TASKS = [
    {"env_id": "game:GuessTheNumber-v0-easy", "env_kwargs": {"max_turns": 2}},
    {"env_id": "game:Mastermind-v0-easy", "env_kwargs": {"max_turns": 2}},
]
LABEL = EpisodeLabel("game:GuessTheNumber-v0-easy", 0).to_json()


async def generate_responses(executor, labels, engine, tokenizer, sampling_params, max_length=1024) -> list[dict]:
    """OpenRLHF's ``generate_responses`` for one prompt: one ``execute`` per copy, all given the same ``sampling_params``."""
    return await asyncio.gather(
        *(executor.execute("ignored prompt", label, sampling_params, max_length, tokenizer, engine) for label in labels)
    )


def _prompt(result: dict) -> list[int]:
    return result["observation_tokens"][: result["action_ranges"][0][0]]


async def test_a_copy_s_first_observation_is_not_cut_by_another_copy_s_budget(tokenizer, engine_for, vllm_sampling_params):
    # Copies with different first observations (what a curriculum gives when the agent file's n_samples_per_prompt is
    # lower than OpenRLHF's): the short one samples while the long one is still resetting its env.
    short, long = (EpisodeLabel(env, 0).to_json() for env in ("game:GuessTheNumber-v0-easy", "game:Minesweeper-v0"))
    sampled = asyncio.Event()

    class LateReset(GemAgentInstance):
        async def reset(self, states, **kwargs):
            if states["label"] == long:
                await sampled.wait()
            return await super().reset(states, **kwargs)

    class Executor(GemAgentExecutor):
        config = AgentConfig(max_new_tokens=8, max_turns=1)
        instance_cls = LateReset

    inner = engine_for(ScriptedPolicy(tokenizer, ["\\boxed{1}"]))

    class SignallingEngine:
        async def generate(self, *args, **kwargs):
            sampled.set()
            return await inner.generate(*args, **kwargs)

    shared = vllm_sampling_params()  # OpenRLHF's default: max_tokens None (each copy's budget is its own remainder)
    results = await generate_responses(Executor(), [short, long], SignallingEngine(), tokenizer, shared)
    sampled.set()
    (alone,) = await generate_responses(Executor(), [long], SignallingEngine(), tokenizer, vllm_sampling_params())
    assert len(_prompt(alone)) > len(_prompt(results[0])), "the copies' first observations must differ in length"
    assert _prompt(results[1]) == _prompt(alone), "the long copy's first observation was cut to the other copy's length"
    assert shared.max_tokens is None, "a copy wrote its budget into the params the prompt's copies share"


def _copy_warnings(caught) -> list[str]:
    return [str(w.message) for w in caught if issubclass(w.category, CopyCountWarning)]


@pytest.mark.parametrize(("configured", "copies", "setting"), [
    (1, 3, "--rollout.n_samples_per_prompt"),  # the agent file left at 1: every copy drew its own start
    (3, 2, "--eval.n_samples_per_prompt"),  # fewer copies than configured (OpenRLHF's eval count differs)
])
async def test_a_copy_count_other_than_the_agent_file_s_is_warned_naming_both_settings(
    tokenizer, engine_for, vllm_sampling_params, tmp_path, configured, copies, setting
):
    class Executor(GemAgentExecutor):
        config = AgentConfig(max_new_tokens=8, curriculum={"tasks": TASKS, "seed": 1, "state_dir": str(tmp_path)},
                             n_samples_per_prompt=configured)

    engine = engine_for(ScriptedPolicy(tokenizer, ["\\boxed{1}"]))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        await generate_responses(Executor(), [LABEL] * copies, engine, tokenizer, vllm_sampling_params())
    (message,) = _copy_warnings(caught)
    assert f"n_samples_per_prompt={configured}" in message and setting in message and f"ran {copies} copies" in message


async def test_the_configured_copy_count_and_no_curriculum_are_not_warned(tokenizer, engine_for, vllm_sampling_params, tmp_path):
    class Curriculum(GemAgentExecutor):
        config = AgentConfig(max_new_tokens=8, curriculum={"tasks": TASKS, "seed": 1, "state_dir": str(tmp_path)}, n_samples_per_prompt=3)

    class Plain(GemAgentExecutor):  # without a curriculum every copy starts at the label: the count does not matter
        config = AgentConfig(max_new_tokens=8)

    engine = engine_for(ScriptedPolicy(tokenizer, ["\\boxed{1}"]))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for executor in (Curriculum(), Plain()):
            for _ in range(2):  # one prompt after another: each object is its own group
                await generate_responses(executor, [LABEL] * 3, engine, tokenizer, vllm_sampling_params())
    assert _copy_warnings(caught) == []
