"""gem_adapters.openrlhf.agent run by OpenRLHF's own ``MultiTurnAgentExecutor.execute``.

The executor is the real class from ``openrlhf.utils.agent`` (OpenRLHF 0.11.2 installed without its
GPU dependencies); the engine is the documented stand-in from ``conftest.py``.
"""

from __future__ import annotations

import asyncio
import copy
import importlib.util
import inspect

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

pytest.importorskip("openrlhf.utils.agent", reason="needs openrlhf==0.11.2 (nox -s openrlhf)")

from openrlhf.utils.agent import AgentExecutorBase, AgentInstanceBase, MultiTurnAgentExecutor

from gem_adapters import framework_version
from gem_adapters.files import shipped_path
from gem_adapters.openrlhf import agent as agent_module
from gem_adapters.openrlhf.agent import AgentConfig, GemAgentExecutor, GemAgentInstance, OpenRLHFVersionError
from gem_core.testing import QWEN3_THINKING_SWITCH
from gem_core.rows.label import EpisodeLabel, LabelError
from gem_core.registry import make
from gem_core.rollout import run_episode
from gem_core.rollout.policy import SamplingParams, TransformersPolicy
from gem_core.testing import ScriptedPolicy, make_model


AGENT_FILE = shipped_path("openrlhf-agent")
ENV_ID = "game:GuessTheNumber-v0"
# Invalid format, then three guesses: gives format penalties and 0/1 rewards over several turns.
ACTIONS = ["I think it is 7", "\\boxed{10}", "\\boxed{5}", "\\boxed{15}", "\\boxed{3}", "\\boxed{17}"]
MAX_LENGTH = 2048


def _action_mask(result: dict) -> list[int]:
    """OpenRLHF's rule (samples_generator._process_response_into_experience): 1 inside action_ranges."""
    mask = [0] * len(result["observation_tokens"])
    for start, end in result["action_ranges"]:
        mask[start:end] = [1] * (end - start)
    return mask


@pytest.fixture
def execute(tokenizer, engine_for, vllm_sampling_params):
    """``await execute(executor, policy, seed)``: OpenRLHF's execute for one GEM episode."""

    async def run(executor, policy, seed: int, *, label: str | None = None, max_length: int = MAX_LENGTH) -> dict:
        label = label or EpisodeLabel(ENV_ID, seed).to_json()
        return await executor.execute("ignored prompt", label, vllm_sampling_params(), max_length, tokenizer, engine_for(policy))

    return run


@pytest.mark.parametrize("seed", [0, 3])
async def test_execute_gives_the_core_episode_tokens_mask_logprobs_and_reward(tokenizer, execute, seed):
    policy = ScriptedPolicy(tokenizer, ACTIONS)
    core = await run_episode(make(ENV_ID), policy, tokenizer, seed=seed, max_total_tokens=MAX_LENGTH, env_id=ENV_ID)
    result = await execute(GemAgentExecutor(), policy, seed)

    prompt_len = len(core.prompt_ids)
    assert result["observation_tokens"] == core.prompt_ids + core.response_ids
    assert result["action_ranges"] == [(prompt_len + s, prompt_len + e) for s, e in core.turn_spans]
    assert _action_mask(result) == [0] * prompt_len + core.loss_mask
    assert result["rollout_log_probs"] == pytest.approx([0.0] * prompt_len + core.logprobs)
    assert result["reward"] == pytest.approx(core.episode_return)
    assert result["scores"] == pytest.approx(core.episode_return)
    assert result["extra_logs"]["gem/num_turns"] == core.num_turns


async def test_reward_gamma_makes_the_summed_reward_the_discounted_return(tokenizer, execute):
    gamma = 0.5

    class Discounted(GemAgentExecutor):
        config = AgentConfig(reward_gamma=gamma)

    policy = ScriptedPolicy(tokenizer, ACTIONS)
    core = await run_episode(make(ENV_ID), policy, tokenizer, seed=1, max_total_tokens=MAX_LENGTH)
    assert len(set(core.rewards)) > 1, "the scripted episode should mix rewards for this test to mean anything"
    result = await execute(Discounted(), policy, seed=1)
    assert result["reward"] == pytest.approx(sum(gamma**t * r for t, r in enumerate(core.rewards)))
    assert result["scores"] == pytest.approx(core.episode_return)


