"""GemAgentLoop against verl's real AgentLoopBase/AgentLoopOutput, built as verl's worker builds it, with a
server manager whose ``generate`` is the tiny in-process model (real tokens, real logprobs)."""

from __future__ import annotations

import asyncio
import threading

import numpy as np
import pytest
import torch

from gem_core.testing import QWEN3_THINKING_SWITCH
from gem_core.rows.label import LabelError

pytest.importorskip("verl.experimental.agent_loop", reason='the verl adapter tests need `pip install -e ".[verl]"`')

from verl.experimental.agent_loop.agent_loop import AgentLoopBase, AgentLoopOutput
from verl.trainer.config import AlgoConfig
from verl.workers.rollout.replica import TokenOutput

import gem_core
from gem_adapters.verl.agent_loop import GemAgentLoop, GemAgentLoopOutput, ServerManagerPolicy
from gem_core.env import Env
from gem_core.errors import InvalidArgument
from gem_core.registry import register
from gem_core.rollout.chat_template import ChatTemplate
from gem_core.rollout.policy import SamplingParams
from gem_core.testing import ScriptedPolicy

from conftest import EMPTY_ACTION_PAYS_ENV_ID  # this folder is on sys.path



def wordle_script(seed: int) -> tuple[list[str], list[float]]:
    """Actions for game:Wordle-v0 with ``seed`` that earn three different rewards, and those rewards."""
    env = gem_core.make("game:Wordle-v0")
    env.reset(seed=seed)
    target = env.target
    partial = target[:2] + "".join("z" if c == "q" else "q" for c in target[2:])
    return [f"\\boxed{{{partial}}}", "no box here", f"\\boxed{{{target}}}"], [0.4, env.format_penalty, 0.6]


def spans_of(mask: list[int]) -> list[tuple[int, int]]:
    spans, start = [], None
    for i, m in enumerate([*mask, 0]):
        if m and start is None:
            start = i
        elif not m and start is not None:
            spans.append((start, i))
            start = None
    return spans


async def test_worker_style_instantiation_gives_an_agent_loop_base_with_yaml_kwargs(make_agent_loop, model_server, response_length):
    loop = make_agent_loop(model_server, max_turns=3, system_prompt="Play well.")
    assert isinstance(loop, GemAgentLoop) and isinstance(loop, AgentLoopBase)
    assert loop.max_turns == 3 and loop.system_prompt == "Play well."
    assert loop.max_new_tokens == 256 and loop.reward_placement == "turn"  # from the packaged gem_agent_loop.yaml
    assert loop.response_length == response_length


async def test_model_episode_is_token_exact_with_env_tokens_masked(run_loop, model_server, make_row, tiny_tokenizer, response_length):
    out = await run_loop(model_server, make_row("game:Wordle-v0", 7), max_new_tokens=12)

    AgentLoopOutput.model_validate(out.model_dump())  # verl's own schema
    n = len(out.response_ids)
    assert 0 < n <= response_length
    assert len(out.response_mask) == len(out.response_logprobs) == n
    # One verl request per turn, all on one request id, each seeing exactly the sequence so far.
    calls, outputs = model_server.calls, model_server.outputs
    spans = spans_of(out.response_mask)
    assert [tuple(s) for s in out.extra_fields["extras"]["turn_spans"]] == spans
    assert len(calls) == len(spans) == out.extra_fields["reward_extra_info"]["gem_turns"] > 1
    assert len({c["request_id"] for c in calls}) == 1
    full = out.prompt_ids + out.response_ids
    for (start, end), call, sampled in zip(spans, calls, outputs):
        assert call["prompt_ids"] == full[: len(out.prompt_ids) + start]
        assert out.response_ids[start:end] == sampled.token_ids  # the sampled ids, verbatim
        assert out.response_logprobs[start:end] == pytest.approx(sampled.log_probs)
        assert all(lp < 0 for lp in sampled.log_probs)
    # Env tokens: mask 0, logprob 0.0, and they hold the env's feedback text.
    env_positions = [i for i, m in enumerate(out.response_mask) if m == 0]
    assert env_positions and all(out.response_logprobs[i] == 0.0 for i in env_positions)
    env_text = tiny_tokenizer.decode([out.response_ids[i] for i in env_positions])
    assert "Invalid guess" in env_text or "Guesses left" in env_text


