"""Three verifiers tasksets (single-turn, multi-turn, tool) played through a real GEM adapter: rl-square
0.0.2's own dataset code and ``Rollout.rollout`` loop driving ``gem_adapters.rl2.ResetStepEnv`` (the RL2
adapter's CPU path; the fixtures are the RL2 adapter tests', see ``tests/interop/conftest.py``) with a
scripted policy behind a fake SGLang router. The rewards rl-square writes into its tensors equal verifiers'
own: ``Task.score`` for the single-turn taskset, and ``SingleAgentEnv.run_episode`` (its harness, its
interception server, a scripted OpenAI-compatible server on loopback) for the multi-turn and tool ones."""

from __future__ import annotations

import asyncio
import json

import pytest

vf = pytest.importorskip("verifiers.v1")
pytest.importorskip("RL2.datasets", reason="needs rl-square==0.0.2 (nox -s interop installs it)")

from test_verifiers import modules, multi_turn_modules, scripted_openai_server, verifiers_reward  # noqa: E402,F401  (fixtures: the verifiers tests' own)

from gem_adapters.rl2 import ResetStepEnv  # noqa: E402
from gem_adapters.rl2.make_dataset import make_dataset  # noqa: E402
from gem_core import make  # noqa: E402
from gem_core.rows import write_jsonl  # noqa: E402
from gem_core.testing import ScriptedPolicy  # noqa: E402

CALL = {"role": "assistant", "content": None,
        "tool_calls": [{"id": "call-1", "type": "function", "function": {"name": "add", "arguments": json.dumps({"a": 20, "b": 22})}}]}
CALL_TEXT = '<tool_call>{"name": "add", "arguments": {"a": 20, "b": 22}}</tool_call>'  # the same call, as the policy writes it


def turn_rewards(tensor_dict) -> list[float]:
    """rl-square puts each turn's reward on that turn's last action token."""
    mask, rewards = tensor_dict["action_mask"].tolist(), tensor_dict["rewards"].tolist()
    return [rewards[i] for i in range(len(mask)) if mask[i] and (i + 1 == len(mask) or not mask[i + 1])]


def seed_of(env_id: str, index: int, **kwargs) -> int:
    env = make(env_id, **kwargs)
    try:
        return next(s for s in range(50) if env.reset(seed=s)[1]["task_index"] == index)
    finally:
        env.close()


def native_rollout_reward(harness: str, index: int, replies: list, server, monkeypatch) -> float:
    """The reward of verifiers' own rollout (SingleAgentEnv.run_episode with this harness) for these model replies."""
    from verifiers.v1.envs.single_agent import SingleAgentEnv, SingleAgentEnvConfig

    monkeypatch.setenv("GEM_TEST_OPENAI_KEY", "not-a-secret")
    env = SingleAgentEnv(SingleAgentEnvConfig(taskset={"id": "gem_test_quiz"}, agent={"harness": {"id": harness}, "runtime": {"type": "subprocess"}}))
    ctx = vf.ModelContext(model="scripted", client=vf.EvalClientConfig(base_url=server["url"], api_key_var="GEM_TEST_OPENAI_KEY"))

    async def play():
        await env.start()
        try:
            return await env.run_episode(list(env.taskset)[index], ctx)
        finally:
            await env.stop()

    server["replies"].extend(replies)
    episode = asyncio.run(play())
    assert episode.ok and not episode.errors and not server["replies"], f"{harness}: verifiers' rollout took every reply"
    (trace,) = episode.traces
    assert trace.num_turns == len(replies)
    return trace.reward


def test_single_turn_multi_turn_and_tool_tasksets_play_in_rl_square_s_rollout_with_verifiers_own_rewards(
        tokenizer, fake_router, rl_square, multi_turn_modules, scripted_openai_server, monkeypatch, tmp_path, open_envs):  # noqa: F811
    from omegaconf import OmegaConf
    from RL2.datasets import RLDataset

    quiz = "verifiers:gem_test_quiz"
    # (env id, env kwargs, task index, the policy's actions, verifiers' own per-turn rewards for them)
    cases = [("verifiers:gem_test_sum", {}, 1, [reply], [verifiers_reward("gem_test_sum", 1, reply)]) for reply in ("70", "71")]
    for actions in (["maybe 41", "final 42"], ["40", "41", "43"]):
        reward = native_rollout_reward("gem_test_retry_harness", 1, actions, scripted_openai_server, monkeypatch)
        cases.append((quiz, {"harness": "gem_test_retry_harness"}, 1, actions, [0.0] * (len(actions) - 1) + [reward]))
    reward = native_rollout_reward("gem_test_tool_harness", 1, [CALL, "42"], scripted_openai_server, monkeypatch)
    cases.append((quiz, {"harness": "gem_test_tool_harness"}, 1, [CALL_TEXT, "42"], [0.0, reward]))
    assert [c[4] for c in cases] == [[1.5], [0.5], [0.0, 1.0], [0.0, 0.0, 0.0], [0.0, 1.0]]  # the inputs make the rewards differ

    rows = [row for env_id, kwargs, index, _, _ in cases
            for row in make_dataset(env_id, 1, seed_start=seed_of(env_id, index, **kwargs), env_kwargs=kwargs)]
    write_jsonl(rows, tmp_path / "train.jsonl")  # read back by rl-square's own RLDataset, as train_data.path is
    dataset = RLDataset(OmegaConf.create({"path": str(tmp_path / "train.jsonl"), "responses_per_prompt": 1}), tokenizer)
    checked = open_envs.made

    async def play(sample, actions):
        env = ResetStepEnv(tokenizer)
        async with fake_router(ScriptedPolicy(tokenizer, actions)) as (url, requests):
            tensor_dicts, metric = await rl_square(url, env, max_turns=5, max_new_tokens=256).rollout(sample, train=True)
        return env, tensor_dicts, metric, len(requests)

    for i, (env_id, kwargs, _, actions, expected) in enumerate(cases):
        (sample,) = dataset.collate_fn([dataset[i]])
        env, tensor_dicts, metric, n_requests = asyncio.run(play(sample, actions))
        label = f"{env_id} {kwargs} {actions}"
        assert len(tensor_dicts) == 1, label
        assert turn_rewards(tensor_dicts[0]) == pytest.approx(expected), label
        assert metric["n_turns"] == [len(actions)] == [n_requests], label
        assert len(env.episodes) == 0, f"{label}: the episode ended where verifiers' rollout ended"
    assert open_envs.made - checked == len(cases) and open_envs.open == 0
