"""GEM rows and verl's own ``single_turn_agent`` rows in one batch, through verl's real AgentLoopWorker
(legacy ``generate_sequences`` + ``_postprocess``), and chunks of each merged by ``DataProto.concat`` as
``AgentLoopManager.generate_sequences`` merges its workers' chunks; also the v1 worker's stored fields.

The single-turn rows are scored the way verl scores them inside the worker: a reward-loop worker handle
(``compute_score.remote(data)``), standing in for verl's Ray actor, answers a score and a
``reward_extra_info`` (what a ``compute_score`` returning a dict gives).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

pytest.importorskip("verl.experimental.agent_loop", reason='the verl adapter tests need `pip install -e ".[verl]"`')

from verl.experimental.agent_loop.agent_loop import AgentLoopWorker
from verl.protocol import DataProto
from verl.utils.dataset.rl_dataset import collate_fn

from gem_adapters.verl.agent_loop import GEM_EXTRAS_KEY

GEM_METRIC_KEYS = {"gem_episodes", "gem_success", "gem_return", "gem_turns"}


class _ComputeScore:
    def __init__(self, calls: list[int], extra_info: dict[str, Any]):
        self.calls, self.extra_info = calls, extra_info

    async def remote(self, data: DataProto) -> dict[str, Any]:
        self.calls.append(len(data))
        return {"reward_score": 0.25, "reward_extra_info": dict(self.extra_info)}


class RewardLoopHandle:
    """verl's reward-loop worker handle: ``await handle.compute_score.remote(data)``. The default extra info
    is what verl's naive reward manager returns for a float score (``{"acc": score}``)."""

    def __init__(self, extra_info: dict[str, Any] | None = None):
        self.calls: list[int] = []
        self.compute_score = _ComputeScore(self.calls, extra_info or {"acc": 1.0})


@pytest.fixture(scope="module")
def worker_config(tmp_path_factory, tiny_model, tiny_tokenizer, make_trainer_config):
    from omegaconf import open_dict

    path = tmp_path_factory.mktemp("tiny_model")
    tiny_model.save_pretrained(path)
    tiny_tokenizer.save_pretrained(path)
    config = make_trainer_config(response_length=48)
    with open_dict(config):
        config.actor_rollout_ref.model.path = str(path)
        config.trainer.use_v1 = False  # the legacy worker's _postprocess is the one that merges rows here
    return config


def rows(make_row, agents: list[str]) -> DataProto:
    batch = [{**make_row("game:GuessTheNumber-v0", i, index=i), "agent_name": agent} for i, agent in enumerate(agents)]
    return DataProto.from_single_dict(collate_fn(batch))


async def generate(worker_config, model_server, make_row, agents: list[str]) -> tuple[DataProto, RewardLoopHandle]:
    handle = RewardLoopHandle()
    worker = AgentLoopWorker(worker_config, model_server, reward_loop_worker_handles=[handle])
    return await worker.generate_sequences(rows(make_row, agents)), handle


def assert_gem_metrics_kept(out: DataProto, agents: list[str], seeds: list[int]) -> None:
    extras = out.non_tensor_batch[GEM_EXTRAS_KEY]
    for i, agent in enumerate(agents):
        if agent == "gem_env":
            assert GEM_METRIC_KEYS <= set(extras[i]["metrics"]), extras[i]
            assert extras[i]["metrics"]["gem_episodes"] == 1.0
            assert extras[i]["env_id"] == "game:GuessTheNumber-v0" and extras[i]["env_seed"] == seeds[i]
            assert len(extras[i]["turn_spans"]) == len(out.non_tensor_batch["turn_scores"][i]) > 0
        else:
            assert extras[i] is None


@pytest.mark.parametrize("agents", [["gem_env", "single_turn_agent"], ["single_turn_agent", "gem_env"]], ids=["gem_first", "gem_second"])
async def test_legacy_worker_merges_gem_and_single_turn_rows_in_either_order(worker_config, model_server, make_row, agents):
    out, handle = await generate(worker_config, model_server, make_row, agents)

    assert handle.calls == [1], "only the single-turn row is scored by verl's reward loop"
    assert len(out) == 2 and "rm_scores" in out.batch.keys()
    scores = out.batch["rm_scores"].sum(-1).tolist()
    for i, agent in enumerate(agents):
        if agent == "single_turn_agent":
            assert scores[i] == pytest.approx(0.25)
        else:
            assert scores[i] == pytest.approx(sum(out.non_tensor_batch["turn_scores"][i]))
    assert_gem_metrics_kept(out, agents, [0, 1])
    # verl's legacy _postprocess lifts the first row's reward_extra_info keys and reads them from every row:
    # both loops' rows carry `acc` (verl's reward manager writes it; GEM: 1.0 on success).
    assert list(out.meta_info["reward_extra_keys"]) == ["acc"]
    extras = out.non_tensor_batch[GEM_EXTRAS_KEY]
    expected_acc = [1.0 if agent == "single_turn_agent" else extras[i]["metrics"]["gem_success"] for i, agent in enumerate(agents)]
    assert out.non_tensor_batch["acc"].tolist() == expected_acc