async def test_response_stays_within_response_length_and_turns_ask_only_for_what_is_left(
    make_trainer_config, make_agent_loop, model_server, make_row, sampling_params
):
    config = make_trainer_config(response_length=40)
    loop = make_agent_loop(model_server, config, max_new_tokens=30)
    out = await loop.run(sampling_params, **make_row("game:Wordle-v0", 1))
    server = model_server
    assert len(out.response_ids) <= 40
    assert out.extra_fields["reward_extra_info"]["gem_truncated"]
    used = 0
    for call, sampled in zip(server.calls, server.outputs):
        assert call["sampling_params"]["max_tokens"] <= 40 - used
        used = len(call["prompt_ids"]) - len(out.prompt_ids) + len(sampled.token_ids)


async def test_turn_rewards_land_on_each_turns_last_sampled_token(run_loop, server_for, tiny_tokenizer, make_row):
    actions, rewards = wordle_script(seed=11)
    server = server_for(ScriptedPolicy(tiny_tokenizer, actions))
    out = await run_loop(server, make_row("game:Wordle-v0", 11))

    assert isinstance(out, GemAgentLoopOutput)
    assert out.extra_fields["turn_scores"] == pytest.approx(rewards)
    assert out.reward_score == pytest.approx(sum(rewards))
    assert out.extra_fields["reward_extra_info"]["gem_success"] == 1.0 and not out.extra_fields["reward_extra_info"]["gem_truncated"]
    rm_scores = out.as_dict()["rm_scores"]  # what verl's default (v1) worker stores for the trainer
    assert rm_scores.shape == (len(out.response_ids),)
    ends = [end - 1 for _, end in spans_of(out.response_mask)]
    assert np.flatnonzero(rm_scores.numpy()).tolist() == ends
    assert rm_scores[ends].tolist() == pytest.approx(rewards)
    assert float(rm_scores.sum()) == pytest.approx(out.reward_score, abs=1e-6)


async def test_episode_placement_keeps_verls_last_token_return(run_loop, server_for, tiny_tokenizer, make_row):
    actions, rewards = wordle_script(seed=11)
    server = server_for(ScriptedPolicy(tiny_tokenizer, actions))
    out = await run_loop(server, make_row("game:Wordle-v0", 11), reward_placement="episode")

    assert type(out) is AgentLoopOutput
    rm_scores = out.as_dict()["rm_scores"]
    assert np.flatnonzero(rm_scores.numpy()).tolist() == [len(out.response_ids) - 1]
    assert float(rm_scores[-1]) == pytest.approx(sum(rewards))


async def test_no_logprobs_when_verl_does_not_ask(run_loop, model_server, make_row, sampling_params, make_agent_loop):
    loop = make_agent_loop(model_server, max_turns=2, max_new_tokens=8)
    out = await loop.run({**sampling_params, "logprobs": False}, **make_row("game:Wordle-v0", 2))
    assert out.response_logprobs is None
    AgentLoopOutput.model_validate(out.model_dump())


async def test_concurrent_samples_share_the_loop_with_one_request_id_each(make_agent_loop, model_server, make_row, sampling_params):
    rows = [make_row("game:Wordle-v0", seed, index=seed) for seed in range(3)]
    outs = await asyncio.gather(
        *(make_agent_loop(model_server, max_turns=2, max_new_tokens=8).run(sampling_params, **row) for row in rows)
    )
    assert len({c["request_id"] for c in model_server.calls}) == 3
    # verl's priority reaches the vLLM server (as in ToolAgentLoop, 0 is not sent).
    assert sorted(c.get("priority", 0) for c in model_server.calls) == [0, 0, 1, 1, 2, 2]
    assert [o.extra_fields["extras"]["env_seed"] for o in outs] == [0, 1, 2]
    assert all(set(o.extra_fields) == set(outs[0].extra_fields) for o in outs)  # verl keeps the first sample's keys


