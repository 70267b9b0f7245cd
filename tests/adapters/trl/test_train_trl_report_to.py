"""examples/train_trl.py --report_to (none, wandb, tensorboard): the value reaches TRL's own logger setting,
``GRPOConfig.report_to``, in either spelling (``--report_to``, ``--report-to``); a logger that is not installed,
or not one of the three, is refused in one line before torch loads. No training run."""

from __future__ import annotations

import importlib.util
import subprocess
import sys

import pytest
from example_usage import RUN_AND_REPORT_TORCH
from test_learning import EXAMPLE, load_example


@pytest.mark.parametrize(("argv", "expected"), [([], []), (["--report-to", "tensorboard"], ["tensorboard"]),
                                                (["--report_to", "wandb"], ["wandb"])])
def test_report_to_reaches_grpo_config(argv, expected, monkeypatch, tmp_path):
    from trl import GRPOConfig  # imported before the stand-in packages below are on the path

    example = load_example()
    for package in ("wandb", "tensorboard"):  # empty stand-ins: the example checks only that they are installed
        (tmp_path / package).mkdir()
        (tmp_path / package / "__init__.py").write_text("")
    monkeypatch.syspath_prepend(str(tmp_path))
    seen = []
    monkeypatch.setattr(example, "main", lambda args: seen.append(args) or {"interrupted": False})
    assert example.cli([*argv, "--out", str(tmp_path / "run")]) == 0
    config = example.grpo_config(seen[0], max_completion_length=64, on_cpu=True)
    assert isinstance(config, GRPOConfig) and config.report_to == expected


@pytest.mark.skipif(importlib.util.find_spec("wandb") is not None, reason="wandb is installed here")
@pytest.mark.parametrize(("argv", "message"), [(["--report-to", "wandb"], "--report_to wandb needs the wandb package: pip install wandb"),
                                               (["--report_to", "mlflow"], "argument --report_to: invalid choice: 'mlflow'")])
def test_a_logger_not_installed_or_unknown_is_refused_before_torch_loads(argv, message, tmp_path):
    done = subprocess.run([sys.executable, "-c", RUN_AND_REPORT_TORCH, str(EXAMPLE), *argv, "--out", str(tmp_path / "run")],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 2, done.stderr
    assert message in done.stderr and "Traceback" not in done.stderr and len(done.stderr.strip().splitlines()) == 1
    assert done.stdout.strip() == "torch not imported" and not (tmp_path / "run").exists()
