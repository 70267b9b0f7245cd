"""A task sampler through verl's real agent-loop workers (in-process, without Ray): the ``rollout.n`` copies of a
prompt (one ``uid``) play one drawn episode, finished episodes update the sampler, its state lands in
``state_dir``, and rows of the entry without ``curriculum`` (validation) keep their own episodes."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("verl.experimental.agent_loop", reason='the verl adapter tests need `pip install -e ".[verl]"`')

from omegaconf import OmegaConf, open_dict
from verl.experimental.agent_loop.agent_loop import AgentLoopWorker
from verl.protocol import DataProto
from verl.utils.dataset.rl_dataset import collate_fn

from gem_core.curriculum import SAMPLER_STATE_FILE, shared_group_starts

from gem_adapters.verl.config import AGENT_LOOP_YAML

#: Two short tasks the dataset rows (Wordle) never name: an episode's env shows where its start came from.
TASKS = [
    {"env_id": "game:GuessTheNumber-v0-easy", "env_kwargs": {"max_turns": 2}},
    {"env_id": "game:Mastermind-v0-easy", "env_kwargs": {"max_turns": 2}},
]
NAMES = {"game:GuessTheNumber-v0-easy[max_turns=2]", "game:Mastermind-v0-easy[max_turns=2]"}


@pytest.fixture()
def curriculum_config(tmp_path, tiny_model, tiny_tokenizer, make_trainer_config):
    """verl's config with rollout.n copies, the tiny model on disk, and an agent-loop YAML holding the shipped
    ``gem_env`` entry plus a ``gem_curriculum`` entry with a task sampler (state kept under ``tmp_path``)."""

    def build(n: int):
        model = tmp_path / "model"
        tiny_model.save_pretrained(model)
        tiny_tokenizer.save_pretrained(model)
        entries = OmegaConf.load(AGENT_LOOP_YAML)
        curriculum = OmegaConf.create({**OmegaConf.to_container(entries[0]), "name": "gem_curriculum", "max_new_tokens": 8})
        spec = {"tasks": TASKS, "seed": 3, "min_episodes": 2, "window": 8, "state_dir": str(tmp_path / "sampler")}
        curriculum.curriculum = spec
        yaml = tmp_path / "agent_loops.yaml"
        OmegaConf.save(OmegaConf.create([*entries, curriculum]), yaml)
        config = make_trainer_config(response_length=48)
        with open_dict(config):
            config.actor_rollout_ref.model.path = str(model)
            config.actor_rollout_ref.rollout.n = n
            config.actor_rollout_ref.rollout.agent.agent_loop_config_path = str(yaml)
        return config, spec

    return build


def task_of(extras: dict) -> tuple[str, str, int]:
    return extras["task"], extras["env_id"], extras["env_seed"]


async def test_legacy_worker_gives_the_copies_of_a_uid_one_drawn_start_and_the_sampler_learns(
    curriculum_config, model_server, make_row, tmp_path
):
    config, spec = curriculum_config(n=2)
    worker = AgentLoopWorker(config, model_server)
    # As verl's legacy trainer hands them over: each prompt repeated rollout.n times, copies sharing a uid.
    rows = []
    for index in (0, 0, 1, 1):
        rows.append({**make_row("game:Wordle-v0", 40 + index, index=index), "agent_name": "gem_curriculum"})
    rows.append({**make_row("game:Wordle-v0", 7, index=9), "agent_name": "gem_env"})  # a validation row
    out = await worker.generate_sequences(DataProto.from_single_dict(collate_fn(rows)))

    played = [task_of(extras) for extras in out.non_tensor_batch["extras"]]
    assert played[0] == played[1] and played[2] == played[3] and played[0] != played[2]
    assert {name for name, _, _ in played[:4]} <= NAMES
    assert played[4] == ("game:Wordle-v0", "game:Wordle-v0", 7), "a row of the entry without curriculum keeps its label"

    starts = shared_group_starts(spec, 2)  # the one the worker's agent loops share in this process
    sampler = starts.sampler
    assert sampler.draws == 2
    for task in sampler.tasks:
        assert sampler.stats(task).episodes == sum(name == task.name for name, _, _ in played[:4])
    saved = json.loads((tmp_path / "sampler" / SAMPLER_STATE_FILE).read_text())
    assert saved == sampler.state_dict()


async def test_v1_worker_runs_rollout_n_sessions_of_one_drawn_start(curriculum_config, server_for, tiny_tokenizer, make_row, monkeypatch):
    tq = pytest.importorskip("transfer_queue", reason="verl's v1 trainer needs TransferQueue (verl[verl-core])")
    from verl.trainer.ppo.v1 import agent_loop_tq
    from verl.utils.tensordict_utils import list_of_dict_to_tensordict

    from gem_core.testing import ScriptedPolicy

    stored = []

    def capture(fields):
        stored.extend(fields)
        return list_of_dict_to_tensordict(fields)

    async def no_op(*args, **kwargs):
        pass

    monkeypatch.setattr(agent_loop_tq, "list_of_dict_to_tensordict", capture)
    monkeypatch.setattr(tq, "async_kv_batch_put", no_op)
    monkeypatch.setattr(tq, "async_kv_put", no_op)
    config, spec = curriculum_config(n=3)
    worker_cls = agent_loop_tq.AgentLoopWorkerTQ.__ray_actor_class__
    worker = worker_cls.__new__(worker_cls)  # the TransferQueue client setup of __init__ needs a TQ server
    AgentLoopWorker.__init__(worker, config, server_for(ScriptedPolicy(tiny_tokenizer, ["\\boxed{1}", "\\boxed{2}"])))
    sampling_params = {"temperature": 1.0, "top_p": 1.0, "top_k": -1, "repetition_penalty": 1.0, "logprobs": True}
    for index in (0, 1):  # v1 hands the worker each prompt once; it runs rollout.n sessions of it
        prompt = {**make_row("game:Wordle-v0", 40 + index, index=index), "agent_name": "gem_curriculum", "global_steps": 0}
        trajectory = {"step": 0, "sample_index": index, "rollout_n": 0, "validate": False}
        await worker._run_prompt(prompt, sampling_params, trajectory)

    assert [(f["uid"], f["session_id"]) for f in stored] == [(f"uid-{i}", s) for i in (0, 1) for s in range(3)]
    played = [task_of(f["extra_fields"]["extras"]) for f in stored]
    assert len(set(played[:3])) == 1 and len(set(played[3:])) == 1 and played[0] != played[3]
    sampler = shared_group_starts(spec, 3).sampler
    assert sampler.draws == 2 and sum(sampler.stats(t).episodes for t in sampler.tasks) == 6