class _ThreadRecordingEnv(Env):
    """Records which thread runs ``step`` (GEM's ``astep`` must move it off the event loop)."""

    step_threads: list[int] = []

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        return "Say anything.", {}

    def step(self, action):
        type(self).step_threads.append(threading.get_ident())
        return "ok", 1.0, True, False, {}

    def sample_random_action(self):
        return "anything"


_THREAD_ENV_ID = "verltest:ThreadRecording-v0"
if _THREAD_ENV_ID not in gem_core.list_envs():
    register(_THREAD_ENV_ID, _ThreadRecordingEnv)


async def test_env_step_runs_off_verls_event_loop(run_loop, server_for, tiny_tokenizer, make_row):
    server = server_for(ScriptedPolicy(tiny_tokenizer, ["hi"]))
    row = make_row("game:Wordle-v0", 0)
    row["extra_info"] = {**row["extra_info"], "env_id": _THREAD_ENV_ID}
    _ThreadRecordingEnv.step_threads.clear()
    out = await run_loop(server, row)
    assert out.reward_score == 1.0
    assert _ThreadRecordingEnv.step_threads and threading.get_ident() not in _ThreadRecordingEnv.step_threads


async def test_unknown_env_id_names_close_ids_and_the_dataset(run_loop, model_server, make_row):
    row = make_row("game:Wordle-v0", 0)
    row["extra_info"] = {**row["extra_info"], "env_id": "game:Wordel-v0"}
    with pytest.raises(LabelError, match=r"(?s)game:Wordle-v0.*extra_info\['env_id'"):
        await run_loop(model_server, row)


@pytest.mark.parametrize("missing", ["env_id", "seed"])
async def test_row_without_env_id_or_seed_says_how_to_build_the_dataset(run_loop, model_server, make_row, missing):
    row = make_row("game:Wordle-v0", 0)
    row["extra_info"] = {k: v for k, v in row["extra_info"].items() if k != missing}
    with pytest.raises(ValueError, match=rf"(?s){missing}.*python -m gem_adapters\.verl --env"):
        await run_loop(model_server, row)


async def test_row_without_extra_info_says_how_to_build_the_dataset(run_loop, model_server, make_row):
    row = make_row("game:Wordle-v0", 0)
    row["extra_info"] = None
    with pytest.raises(ValueError, match=r"python -m gem_adapters\.verl --env"):
        await run_loop(model_server, row)


async def test_bad_reward_placement_in_yaml_fails_at_construction(make_agent_loop, model_server):
    with pytest.raises(Exception, match="reward_placement must be 'turn' or 'episode'"):
        make_agent_loop(model_server, reward_placement="token")


async def test_loop_builds_even_when_verls_family_token_builder_rejects_the_tokenizer(make_agent_loop, model_server, make_row, sampling_params):
    # verl's GLM builder needs GLM's special tokens; GEM never uses verl's builder, so the loop still works.
    loop = make_agent_loop(model_server, max_turns=1, max_new_tokens=4, hf_model_type="glm4_moe")
    out = await loop.run(sampling_params, **make_row("game:Wordle-v0", 0))
    assert out.extra_fields["reward_extra_info"]["gem_turns"] == 1


async def test_each_turn_keeps_verls_sampling_params_and_adds_the_turn_limits(run_loop, model_server, make_row, sampling_params):
    await run_loop(model_server, make_row("game:Wordle-v0", 4), max_turns=2, max_new_tokens=9)
    eot = ChatTemplate.for_tokenizer(model_server.policy.tokenizer).end_of_turn_ids
    for call in model_server.calls:
        params = call["sampling_params"]
        assert {k: params[k] for k in sampling_params} == sampling_params
        assert params["max_tokens"] <= 9 and set(eot) <= set(params["stop_token_ids"])


class _FixedServer:
    def __init__(self, output):
        self.output = output

    async def generate(self, request_id, *, prompt_ids, sampling_params, **kwargs):
        return self.output


