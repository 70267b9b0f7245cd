"""GemAgentLoop inside verl's real AgentLoopWorker classes (run in-process, without Ray): the worker reads the
agent loop YAML, instantiates the loop per sample and post-processes its output as in training."""

from __future__ import annotations

import numpy as np
import pytest
import torch

pytest.importorskip("verl.experimental.agent_loop", reason='the verl adapter tests need `pip install -e ".[verl]"`')

from verl.experimental.agent_loop.agent_loop import AgentLoopWorker
from verl.protocol import DataProto
from verl.trainer.config import AlgoConfig
from verl.utils.dataset.rl_dataset import collate_fn

import gem_core
from gem_core.rollout.advantages import discounted_returns, return_batch_normalize, turn_to_token_advantages
from gem_core.testing import ScriptedPolicy


@pytest.fixture(scope="module")
def worker_config(tmp_path_factory, tiny_model, tiny_tokenizer, make_trainer_config):
    """verl's config pointing at the tiny model on disk (the worker loads tokenizer and model type from it)."""
    from omegaconf import open_dict

    path = tmp_path_factory.mktemp("tiny_model")
    tiny_model.save_pretrained(path)
    tiny_tokenizer.save_pretrained(path)
    config = make_trainer_config(response_length=48)  # the YAML's 256 tokens per turn: one long turn per episode
    with open_dict(config):
        config.actor_rollout_ref.model.path = str(path)
    return config


def scripted_wordle(tokenizer, seed: int):
    env = gem_core.make("game:Wordle-v0")
    env.reset(seed=seed)
    target = env.target
    partial = target[:2] + "".join("z" if c == "q" else "q" for c in target[2:])
    return ScriptedPolicy(tokenizer, [f"\\boxed{{{partial}}}", "no box", f"\\boxed{{{target}}}"])


async def test_legacy_worker_generate_sequences_runs_gem_rows(worker_config, model_server, make_row):
    worker = AgentLoopWorker(worker_config, model_server)
    assert worker.hf_model_type == "qwen2"  # the tiny model's type, passed to the loop as in training
    rows = [{**make_row("game:Wordle-v0", seed, index=seed), "agent_name": "gem_env"} for seed in (0, 1)]
    out = await worker.generate_sequences(DataProto.from_single_dict(collate_fn(rows)))

    response_length = worker_config.actor_rollout_ref.rollout.response_length
    assert out.batch["responses"].shape == (2, response_length)
    assert "rollout_log_probs" in out.batch.keys() and "rm_scores" in out.batch.keys()
    assert [e["env_seed"] for e in out.non_tensor_batch["extras"]] == [0, 1]
    # The legacy (v0) worker pads outputs itself: the episode return sits on the last response token.
    for i, turn_scores in enumerate(out.non_tensor_batch["turn_scores"]):
        last = int(out.batch["attention_mask"][i, -response_length:].sum()) - 1
        assert float(out.batch["rm_scores"][i, last]) == pytest.approx(sum(turn_scores), abs=1e-6)