async def test_concurrent_episodes_on_one_executor_stay_separate(tokenizer, execute):
    policy = ScriptedPolicy(tokenizer, ACTIONS)
    executor = GemAgentExecutor()
    seeds = [0, 1, 2, 5]
    results = await asyncio.gather(*(execute(executor, policy, s) for s in seeds))
    for seed, result in zip(seeds, results):
        core = await run_episode(make(ENV_ID), policy, tokenizer, seed=seed, max_total_tokens=MAX_LENGTH)
        assert result["observation_tokens"] == core.prompt_ids + core.response_ids
        assert result["reward"] == pytest.approx(core.episode_return)


async def test_tiny_model_episode_respects_the_per_turn_cap_and_masks_only_sampled_tokens(tokenizer, engine_for, vllm_sampling_params):
    cap = 12

    class Capped(GemAgentExecutor):
        config = AgentConfig(max_new_tokens=cap, max_turns=3)

    policy = TransformersPolicy(make_model(tokenizer), tokenizer)
    engine = engine_for(policy)
    label = EpisodeLabel(ENV_ID, 4).to_json()
    result = await Capped().execute("p", label, vllm_sampling_params(temperature=1.0), 512, tokenizer, engine)

    assert 1 <= len(result["action_ranges"]) <= 3
    assert all(0 < end - start <= cap for start, end in result["action_ranges"])
    assert all(m is not None and m <= cap for m in engine.max_tokens_seen)
    mask = _action_mask(result)
    logprobs = result["rollout_log_probs"]
    assert len(logprobs) == len(result["observation_tokens"]) == len(mask)
    assert all(lp == 0.0 for lp, m in zip(logprobs, mask) if m == 0)
    assert any(lp < 0.0 for lp, m in zip(logprobs, mask) if m == 1)
    # A random model never guesses in the right format: each turn earns the format penalty.
    assert result["reward"] == pytest.approx(len(result["action_ranges"]) * make(ENV_ID).format_penalty)


async def test_unknown_env_id_fails_with_the_closest_ids_and_the_dataset_fix(tokenizer, execute):
    policy = ScriptedPolicy(tokenizer, ACTIONS)
    label = '{"env_id": "game:GuessTheNumbr-v0", "seed": 0}'
    with pytest.raises(LabelError, match="GuessTheNumber-v0.*env_id"):
        await execute(GemAgentExecutor(), policy, 0, label=label)


async def test_label_without_seed_fails_naming_the_dataset_builder(tokenizer, execute):
    policy = ScriptedPolicy(tokenizer, ACTIONS)
    label = '{"env_id": "game:GuessTheNumber-v0"}'
    with pytest.raises(LabelError, match="'seed'.*python -m gem_adapters.openrlhf --env"):
        await execute(GemAgentExecutor(), policy, 0, label=label)


@pytest.mark.parametrize(
    "kwargs, message",
    [({"max_new_tokens": 0}, "AgentConfig: max_new_tokens=0 must be a positive whole number, or None."),
     ({"reward_gamma": 5}, "AgentConfig: reward_gamma=5 must be a number in [0, 1] (a discount over turns)."),
     ({"reward_gamma": -1}, "AgentConfig: reward_gamma=-1 must be a number in [0, 1] (a discount over turns)."),
     ({"reward_gamma": float("nan")}, "AgentConfig: reward_gamma=nan must be a number in [0, 1] (a discount over turns)."),
     ({"max_turns": 0}, "AgentConfig: max_turns=0 must be a positive whole number of turns, or None."),
     ({"system_prompt": 5}, "AgentConfig: system_prompt=5 must be a str, or None."),
     ({"n_samples_per_prompt": 0}, "AgentConfig: n_samples_per_prompt=0 must be a positive whole number."),
     ({"n_samples_per_prompt": 2.5}, "AgentConfig: n_samples_per_prompt=2.5 must be a positive whole number.")],
)
def test_bad_config_is_refused_when_it_is_built_naming_the_key(kwargs, message):
    # Before: max_new_tokens=0 played 1-token turns, gamma 5 scaled rewards, the others failed at the first episode.
    with pytest.raises(ValueError) as error:
        AgentConfig(**kwargs)
    assert str(error.value) == message