@pytest.mark.parametrize(
    ("token_ids", "stop_reason", "expected"),
    [([5, 6, 99], "completed", "stop"), ([5, 6, 7], "completed", "length"), ([5], "completed", "stop"), ([5, 6], "aborted", "abort")],
)
async def test_server_stop_reason_becomes_the_sessions_finish_reason(token_ids, stop_reason, expected):
    output = TokenOutput(token_ids=token_ids, log_probs=[-1.0] * len(token_ids), stop_reason=stop_reason)
    policy = ServerManagerPolicy(_FixedServer(output), {"temperature": 1.0, "logprobs": True})
    policy.max_consecutive_aborts = 0  # the mapping only (an aborted turn is sampled again: test_verl_async_modes.py)
    generation = await policy.generate([1, 2], SamplingParams(max_new_tokens=3, stop_token_ids=[99]))
    assert generation.finish_reason == expected and generation.token_ids == token_ids


async def test_misaligned_logprobs_from_the_server_are_refused():
    output = TokenOutput(token_ids=[5, 6], log_probs=[-1.0], stop_reason="completed")
    with pytest.raises(ValueError, match="one logprob per sampled token"):
        await ServerManagerPolicy(_FixedServer(output), {}).generate([1], SamplingParams(max_new_tokens=4))




async def test_data_apply_chat_template_kwargs_reach_the_prompt_ids(make_row, tiny_model, server_for):
    """verl's `data.apply_chat_template_kwargs` (here Qwen3's enable_thinking=False) shapes the episode's prompt."""
    from conftest import AGENT_LOOP_YAML, build_agent_loop, compose_trainer_config, verl_sampling_params

    from gem_core.rollout.policy import TransformersPolicy
    from gem_core.testing import make_tokenizer

    tokenizer = make_tokenizer("chatml")  # a new object each call: its template is ours to change
    tokenizer.chat_template = QWEN3_THINKING_SWITCH
    config = compose_trainer_config([
        "actor_rollout_ref.rollout.name=vllm",
        f"actor_rollout_ref.rollout.agent.agent_loop_config_path={AGENT_LOOP_YAML}",
        "+data.apply_chat_template_kwargs.enable_thinking=false",
    ])
    loop = build_agent_loop(config, server_for(TransformersPolicy(tiny_model, tokenizer)), tokenizer, max_turns=1,
                            max_new_tokens=4)
    out = await loop.run(verl_sampling_params(config), **make_row("game:Wordle-v0", 3))
    assert tokenizer.decode(out.prompt_ids).endswith("<|im_start|>assistant\n<think>\n\n</think>\n\n")


class _ScriptedServer:
    """verl's ``generate`` answering ``respond(turn, sampling_params)`` (a ``TokenOutput``), recording each call."""

    def __init__(self, respond):
        self.respond = respond
        self.calls = []

    async def generate(self, request_id, *, prompt_ids, sampling_params, **kwargs):
        self.calls.append({"prompt_ids": list(prompt_ids), "sampling_params": dict(sampling_params), **kwargs})
        return self.respond(len(self.calls) - 1, sampling_params)


def _text_output(tokenizer, text: str, *, logprobs: bool = True) -> TokenOutput:
    """A turn the server ended at end-of-turn."""
    ids = tokenizer.encode(text, add_special_tokens=False) + list(ChatTemplate.for_tokenizer(tokenizer).end_of_turn_ids)
    return TokenOutput(token_ids=ids, log_probs=[-0.5] * len(ids) if logprobs else None, stop_reason="completed")


class _LongFirstObservationEnv(Env):
    """A first observation longer than the tests' rollout.prompt_length (256 tokens); records its steps."""

    steps: list[str] = []

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        return "word " * 400, {}

    def step(self, action):
        type(self).steps.append(action)
        return "again", 0.5, len(type(self).steps) >= 3, False, {}

    def sample_random_action(self):
        return "x"


_PAYING_ENV_ID = EMPTY_ACTION_PAYS_ENV_ID
_LONG_FIRST_OBSERVATION_ENV_ID = "verltest:LongFirstObservation-v0"
if _LONG_FIRST_OBSERVATION_ENV_ID not in gem_core.list_envs():
    register(_LONG_FIRST_OBSERVATION_ENV_ID, _LongFirstObservationEnv)


def _row_of(make_row, env_id: str) -> dict:
    row = make_row("game:Wordle-v0", 1)
    row["extra_info"] = {**row["extra_info"], "env_id": env_id}
    return row