async def test_v1_worker_stores_per_turn_rm_scores_and_v1_advantages_match_core_rebn(
    worker_config, server_for, tiny_tokenizer, make_row, sampling_params, monkeypatch
):
    tq = pytest.importorskip("transfer_queue", reason="verl's v1 trainer needs TransferQueue (verl[verl-core])")
    from verl.trainer.ppo.v1 import agent_loop_tq
    from verl.trainer.ppo.v1.utils import compute_advantage_for_multi_trajectories
    from verl.utils.tensordict_utils import list_of_dict_to_tensordict

    import gem_adapters.verl.advantage  # noqa: F401  (in verl's trainer process the `verl.plugins` entry point does this)

    stored = []  # the field dicts the worker hands to TransferQueue, one per trajectory

    def capture(fields):
        stored.extend(fields)
        return list_of_dict_to_tensordict(fields)

    async def kv_batch_put(keys, fields, tags, partition_id):
        pass

    monkeypatch.setattr(agent_loop_tq, "list_of_dict_to_tensordict", capture)
    monkeypatch.setattr(tq, "async_kv_batch_put", kv_batch_put)
    worker_cls = agent_loop_tq.AgentLoopWorkerTQ.__ray_actor_class__
    for seed in (11, 12, 13):
        worker = worker_cls.__new__(worker_cls)  # the TransferQueue client setup of __init__ needs a TQ server
        AgentLoopWorker.__init__(worker, worker_config, server_for(scripted_wordle(tiny_tokenizer, seed)))
        row = make_row("game:Wordle-v0", seed, index=seed)
        trajectory = {"step": 0, "sample_index": seed, "rollout_n": 0, "validate": False}
        await worker._run_agent_loop(
            sampling_params, trajectory=trajectory, trace=False, agent_name="gem_env", session_id=0, global_steps=0, **row
        )
    assert len(stored) == 3
    keys = [f"{field['uid']}_0_0" for field in stored]  # the worker's TransferQueue keys: {uid}_{session}_{index}

    # Per-turn placement: each turn's reward on its last sampled token.
    for field in stored:
        rm_scores, mask = field["rm_scores"], field["response_mask"]
        extra = field["extra_fields"]
        ends = [end - 1 for _, end in extra["extras"]["turn_spans"]]
        assert np.flatnonzero(rm_scores.numpy()).tolist() == ends
        assert rm_scores[ends].tolist() == pytest.approx(extra["turn_scores"])
        assert all(int(mask[e]) == 1 for e in ends)

    # The v1 trainer's advantage step (PPOTrainer._compute_advantage): the stored jagged rows, padded by
    # tensordict, rm_scores -> token_level_scores -> token_level_rewards, then verl's estimator dispatch.
    batch = list_of_dict_to_tensordict(stored).select("response_mask", "rm_scores").to_padded_tensor()
    data = DataProto(batch=batch)
    data.batch["token_level_scores"] = data.batch["rm_scores"]
    data.batch["token_level_rewards"] = data.batch["token_level_scores"]
    data.non_tensor_batch["uid"] = np.array([f["uid"] for f in stored], dtype=object)
    width = data.batch["response_mask"].shape[1]
    data = compute_advantage_for_multi_trajectories(
        data, batch_keys=keys, adv_estimator="gem_rebn", gamma=0.8, config=AlgoConfig(gamma=0.8)
    )
    returns = [discounted_returns(field["extra_fields"]["turn_scores"], 0.8) for field in stored]
    normalized = return_batch_normalize(np.concatenate(returns))
    offset = 0
    for i, (field, g) in enumerate(zip(stored, returns)):
        spans = [tuple(s) for s in field["extra_fields"]["extras"]["turn_spans"]]
        expected = turn_to_token_advantages(normalized[offset : offset + len(g)], spans, width)
        np.testing.assert_allclose(data.batch["advantages"][i].numpy(), expected, rtol=1e-5, atol=1e-6)
        offset += len(g)


class _PaysEachTurnEnv(gem_core.Env):
    """Pays 1.0 every turn; never ends by itself."""

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        return "Say something.", {}

    def step(self, action):
        return "Good, again.", 1.0, False, False, {}

    def sample_random_action(self):
        return "x"


_PAYS_ENV_ID = "verltest:PaysEachTurn-v0"
if _PAYS_ENV_ID not in gem_core.list_envs():
    gem_core.register(_PAYS_ENV_ID, _PaysEachTurnEnv)


async def test_legacy_worker_puts_the_return_of_a_length_cut_episode_on_a_sampled_token(worker_config, tiny_tokenizer, make_row):
    """The legacy worker writes the return on the last response token; after a turn cut by length that token must
    still be a sampled one, or verl's GAE (which skips mask-0 tokens) loses the whole return."""
    from verl.trainer.ppo.core_algos import compute_gae_advantage_return
    from verl.workers.rollout.replica import TokenOutput

    from gem_core.rollout.chat_template import ChatTemplate

    hello = tiny_tokenizer.encode("hello", add_special_tokens=False) + list(ChatTemplate.for_tokenizer(tiny_tokenizer).end_of_turn_ids)
    filler = tiny_tokenizer.encode("a", add_special_tokens=False)[0]

    class Server:  # turn 1 ends at end-of-turn, turn 2 runs to the response budget
        calls = 0

        async def generate(self, request_id, *, prompt_ids, sampling_params, **kwargs):
            self.calls += 1
            ids = hello if self.calls == 1 else [filler] * sampling_params["max_tokens"]
            return TokenOutput(token_ids=ids, log_probs=[-0.5] * len(ids), stop_reason="completed")

    row = make_row("game:Wordle-v0", 1)
    row["extra_info"] = {**row["extra_info"], "env_id": _PAYS_ENV_ID}
    worker = AgentLoopWorker(worker_config, Server())
    out = await worker.generate_sequences(DataProto.from_single_dict(collate_fn([{**row, "agent_name": "gem_env"}])))

    rewards, mask = out.batch["rm_scores"].float(), out.batch["response_mask"].float()
    assert list(out.non_tensor_batch["turn_scores"][0]) == [1.0, 1.0]
    (position,) = torch.nonzero(rewards[0]).flatten().tolist()
    assert float(rewards[0, position]) == pytest.approx(2.0) and int(mask[0, position]) == 1
    _, returns = compute_gae_advantage_return(rewards, torch.zeros_like(rewards), mask, gamma=torch.tensor(1.0), lam=torch.tensor(1.0))
    assert returns[0][mask[0] > 0].tolist() == pytest.approx([2.0] * int(mask[0].sum()))
