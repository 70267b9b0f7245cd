"""examples/train_oat.py: the command line its docstring shows, parsed and validated by oat's own
``get_default_args`` / ``default_args_validation`` (GPU modules stubbed, see ``conftest.py``), and its
behaviour on a machine without the GPU stack."""

from __future__ import annotations

import importlib.util
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
import torch

EXAMPLE = Path(__file__).parents[3] / "examples" / "train_oat.py"


def load_example(monkeypatch):
    monkeypatch.syspath_prepend(str(EXAMPLE.parent))  # as `python examples/train_oat.py` runs it
    spec = importlib.util.spec_from_file_location("train_oat", EXAMPLE)
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, "train_oat", module)  # dataclasses resolve annotations through it
    spec.loader.exec_module(module)
    return module


def documented_command() -> list[str]:
    """The flags of the command in the example's docstring."""
    text = EXAMPLE.read_text(encoding="utf-8")
    block = text[text.index("python examples/train_oat.py") :].split("\n\n")[0]
    return shlex.split(block.replace("\\\n", " "))[2:]


def test_documented_command_is_valid_oat_args(monkeypatch):
    example = load_example(monkeypatch)
    monkeypatch.setattr(sys, "argv", ["train_oat.py", *documented_command()])
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 8)  # oat's validation counts the GPUs --gpus asks for
    args = example.training_args()  # tyro exits on an unknown flag; oat's validation asserts the rest
    assert args.env_id == "game:GuessTheNumber-v0" and args.gamma == 0.9
    assert args.rollout_batch_size == args.rollout_batch_size_per_device * args.gpus
    assert args.max_queries == args.max_train


def test_help_works_without_the_gpu_stack(tmp_path):
    done = subprocess.run([sys.executable, str(EXAMPLE), "--help"], capture_output=True, text=True, cwd=tmp_path, timeout=300)
    assert done.returncode == 0 and "--env_id" in done.stdout


def test_launch_on_a_cpu_machine_says_what_is_missing_in_one_line(tmp_path):
    done = subprocess.run([sys.executable, str(EXAMPLE), "--env_id", "game:GuessTheNumber-v0"], capture_output=True,
                          text=True, cwd=tmp_path, timeout=300)
    assert done.returncode != 0 and "Traceback" not in done.stderr
    (line,) = done.stderr.strip().splitlines()
    assert "missing" in line and "vllm" in line and "launchpad" in line and "CUDA" in line


def test_report_to_wandb_sets_oats_own_wandb_switch(monkeypatch):
    """``--report_to`` (default none) reaches oat's ``use_wb``; a logger oat lacks is refused by oat's parser."""
    example = load_example(monkeypatch)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 8)
    for argv, use_wb in (([], False), (["--report-to", "wandb"], True)):
        monkeypatch.setattr(sys, "argv", ["train_oat.py", *documented_command(), *argv])
        assert example.training_args().use_wb is use_wb
    monkeypatch.setattr(sys, "argv", ["train_oat.py", *documented_command(), "--report_to", "tensorboard"])
    with pytest.raises(SystemExit) as exited:
        example.training_args()
    assert exited.value.code == 2
