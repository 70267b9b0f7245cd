"""examples/train_rl2.py: its overrides checked against RL2's own ``ppo.yaml``, and its CPU behaviour.

The installed rl-square 0.0.2 ships ``RL2/trainer/config/ppo.yaml``: the reset/step command's
overrides are merged into it in OmegaConf's struct mode (what Hydra does), so a key RL2 renamed or
dropped fails here. RL2 main's config is not installable (not on the package registry): its command
is checked only for the keys RL2 main has no usable default for.
"""

from __future__ import annotations

import math
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

RL2 = pytest.importorskip("RL2", reason="needs rl-square==0.0.2 (nox -s rl2)")
from omegaconf import OmegaConf  # noqa: E402

EXAMPLE = Path(__file__).parents[3] / "examples" / "train_rl2.py"


def run_example(*argv: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(EXAMPLE), *argv], capture_output=True, text=True, cwd=cwd, timeout=300)


def dry_run(tmp_path: Path, *argv: str) -> tuple[dict[str, str], list[str]]:
    """The environment assignments and the torchrun command the example prints."""
    done = run_example("--dry-run", "--episodes", "100", "--out", str(tmp_path), *argv, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    words = shlex.split(done.stdout.strip().splitlines()[-1])
    first = words.index("torchrun")
    return dict(w.split("=", 1) for w in words[:first]), words[first:]


def test_rl_square_command_fits_rl_squares_ppo_yaml(tmp_path):
    environment, command = dry_run(tmp_path, "--api", "reset_step", "--model", "org/actor-model")
    overrides = command[command.index("RL2.trainer.ppo") + 1 :]
    config = OmegaConf.load(Path(RL2.__file__).parent / "trainer" / "config" / "ppo.yaml")
    OmegaConf.set_struct(config, True)
    merged = OmegaConf.merge(config, OmegaConf.from_dotlist(overrides))  # an unknown key raises
    assert merged.actor.model_name == "org/actor-model"
    assert merged.rollout.max_turns > 1, "rl-square's default of one turn would cut every episode"
    assert merged.rollout.train_sampling_params.max_new_tokens
    assert Path(merged.rollout.env_path).name == "gem_env_pypi.py"
    assert environment == {"GEM_RL2_MODEL": "org/actor-model"}, "the env file renders with the actor's template"


def test_rl2_main_command_sets_the_step_count_and_turn_cap(tmp_path):
    _, command = dry_run(tmp_path, "--api", "generate", "--prompts-per-rollout", "16")
    overrides = dict(o.split("=", 1) for o in command[command.index("RL2.trainer.ppo") + 1 :])
    assert overrides["trainer.total_steps"] == str(math.ceil(100 / 16)), "RL2 main's trainer.total_steps defaults to null"
    assert int(overrides["rollout.train.sampling_params.max_new_tokens"]) > 0
    assert Path(overrides["rollout.env_path"]).name == "gem_env.py"


def test_help_works_without_the_gpu_stack(tmp_path):
    done = run_example("--help", cwd=tmp_path)
    assert done.returncode == 0 and "--dry-run" in done.stdout


def test_launch_on_a_cpu_machine_says_what_is_missing_in_one_line(tmp_path):
    done = run_example("--api", "reset_step", "--out", str(tmp_path), cwd=tmp_path)
    assert done.returncode != 0 and "Traceback" not in done.stderr
    (line,) = done.stderr.strip().splitlines()
    assert "missing" in line and "sglang" in line and "CUDA" in line


@pytest.mark.parametrize(("argv", "use_wandb"), [([], False), (["--report-to", "wandb"], True)])
def test_report_to_sets_rl2s_own_wandb_switch(argv, use_wandb, tmp_path):
    """``--report-to`` reaches RL2's ``trainer.use_wandb`` in rl-square's own config (whose default is on:
    the example's default, none, turns it off) and in RL2 main's command."""
    _, command = dry_run(tmp_path, "--api", "reset_step", *argv)
    config = OmegaConf.load(Path(RL2.__file__).parent / "trainer" / "config" / "ppo.yaml")
    OmegaConf.set_struct(config, True)
    merged = OmegaConf.merge(config, OmegaConf.from_dotlist(command[command.index("RL2.trainer.ppo") + 1 :]))
    assert merged.trainer.use_wandb is use_wandb
    _, command = dry_run(tmp_path, "--api", "generate", *argv)
    assert f"trainer.use_wandb={str(use_wandb).lower()}" in command


def test_report_to_tensorboard_is_refused_in_one_line(tmp_path):
    done = run_example("--dry-run", "--report-to", "tensorboard", "--out", str(tmp_path / "out"), cwd=tmp_path)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    (line,) = done.stderr.strip().splitlines()
    assert "--report-to" in line and "invalid choice: 'tensorboard'" in line and not (tmp_path / "out").exists()