async def test_a_server_without_logprobs_gives_verl_none_not_zeros(run_loop, make_row, tiny_tokenizer, sampling_params):
    """verl asked for log-probs (calculate_log_probs) and the server sent none: 0.0 on every sampled token would be
    stored as rollout_log_probs, probability 1; verl's own ToolAgentLoop returns None then."""
    assert sampling_params["logprobs"]
    server = _ScriptedServer(lambda turn, params: _text_output(tiny_tokenizer, "\\boxed{crane}", logprobs=False))
    out = await run_loop(server, make_row("game:Wordle-v0", 1), max_turns=2)
    assert len(server.calls) == 2
    assert out.response_logprobs is None and "rollout_log_probs" not in out.as_dict()


def _hello_then_length_cut(tokenizer):
    """Turn 1 ends at end-of-turn; turn 2 runs to its length limit (no end-of-turn, so the session closes it)."""
    filler = tokenizer.encode("a", add_special_tokens=False)[0]

    def respond(turn, params):
        if turn == 0:
            return _text_output(tokenizer, "hello")
        n = params["max_tokens"]
        return TokenOutput(token_ids=[filler] * n, log_probs=[-0.5] * n, stop_reason="completed")

    return respond


@pytest.mark.parametrize("placement", ["turn", "episode"])
async def test_a_response_cut_by_length_ends_on_a_sampled_token_so_verls_estimators_see_the_return(
    run_loop, make_row, tiny_tokenizer, placement
):
    from verl.trainer.ppo.core_algos import compute_gae_advantage_return, compute_reinforce_plus_plus_outcome_advantage

    out = await run_loop(_ScriptedServer(_hello_then_length_cut(tiny_tokenizer)), _row_of(make_row, _PAYING_ENV_ID),
                         reward_placement=placement)
    assert out.extra_fields["turn_scores"] == pytest.approx([0.1, 0.1])
    assert out.extra_fields["reward_extra_info"]["gem_truncated"]
    assert out.response_mask[-1] == 1  # the closing ids after the cut turn train nothing and no turn reads them
    n = len(out.response_ids)
    assert len(out.response_mask) == len(out.response_logprobs) == len(out.extra_fields["extras"]["token_versions"]) == n
    assert all(0 <= s <= e <= n for s, e in out.extra_fields["extras"]["turn_spans"])
    d = out.as_dict()
    rewards, mask = d["rm_scores"][None].float(), d["response_mask"][None].float()
    assert float(rewards.sum()) == pytest.approx(0.2)
    first_turn = out.extra_fields["extras"]["turn_spans"][0][0]
    _, gae_returns = compute_gae_advantage_return(
        rewards, torch.zeros_like(rewards), mask, gamma=torch.tensor(1.0), lam=torch.tensor(1.0)
    )
    _, rpp_returns = compute_reinforce_plus_plus_outcome_advantage(rewards, mask, config=AlgoConfig(gamma=1.0))
    assert float(gae_returns[0, first_turn]) == pytest.approx(0.2)
    assert float(rpp_returns[0, first_turn]) == pytest.approx(0.2)


async def test_a_first_observation_over_prompt_length_fails_before_any_request(run_loop, make_row, tiny_tokenizer):
    server = _ScriptedServer(lambda turn, params: _text_output(tiny_tokenizer, "guess"))
    _LongFirstObservationEnv.steps.clear()
    with pytest.raises(InvalidArgument, match=r"prompt_length=256.*data\.max_prompt_length"):
        await run_loop(server, _row_of(make_row, _LONG_FIRST_OBSERVATION_ENV_ID))
    assert server.calls == [] and _LongFirstObservationEnv.steps == []


async def test_a_vision_env_is_refused_naming_the_limitation(run_loop, make_row, tiny_tokenizer):
    server = _ScriptedServer(lambda turn, params: _text_output(tiny_tokenizer, "42"))
    with pytest.raises(InvalidArgument, match=r"vision:ChartQA-v0.*images.*verl"):
        await run_loop(server, _row_of(make_row, "vision:ChartQA-v0"), max_turns=1)
    assert server.calls == []