async def test_legacy_worker_gem_row_answers_none_for_another_loops_reward_keys(worker_config, model_server, make_row):
    handle = RewardLoopHandle(extra_info={"acc": 1.0, "pred": "42"})  # a compute_score returning a dict
    worker = AgentLoopWorker(worker_config, model_server, reward_loop_worker_handles=[handle])
    out = await worker.generate_sequences(rows(make_row, ["single_turn_agent", "gem_env"]))
    assert list(out.meta_info["reward_extra_keys"]) == ["acc", "pred"]
    assert out.non_tensor_batch["pred"].tolist() == ["42", None]
    assert_gem_metrics_kept(out, ["single_turn_agent", "gem_env"], [0, 1])


def legacy_config(worker_config, tmp_path, *, entry: dict[str, Any] | None = None, reward_model: bool = False):
    """The legacy worker's config with extra keys in the ``gem_env`` YAML entry, or with a reward model that
    verl runs outside the agent-loop workers (``reward_model.enable`` without its own resource pool: then
    the workers get no reward loop and other loops' rows come back unscored)."""
    import yaml
    from omegaconf import open_dict

    config = worker_config.copy()
    with open_dict(config):
        if entry:
            entries = yaml.safe_load(open(config.actor_rollout_ref.rollout.agent.agent_loop_config_path))
            path = tmp_path / "agent_loops.yaml"
            path.write_text(yaml.safe_dump([{**e, **entry} if e["name"] == "gem_env" else e for e in entries]))
            config.actor_rollout_ref.rollout.agent.agent_loop_config_path = str(path)
        if reward_model:
            config.reward.reward_model.enable = True
            config.reward.reward_model.enable_resource_pool = False
    return config


async def test_legacy_worker_without_a_reward_loop_merges_a_gem_first_chunk(worker_config, model_server, make_row, tmp_path):
    # Issue 47: GEM's row carried `acc`; verl's _postprocess read it from the unscored single-turn row: KeyError 'acc'.
    config = legacy_config(worker_config, tmp_path, reward_model=True)
    worker = AgentLoopWorker(config, model_server)  # what verl builds when the reward model is colocated
    agents = ["gem_env", "single_turn_agent"]
    out = await worker.generate_sequences(rows(make_row, agents))

    assert len(out) == 2 and "acc" not in out.non_tensor_batch
    assert "rm_scores" not in out.batch.keys()  # the single-turn row is scored later, by the trainer
    assert_gem_metrics_kept(out, agents, [0, 1])


@pytest.mark.parametrize("agents", [["gem_env", "single_turn_agent"], ["single_turn_agent", "gem_env"]], ids=["gem_first", "gem_second"])
async def test_legacy_worker_merges_gem_rows_with_a_reward_function_returning_a_dict(
    worker_config, model_server, make_row, tmp_path, agents
):
    # Issue 47: with a dict from compute_score the other rows carry its keys and no `acc`; GEM rows carry the
    # keys reward_extra_keys names: `score` is the episode return, a key GEM has no value for is None.
    config = legacy_config(worker_config, tmp_path, entry={"reward_extra_keys": ["score", "pred"]})
    handle = RewardLoopHandle(extra_info={"score": 0.25, "pred": "42"})
    worker = AgentLoopWorker(config, model_server, reward_loop_worker_handles=[handle])
    out = await worker.generate_sequences(rows(make_row, agents))

    assert list(out.meta_info["reward_extra_keys"]) == ["score", "pred"]
    gem = agents.index("gem_env")
    expected_score = [0.25, 0.25]
    expected_score[gem] = sum(out.non_tensor_batch["turn_scores"][gem])
    assert out.non_tensor_batch["score"].tolist() == pytest.approx(expected_score)
    assert out.non_tensor_batch["pred"].tolist() == [None if agent == "gem_env" else "42" for agent in agents]
    assert_gem_metrics_kept(out, agents, [0, 1])


