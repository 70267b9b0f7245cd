"""examples/train_openrlhf.py: its command line parsed by OpenRLHF's own argument definitions, and its CPU behaviour.

``openrlhf.cli.train_ppo_ray`` imports Ray at the top and builds its parser inside ``if __name__ ==
"__main__"``, so the test takes that block's ``parser.add_argument`` statements from the installed
file (everything before ``parser.parse_args()``) and runs them: a flag the example passes that
OpenRLHF renamed or dropped fails here. Then OpenRLHF's ``hierarchize`` gives the nested args its
launcher reads.
"""

from __future__ import annotations

import argparse
import ast
import importlib.util
import json
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from openrlhf.utils.config import hierarchize

from gem_core.rows.label import parse_label

EXAMPLE = Path(__file__).parents[3] / "examples" / "train_openrlhf.py"


def openrlhf_parser() -> argparse.ArgumentParser:
    """OpenRLHF 0.11's PPO parser, built by its own ``add_argument`` calls."""
    package = Path(importlib.util.find_spec("openrlhf").submodule_search_locations[0])
    tree = ast.parse((package / "cli" / "train_ppo_ray.py").read_text(encoding="utf-8"))
    # The module's standard-library imports (argparse, datetime, ...), not Ray or OpenRLHF's trainer.
    body = [n for n in tree.body if isinstance(n, (ast.Import, ast.ImportFrom)) and _stdlib(n)]
    (main_block,) = [n for n in tree.body if isinstance(n, ast.If) and "__main__" in ast.unparse(n.test)]
    for statement in main_block.body:
        if "parse_args" in ast.unparse(statement):
            break
        body.append(statement)
    namespace: dict = {}
    exec(compile(ast.Module(body=body, type_ignores=[]), "train_ppo_ray.py", "exec"), namespace)
    return namespace["parser"]


def _stdlib(node: ast.Import | ast.ImportFrom) -> bool:
    names = [node.module] if isinstance(node, ast.ImportFrom) else [alias.name for alias in node.names]
    return all(name.split(".")[0] in sys.stdlib_module_names for name in names)


def run_example(*argv: str, tmp_path: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(EXAMPLE), *argv], capture_output=True, text=True, cwd=tmp_path, timeout=300)


@pytest.fixture(scope="module")
def launched(tmp_path_factory):
    """The example's dry run: OpenRLHF's parsed args, and the dataset it wrote."""
    out = tmp_path_factory.mktemp("openrlhf")
    done = run_example("--dry-run", "--episodes", "3", "--out", str(out), tmp_path=out)
    assert done.returncode == 0, done.stderr
    command = shlex.split(done.stdout.strip().splitlines()[-1])
    argv = command[command.index("openrlhf.cli.train_ppo_ray") + 1 :]
    return hierarchize(openrlhf_parser().parse_args(argv)), out / "train.jsonl"


def test_every_flag_is_one_openrlhf_defines(launched):
    args, _ = launched  # parse_args exits on an unknown flag
    assert args.train.agent_func_path and Path(args.train.agent_func_path).is_file()


def test_colocated_run_puts_deepspeed_to_sleep_and_leaves_it_memory(launched):
    args, _ = launched
    assert args.train.colocate_all and args.vllm.enable_sleep
    assert args.ds.enable_sleep, "colocated with a sleeping vLLM, DeepSpeed must sleep too (OpenRLHF's hybrid-engine scripts)"
    assert 0.5 <= args.vllm.gpu_memory_utilization <= 0.75


def test_dataset_rows_carry_the_label_key_openrlhf_is_told(launched):
    args, dataset = launched
    assert args.data.prompt_dataset == str(dataset)
    rows = [json.loads(line) for line in dataset.read_text().splitlines()]
    assert len(rows) == 3
    assert [parse_label(row[args.data.label_key]).seed for row in rows] == [0, 1, 2]
    assert all(args.data.input_key in row for row in rows)


def test_help_works_without_the_gpu_stack(tmp_path):
    done = run_example("--help", tmp_path=tmp_path)
    assert done.returncode == 0 and "--dry-run" in done.stdout


def test_launch_on_a_cpu_machine_says_what_is_missing_in_one_line(tmp_path):
    done = run_example("--episodes", "2", "--out", str(tmp_path), tmp_path=tmp_path)
    assert done.returncode != 0
    assert "Traceback" not in done.stderr
    (line,) = done.stderr.strip().splitlines()
    assert "missing" in line and "ray" in line and "vllm" in line and "CUDA" in line
    assert not (tmp_path / "train.jsonl").exists(), "the check runs before any work"


@pytest.mark.parametrize("report_to", ["none", "wandb", "tensorboard"])
def test_report_to_turns_on_openrlhfs_own_logger(report_to, tmp_path):
    """``--report-to`` reaches OpenRLHF's logger args as its parser reads them (wandb: on when a key is set;
    TensorBoard: on when its folder is); the default, none, leaves both off."""
    argv = ["--dry-run", "--episodes", "1", "--out", str(tmp_path)] + ([] if report_to == "none" else ["--report-to", report_to])
    done = run_example(*argv, tmp_path=tmp_path)
    assert done.returncode == 0, done.stderr
    command = shlex.split(done.stdout.strip().splitlines()[-1])
    logger = hierarchize(openrlhf_parser().parse_args(command[command.index("openrlhf.cli.train_ppo_ray") + 1 :])).logger
    assert bool(logger.wandb.key) == (report_to == "wandb")
    assert logger.tensorboard_dir == (str(tmp_path / "tensorboard") if report_to == "tensorboard" else None)