@pytest.mark.parametrize("override", ["++data.apply_chat_template_kwargs=enable_thinking", "++data.apply_chat_template_kwargs={1: 2}"])
async def test_bad_apply_chat_template_kwargs_are_named_at_construction(override, tiny_tokenizer):
    from conftest import AGENT_LOOP_YAML, build_agent_loop, compose_trainer_config

    config = compose_trainer_config([
        "actor_rollout_ref.rollout.name=vllm",
        f"actor_rollout_ref.rollout.agent.agent_loop_config_path={AGENT_LOOP_YAML}",
        override,
    ])
    with pytest.raises(Exception, match=r"data\.apply_chat_template_kwargs.*str keys") as raised:
        build_agent_loop(config, _ScriptedServer(None), tiny_tokenizer)
    assert isinstance(raised.value.__cause__ or raised.value, InvalidArgument)


@pytest.mark.parametrize("priority", ["high", float("nan"), 2.5, True])
async def test_a_row_priority_that_is_not_a_whole_number_is_named(run_loop, make_row, tiny_tokenizer, priority):
    server = _ScriptedServer(lambda turn, params: _text_output(tiny_tokenizer, "\\boxed{crane}"))
    row = {**make_row("game:Wordle-v0", 1), "priority": priority}
    with pytest.raises(InvalidArgument, match=r"priority"):
        await run_loop(server, row, max_turns=1)
    assert server.calls == []


async def test_a_whole_number_priority_reaches_the_server(run_loop, make_row, tiny_tokenizer):
    server = _ScriptedServer(lambda turn, params: _text_output(tiny_tokenizer, "\\boxed{crane}"))
    await run_loop(server, {**make_row("game:Wordle-v0", 1), "priority": np.float64(3.0)}, max_turns=1)
    assert server.calls[0]["priority"] == 3 and type(server.calls[0]["priority"]) is int


@pytest.mark.parametrize("version", ["v3", 2.7, float("nan")])
async def test_a_weight_version_that_is_not_a_whole_number_is_named(version):
    output = TokenOutput(token_ids=[5, 6], log_probs=[-1.0, -1.0], stop_reason="completed", extra_fields={"global_steps": version})
    with pytest.raises(InvalidArgument, match=r"global_steps"):
        await ServerManagerPolicy(_FixedServer(output), {}).generate([1], SamplingParams(max_new_tokens=4))


async def test_whole_number_weight_versions_are_kept():
    output = TokenOutput(token_ids=[5, 6], log_probs=[-1.0, -1.0], stop_reason="completed",
                         extra_fields={"global_steps": np.int64(3), "min_global_steps": 2.0, "max_global_steps": 3})
    policy = ServerManagerPolicy(_FixedServer(output), {})
    generation = await policy.generate([1], SamplingParams(max_new_tokens=4))
    assert generation.versions == [2, 2] and policy.turn_versions == [[2, 3]]


async def test_stop_token_ids_in_verls_sampling_params_are_kept_beside_the_turns_own(
    make_agent_loop, make_row, tiny_tokenizer, sampling_params
):
    server = _ScriptedServer(lambda turn, params: _text_output(tiny_tokenizer, "\\boxed{crane}"))
    loop_sampling = {**sampling_params, "stop_token_ids": [42]}
    await make_agent_loop(server, max_turns=1).run(loop_sampling, **make_row("game:Wordle-v0", 1))
    sent = server.calls[0]["sampling_params"]["stop_token_ids"]
    eot = ChatTemplate.for_tokenizer(tiny_tokenizer).end_of_turn_ids
    assert 42 in sent and set(eot) <= set(sent) and len(sent) == len(set(sent))
    assert loop_sampling["stop_token_ids"] == [42]  # verl's dict is not changed


async def test_a_stop_id_from_verl_ends_the_turn_as_a_stop():
    output = TokenOutput(token_ids=[5, 6, 42], log_probs=[-1.0] * 3, stop_reason="completed")
    policy = ServerManagerPolicy(_FixedServer(output), {"stop_token_ids": [42]})
    generation = await policy.generate([1], SamplingParams(max_new_tokens=3, stop_token_ids=[99]))
    assert generation.finish_reason == "stop"