async def test_manager_concat_of_a_gem_chunk_and_a_chunk_scored_by_a_dict_reward_function(worker_config, model_server, make_row, tmp_path):
    config = legacy_config(worker_config, tmp_path, entry={"reward_extra_keys": ["score", "pred"]})
    chunks = []
    for agent in ("gem_env", "single_turn_agent"):
        worker = AgentLoopWorker(config, model_server, reward_loop_worker_handles=[RewardLoopHandle({"score": 0.25, "pred": "42"})])
        chunk = await worker.generate_sequences(rows(make_row, [agent]))
        chunk.meta_info.pop("metrics")
        chunks.append(chunk)

    out = DataProto.concat(chunks)  # verl asserts every chunk lifted the same reward_extra_keys

    assert list(out.meta_info["reward_extra_keys"]) == ["score", "pred"] and out.non_tensor_batch["pred"].tolist() == [None, "42"]


async def test_legacy_loop_with_a_custom_reward_function_warns_which_keys_to_set(worker_config, model_server, make_agent_loop, tmp_path):
    from omegaconf import open_dict

    config = legacy_config(worker_config, tmp_path)
    with open_dict(config):
        config.reward.custom_reward_function.path = str(tmp_path / "reward.py")

    with pytest.warns(UserWarning, match=r"reward_extra_keys.*trainer\.use_v1=True"):
        loop = make_agent_loop(model_server, config)
    assert loop.reward_extra_keys == ("acc",)


@pytest.mark.parametrize("gem_chunk_first", [True, False], ids=["gem_chunk_first", "gem_chunk_second"])
async def test_manager_concat_of_a_gem_chunk_and_a_single_turn_chunk(worker_config, model_server, make_row, gem_chunk_first):
    gem, _ = await generate(worker_config, model_server, make_row, ["gem_env"])
    stock, _ = await generate(worker_config, model_server, make_row, ["single_turn_agent"])
    chunks = [gem, stock] if gem_chunk_first else [stock, gem]
    for chunk in chunks:
        chunk.meta_info.pop("metrics")  # AgentLoopManager pops them before merging meta_info

    out = DataProto.concat(chunks)  # what AgentLoopManager.generate_sequences does with its workers' chunks

    assert len(out) == 2
    assert all(len(values) == 2 for values in out.non_tensor_batch.values())
    agents = ["gem_env", "single_turn_agent"] if gem_chunk_first else ["single_turn_agent", "gem_env"]
    assert_gem_metrics_kept(out, agents, [0, 0])


@pytest.mark.parametrize("agents", [["gem_env", "single_turn_agent"], ["single_turn_agent", "gem_env"]], ids=["gem_first", "gem_second"])
async def test_v1_worker_stores_gem_and_single_turn_rows_with_gem_metrics_in_reward_extra_info(
    worker_config, model_server, make_row, sampling_params, monkeypatch, agents
):
    tq = pytest.importorskip("transfer_queue", reason="verl's v1 trainer needs TransferQueue (verl[verl-core])")
    from omegaconf import open_dict
    from verl.trainer.ppo.v1 import agent_loop_tq
    from verl.utils.tensordict_utils import list_of_dict_to_tensordict

    stored = []

    def capture(fields):
        stored.extend(fields)
        return list_of_dict_to_tensordict(fields)

    async def kv_batch_put(keys, fields, tags, partition_id):
        pass

    monkeypatch.setattr(agent_loop_tq, "list_of_dict_to_tensordict", capture)
    monkeypatch.setattr(tq, "async_kv_batch_put", kv_batch_put)
    config = worker_config.copy()
    with open_dict(config):
        config.trainer.use_v1 = True
    worker_cls = agent_loop_tq.AgentLoopWorkerTQ.__ray_actor_class__
    worker = worker_cls.__new__(worker_cls)  # the TransferQueue client setup of __init__ needs a TQ server
    AgentLoopWorker.__init__(worker, config, model_server, reward_loop_worker_handles=[RewardLoopHandle()])
    for i, agent in enumerate(agents):
        trajectory = {"step": 0, "sample_index": i, "rollout_n": 0, "validate": True}
        await worker._run_agent_loop(
            sampling_params, trajectory=trajectory, trace=False, agent_name=agent, session_id=0, global_steps=0,
            **make_row("game:GuessTheNumber-v0", i, index=i),
        )

    # The v1 trainer reads the rows' extra_fields back together (kv_batch_get(select_fields=["extra_fields"]))
    # and merges reward_extra_info row by row, filling keys a row lacks with None.
    rows_back = list_of_dict_to_tensordict([{"extra_fields": field["extra_fields"]} for field in stored])["extra_fields"]
    for agent, extra in zip(agents, rows_back, strict=True):
        extra = getattr(extra, "data", extra)
        info = extra["reward_extra_info"]
        if agent == "gem_env":
            assert GEM_METRIC_KEYS <= set(info) and info["acc"] == info["gem_success"]
            assert info["gem_episodes"] == 1.0 and extra[GEM_EXTRAS_KEY]["metrics"]["gem_episodes"] == 1.0
        else:
            assert dict(info) == {"acc": 1.0}