def test_instance_outside_the_gem_executor_says_how_to_define_the_agent_file():
    with pytest.raises(RuntimeError, match="class AgentExecutor\\(GemAgentExecutor\\)"):
        MultiTurnAgentExecutor(GemAgentInstance).agent_instance_cls()


def test_other_openrlhf_version_fails_at_import_with_the_install_line(monkeypatch):
    monkeypatch.setattr(framework_version.metadata, "version", lambda name: "0.8.6")
    with pytest.raises(OpenRLHFVersionError, match=r'pip install -e "\.\[openrlhf\]" && pip install --no-deps "openrlhf==0\.11\.2"'):
        agent_module.check_openrlhf_version()


def test_changed_execute_signature_fails_at_import(monkeypatch):
    async def execute(self, prompt, label, sampling_params, hf_tokenizer, llm_engine):  # max_length gone
        raise AssertionError

    monkeypatch.setattr(MultiTurnAgentExecutor, "execute", execute)
    with pytest.raises(OpenRLHFVersionError, match="changed MultiTurnAgentExecutor.execute"):
        agent_module.check_openrlhf_version()


def test_agent_file_loads_the_way_openrlhf_loads_it():
    # Mirrors openrlhf.trainer.ray.vllm_engine._load_agent_executor (that module needs vLLM and Ray).
    spec = importlib.util.spec_from_file_location("agent_module", AGENT_FILE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert issubclass(module.AgentExecutor, AgentExecutorBase)
    executor = module.AgentExecutor()
    assert issubclass(executor.agent_instance_cls, AgentInstanceBase)
    assert not inspect.iscoroutinefunction(GemAgentInstance.__init__)


# Hostile actions: any text, including chat-template markup and a stray end-of-turn token.
_action_text = st.one_of(
    st.text(max_size=40),
    st.sampled_from(["\\boxed{", "<|im_end|>", "<|im_start|>user\n", "\\boxed{7}<|im_end|>", "\n\n", "\\boxed{١٢}"]),
    st.integers(-5, 30).map(lambda n: f"\\boxed{{{n}}}"),
)


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(actions=st.lists(_action_text, min_size=1, max_size=6), seed=st.integers(0, 2**16), env_id=st.sampled_from([ENV_ID, "game:Wordle-v0-hard"]))
def test_any_actions_give_the_core_tokens_and_rewards(tokenizer, engine_for, vllm_sampling_params, actions, seed, env_id):
    policy = ScriptedPolicy(tokenizer, actions)
    cap = 24  # long hostile actions are cut: the closing end-of-turn must come back as env feedback (mask 0)

    class Capped(GemAgentExecutor):
        config = AgentConfig(max_new_tokens=cap)

    async def both():
        core = await run_episode(make(env_id), policy, tokenizer, seed=seed, max_total_tokens=MAX_LENGTH, sampling=SamplingParams(max_new_tokens=cap))
        label = EpisodeLabel(env_id, seed).to_json()
        result = await Capped().execute("p", label, vllm_sampling_params(), MAX_LENGTH, tokenizer, engine_for(policy))
        return core, result

    core, result = asyncio.run(both())
    assert result["observation_tokens"] == core.prompt_ids + core.response_ids
    assert _action_mask(result) == [0] * len(core.prompt_ids) + core.loss_mask
    assert result["rollout_log_probs"] == pytest.approx([0.0] * len(core.prompt_ids) + core.logprobs)
    assert result["reward"] == pytest.approx(core.episode_return)
    start, end = core.turn_spans[-1]
    last_turn_cut = core.response_ids[end - 1] != tokenizer.convert_tokens_to_ids("<|im_end|>")
    assert result["truncated"] == (last_turn_cut or core.metrics["truncated_by"] == "max_total_tokens")


async def test_episode_ended_by_the_token_budget_is_truncated_though_its_last_turn_stopped(tokenizer, execute):
    policy = ScriptedPolicy(tokenizer, ACTIONS)
    full = await run_episode(make(ENV_ID), policy, tokenizer, seed=0)
    # Room for the first turn, not for the observation after it.
    budget = len(full.prompt_ids) + full.turn_spans[0][1] + 2
    core = await run_episode(make(ENV_ID), policy, tokenizer, seed=0, max_total_tokens=budget)
    assert core.metrics["truncated_by"] == "max_total_tokens" and core.num_turns == 1
    assert core.response_ids[core.turn_spans[-1][1] - 1] == tokenizer.convert_tokens_to_ids("<|im_end|>"), "the turn stopped"

    result = await execute(GemAgentExecutor(), policy, 0, max_length=budget)
    assert result["observation_tokens"] == core.prompt_ids + core.response_ids
    assert result["truncated"] is True
    assert result["extra_logs"]["gem/truncated"] == 1.0


async def test_an_episode_whose_prompt_fills_max_length_logs_the_same_keys_as_every_other(tokenizer, engine_for, vllm_sampling_params):
    """OpenRLHF cuts such a prompt and never calls step(), the only place the gem/* logs were set: its extra_logs were {}
    and OpenRLHF's batch merge of the samples' infos failed for the whole batch (a key's size != the batch size)."""
    policy, label = ScriptedPolicy(tokenizer, ACTIONS), EpisodeLabel(ENV_ID, 0).to_json()
    full, cut = [await GemAgentExecutor().execute("ignored prompt", label, vllm_sampling_params(max_tokens=64), max_length, tokenizer,
                                                  engine_for(policy)) for max_length in (MAX_LENGTH, 60)]
    assert cut["action_ranges"] == [] and set(cut["extra_logs"]) == set(full["extra_logs"])
    assert cut["extra_logs"]["gem/num_turns"] == 0.0 and cut["extra_logs"]["gem/truncated"] == 1.0


async def test_every_episode_closes_its_env(tokenizer, execute, open_envs):
    policy = ScriptedPolicy(tokenizer, ACTIONS)
    executor = GemAgentExecutor()
    await asyncio.gather(*(execute(executor, policy, seed) for seed in range(20)))
    await execute(executor, policy, 3, max_length=40)  # ended by the token budget
    with pytest.raises(LabelError):
        await execute(executor, policy, 0, label='{"env_id": "game:GuessTheNumbr-v0", "seed": 0}')
    assert open_envs.made >= 21
    assert open_envs.open == 0




@pytest.mark.parametrize("kwargs", [{"enable_thinking": False}, {}])
async def test_chat_template_kwargs_reach_the_prompt_ids(tokenizer, engine_for, vllm_sampling_params, kwargs):
    qwen3 = copy.deepcopy(tokenizer)
    qwen3.chat_template = QWEN3_THINKING_SWITCH

    class NoThinking(GemAgentExecutor):
        config = AgentConfig(chat_template_kwargs=kwargs)

    policy = ScriptedPolicy(qwen3, ACTIONS)
    result = await NoThinking().execute("p", EpisodeLabel(ENV_ID, 0).to_json(), vllm_sampling_params(), MAX_LENGTH, qwen3, engine_for(policy))
    prompt_len = result["action_ranges"][0][0]
    prompt = qwen3.decode(result["observation_tokens"][:prompt_len], skip_special_tokens=False)
    assert prompt.endswith("<|im_start|>assistant\n<think>\n\n</think>\n\n") == bool(kwargs)
