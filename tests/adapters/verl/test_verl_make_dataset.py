"""The dataset builder's parquet, read by verl's own RLHFDataset and fed to GemAgentLoop as verl's worker feeds it."""

from __future__ import annotations

import subprocess
import sys

import pytest

pytest.importorskip("verl.experimental.agent_loop", reason='the verl adapter tests need `pip install -e ".[verl]"`')

from verl.protocol import DataProto
from verl.utils.dataset.rl_dataset import RLHFDataset, collate_fn

import gem_core
from gem_adapters.verl.__main__ import main


@pytest.fixture()
def train_parquet(tmp_path):
    out = tmp_path / "train.parquet"
    main(["--env", "game:Wordle-v0-easy", "--n", "4", "--seed-start", "10", "--out", str(out)])
    return out


def test_rlhf_dataset_reads_the_rows_with_first_observation_and_episode_keys(train_parquet, trainer_config, tiny_tokenizer):
    dataset = RLHFDataset(data_files=str(train_parquet), tokenizer=tiny_tokenizer, config=trainer_config.data)
    assert len(dataset) == 4
    for i in range(4):
        row = dataset[i]
        env = gem_core.make("game:Wordle-v0-easy")
        observation, _ = env.reset(seed=10 + i)
        assert row["raw_prompt"] == [{"role": "user", "content": observation}]
        assert row["agent_name"] == "gem_env" and row["data_source"] == "game:Wordle-v0-easy"
        assert row["reward_model"]["ground_truth"] == ""
        assert row["extra_info"]["env_id"] == "game:Wordle-v0-easy"
        assert row["extra_info"]["seed"] == 10 + i and row["index"] == i


async def test_a_collated_dataset_batch_runs_through_the_agent_loop(train_parquet, trainer_config, tiny_tokenizer, make_agent_loop, model_server, sampling_params):
    dataset = RLHFDataset(data_files=str(train_parquet), tokenizer=tiny_tokenizer, config=trainer_config.data)
    batch = DataProto.from_single_dict(collate_fn([dataset[0], dataset[1]]))
    # AgentLoopWorker.generate_sequences: one run per sample with that sample's non-tensor columns.
    for i in range(len(batch)):
        row = {k: v[i] for k, v in batch.non_tensor_batch.items() if k != "agent_name"}
        out = await make_agent_loop(model_server, max_turns=1, max_new_tokens=6).run(sampling_params, **row)
        assert out.extra_fields["extras"]["env_id"] == "game:Wordle-v0-easy" and out.extra_fields["extras"]["env_seed"] == 10 + i


def test_env_kwargs_reach_the_env(tmp_path, trainer_config, tiny_tokenizer):
    out = tmp_path / "d.parquet"
    main(["--env", "game:Wordle-v0", "--n", "1", "--env-kwargs", '{"max_turns": 2}', "--out", str(out)])
    row = RLHFDataset(data_files=str(out), tokenizer=tiny_tokenizer, config=trainer_config.data)[0]
    assert "at most 2 guesses" in row["raw_prompt"][0]["content"]
    assert row["extra_info"]["env_kwargs"] == '{"max_turns": 2}'


def test_unknown_env_id_names_the_closest_ids(tmp_path, capsys):
    with pytest.raises(SystemExit) as ended:  # a usage error: exit 2, one line naming the fix, no traceback
        main(["--env", "game:Wordel-v0", "--n", "2", "--out", str(tmp_path / "x.parquet")])
    err = capsys.readouterr().err
    assert ended.value.code == 2 and "game:Wordle-v0" in err and err.count("\n") == 1, err
    assert not (tmp_path / "x.parquet").exists()


def test_env_kwargs_that_are_not_a_json_object_are_refused(tmp_path, capsys):
    with pytest.raises(SystemExit) as ended:
        main(["--env", "game:Wordle-v0", "--n", "1", "--env-kwargs", "max_turns=2", "--out", str(tmp_path / "x.parquet")])
    assert ended.value.code == 2 and "JSON object" in capsys.readouterr().err


def test_module_runs_from_the_command_line(tmp_path):
    out = tmp_path / "cli.parquet"
    done = subprocess.run(
        [sys.executable, "-m", "gem_adapters.verl", "--env", "game:GuessTheNumber-v0", "--n", "3", "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert "wrote 3 rows" in done.stdout and out.exists()


def test_a_vision_env_is_refused_when_the_dataset_is_built(tmp_path, capsys):
    """verl's adapter carries no images (no processor, no multi_modal_data): refuse before any training starts."""
    with pytest.raises(SystemExit) as ended:
        main(["--env", "vision:ChartQA-v0", "--n", "1", "--out", str(tmp_path / "v.parquet")])
    err = capsys.readouterr().err
    assert ended.value.code == 2 and "vision:ChartQA-v0" in err and "images" in err and err.count("\n") == 1, err
    assert not (tmp_path / "v.parquet").exists()


def test_make_dataset_refuses_a_vision_env():
    from gem_adapters.verl import make_dataset
    from gem_core.errors import InvalidArgument

    with pytest.raises(InvalidArgument, match=r"vision:ChartQA-v0.*images"):
        make_dataset("vision:ChartQA-v0", 1)


@pytest.mark.parametrize("name", ["", "   "])
def test_an_empty_agent_name_is_refused(tmp_path, capsys, name):
    with pytest.raises(SystemExit) as ended:
        main(["--env", "game:Wordle-v0", "--n", "1", f"--agent-name={name}", "--out", str(tmp_path / "x.parquet")])
    err = capsys.readouterr().err
    assert ended.value.code == 2 and "--agent-name" in err and err.count("\n") == 1, err
    assert not (tmp_path / "x.parquet").exists()
