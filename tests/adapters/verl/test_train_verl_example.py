"""examples/train_verl.py: its data and its `python -m verl.trainer.main_ppo` command, checked against verl's own
config composition and validation (the GPU run itself cannot happen here)."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

pytest.importorskip("verl.experimental.agent_loop", reason='the verl adapter tests need `pip install -e ".[verl]"`')

from verl.trainer.ppo.utils import need_critic, need_reference_policy
from verl.utils.config import validate_config

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "train_verl.py"


@pytest.fixture(scope="module")
def train_verl():
    spec = importlib.util.spec_from_file_location("train_verl_example", EXAMPLE)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses resolve string annotations through sys.modules
    spec.loader.exec_module(module)
    yield module
    sys.modules.pop(spec.name, None)


@pytest.fixture(scope="module")
def local_model_dir(tmp_path_factory, tiny_model, tiny_tokenizer) -> Path:
    """The tiny model saved to disk, so verl's config validation reads a local model (never the hub)."""
    path = tmp_path_factory.mktemp("tiny_model")
    tiny_model.save_pretrained(path)
    tiny_tokenizer.save_pretrained(path)
    return path


def dry_run(train_verl, tmp_path, *extra: str) -> list[str]:
    return train_verl.main(["--dry-run", "--n-train", "6", "--n-val", "2", "--data-dir", str(tmp_path), *extra])


@pytest.mark.parametrize("estimator", ["gem_rebn", "gae", "grpo"])
def test_command_composes_and_validates_in_verls_own_config(train_verl, tmp_path, estimator, local_model_dir, monkeypatch):
    from hydra import compose, initialize_config_module

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    command = dry_run(train_verl, tmp_path, "--adv-estimator", estimator, "--model", str(local_model_dir), "trainer.total_epochs=2")
    assert command[1:3] == ["-m", "verl.trainer.main_ppo"]
    with initialize_config_module("verl.trainer.config", version_base=None):
        config = compose("ppo_trainer", overrides=command[3:])  # unknown keys or bad values fail here
    validate_config(config=config, use_reference_policy=need_reference_policy(config), use_critic=need_critic(config))
    assert config.algorithm.adv_estimator == estimator and config.trainer.total_epochs == 2
    assert need_critic(config) == (estimator == "gae")
    assert Path(config.actor_rollout_ref.rollout.agent.agent_loop_config_path).is_file()
    assert config.actor_rollout_ref.rollout.response_length == config.data.max_response_length


def test_dry_run_writes_disjoint_train_and_validation_seeds(train_verl, tmp_path):
    dry_run(train_verl, tmp_path)
    train = pd.read_parquet(tmp_path / "train.parquet")
    val = pd.read_parquet(tmp_path / "val.parquet")
    assert len(train) == 6 and len(val) == 2
    train_seeds = {info["seed"] for info in train["extra_info"]}
    val_seeds = {info["seed"] for info in val["extra_info"]}
    assert train_seeds.isdisjoint(val_seeds)
    assert set(train["agent_name"]) == {"gem_env"}


def test_unknown_flags_are_refused(train_verl, tmp_path):
    with pytest.raises(SystemExit):
        dry_run(train_verl, tmp_path, "--epochs", "3")


def run_example(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(EXAMPLE), *args], capture_output=True, text=True, cwd=cwd, timeout=300)


def test_help_works_without_gpus(tmp_path):
    done = run_example("--help", cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "--adv_estimator" in done.stdout and "--dry_run" in done.stdout


def test_without_gpus_or_rollout_engine_it_says_what_is_missing_in_one_line(tmp_path):
    """This machine has no CUDA and no vLLM: the example must stop before writing data or starting Ray."""
    done = run_example("--n-train", "2", "--n-val", "1", "--data-dir", str(tmp_path / "data"), cwd=tmp_path)
    assert done.returncode == 1
    assert "Traceback" not in done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "train_verl.py needs" in lines[0] and ("vllm" in lines[0] or "CUDA" in lines[0])
    assert not (tmp_path / "data").exists()


@pytest.mark.parametrize(("argv", "loggers"), [([], ["console"]), (["--report-to", "wandb"], ["console", "wandb"]),
                                               (["--report_to", "tensorboard"], ["console", "tensorboard"])])
def test_report_to_reaches_verls_trainer_logger(train_verl, tmp_path, argv, loggers):
    """``--report-to`` sets verl's own ``trainer.logger`` in the config ``main_ppo`` composes (console always)."""
    from hydra import compose, initialize_config_module

    command = dry_run(train_verl, tmp_path, *argv)
    with initialize_config_module("verl.trainer.config", version_base=None):
        config = compose("ppo_trainer", overrides=command[3:])
    assert list(config.trainer.logger) == loggers


def test_report_to_a_logger_outside_the_three_is_refused(train_verl, tmp_path):
    with pytest.raises(SystemExit) as exited:
        dry_run(train_verl, tmp_path, "--report-to", "mlflow")
    assert exited.value.code == 2 and not any(tmp_path.iterdir())
