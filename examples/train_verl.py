"""Train an LLM on a GEM env with verl's stock PPO trainer (needs GPUs and `pip install "verl[vllm]==0.9.1"` and `pip install -e ".[verl]"`).

What this file does, top to bottom:
1. build the train/validation parquet files (one row per env seed) with gem_adapters.verl.make_dataset;
2. run `python -m verl.trainer.main_ppo` with the overrides below: GEM's agent loop
   (the packaged gem_agent_loop.yaml, `python -m gem_adapters.verl.config` prints it) plays the episodes, and `algorithm.adv_estimator=gem_rebn` gives
   per-turn credit (REINFORCE with Return Batch Normalization over turns, discount `algorithm.gamma`).

verl itself is not modified or wrapped: the trainer is verl's, started as verl documents it.

    python examples/train_verl.py                                  # Wordle, Qwen2.5-1.5B-Instruct, 8 GPUs
    python examples/train_verl.py --env game:Sudoku-v0-easy --n-gpus 4 --adv-estimator grpo
    python examples/train_verl.py --dry-run                        # build the data, print the command
    python examples/train_verl.py --report-to wandb                # verl's metrics to wandb (or tensorboard; default none)
    python examples/train_verl.py trainer.total_epochs=3           # extra `key=value` go to verl as they are
"""

from __future__ import annotations

import importlib.util
import os
import shlex
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

from gem_core.cli.options import OneLineErrors


@dataclass
class Args:
    env: str = field(default="game:Wordle-v0", metadata={"help": "GEM env id (`gem list` shows them)"})
    model: str = field(default="Qwen/Qwen2.5-1.5B-Instruct", metadata={"help": "Hugging Face model id or local path of the policy"})
    n_train: int = field(default=4096, metadata={"help": "training episodes (env seeds 0..n_train-1)"})
    n_val: int = field(default=128, metadata={"help": "validation episodes (seeds from 1_000_000, disjoint from training)"})
    data_dir: str = field(default="data/gem_verl", metadata={"help": "where the parquet files and the agent-loop YAML go"})
    adv_estimator: str = field(
        default="gem_rebn", metadata={"help": "gem_rebn (per-turn ReBN), or any verl estimator: grpo, rloo, reinforce_plus_plus, gae (adds a critic)"}
    )
    gamma: float = field(default=0.9, metadata={"help": "discount over turns (algorithm.gamma)"})
    rollout: str = field(default="vllm", metadata={"help": "verl's rollout engine: vllm or sglang"})
    rollout_n: int = field(default=4, metadata={"help": "episodes per dataset row (per seed); GRPO and RLOO need more than 1"})
    train_batch_size: int = field(default=64, metadata={"help": "dataset rows per training step (x rollout_n episodes)"})
    max_prompt_length: int = field(default=1024, metadata={"help": "tokens of the first observation with the chat template"})
    max_response_length: int = field(
        default=4096, metadata={"help": "tokens of all turns together (actions and observations); the episode is truncated to fit"}
    )
    lr: float = field(default=1e-6, metadata={"help": "actor learning rate"})
    n_gpus: int = field(default=8, metadata={"help": "GPUs on this node"})
    total_epochs: int = field(default=10, metadata={"help": "passes over the training rows"})
    report_to: str = field(
        default="none", metadata={"help": "where verl also logs its metrics (trainer.logger, beside the console): none, wandb "
                                          "(`wandb login` first) or tensorboard (verl's tensorboard_log/ or $TENSORBOARD_DIR)",
                                  "choices": ["none", "wandb", "tensorboard"]}
    )
    dry_run: bool = field(default=False, metadata={"help": "build the data and print the command without starting verl"})


#: Options that count something: each must be at least 1.
COUNTS = ("n_train", "n_val", "rollout_n", "train_batch_size", "max_prompt_length", "max_response_length", "n_gpus", "total_epochs")


def parse_args(argv: list[str] | None = None) -> tuple[Args, list[str]]:
    """``Args`` from ``--flag value`` options; bare ``key=value`` words are extra verl overrides.

    A bad option exits 2 with one line naming it, before any data is written (and before the GPU check)."""
    from transformers import HfArgumentParser

    class Parser(OneLineErrors, HfArgumentParser):
        pass

    parser = Parser(Args, description=__doc__.split("\n\n")[0])
    args, rest = parser.parse_args_into_dataclasses(args=argv, return_remaining_strings=True)
    bad = [word for word in rest if "=" not in word or word.startswith("-")]
    if bad:
        parser.error(f"unrecognized arguments: {' '.join(bad)} (verl overrides are written key=value)")
    if args.rollout not in ("vllm", "sglang"):
        parser.error(f"--rollout {args.rollout}: choose vllm or sglang")
    parser.require_counts({f"--{name}": getattr(args, name) for name in COUNTS})
    parser.require_env(args.env)
    parser.require_folder("--data_dir", args.data_dir)
    return args, rest


def missing_prerequisites(args: Args) -> str | None:
    """What a GPU run needs and this machine lacks, in one line (None: all there)."""
    missing = [name for name in ("verl", "ray", args.rollout) if importlib.util.find_spec(name) is None]
    if missing:
        return f"train_verl.py needs {', '.join(missing)}: pip install \"verl[{args.rollout}]==0.9.1\" and this package's verl extra (or use --dry-run)"
    import torch

    if not torch.cuda.is_available() or torch.cuda.device_count() < args.n_gpus:
        found = torch.cuda.device_count() if torch.cuda.is_available() else 0
        return f"train_verl.py needs {args.n_gpus} CUDA GPU(s) (--n-gpus), found {found}; use --dry-run to build the data and print the command"
    return None


def verl_overrides(args: Args, train_file: Path, val_file: Path, agent_loop_config: Path) -> list[str]:
    """The Hydra overrides for `python -m verl.trainer.main_ppo` (verl's ppo_trainer.yaml holds the rest)."""
    mini_batch = max(1, args.train_batch_size // 4)
    max_tokens_per_gpu = 2 * (args.max_prompt_length + args.max_response_length)
    return [
        # Data: GEM rows, each naming the agent loop `gem_env`.
        f"data.train_files={train_file}",
        f"data.val_files={val_file}",
        f"data.train_batch_size={args.train_batch_size}",
        f"data.max_prompt_length={args.max_prompt_length}",
        f"data.max_response_length={args.max_response_length}",
        # Rollout: vLLM serves the policy; GEM's agent loop plays the episodes.
        f"actor_rollout_ref.rollout.name={args.rollout}",
        f"actor_rollout_ref.rollout.n={args.rollout_n}",
        "actor_rollout_ref.rollout.calculate_log_probs=True",
        f"actor_rollout_ref.rollout.agent.agent_loop_config_path={agent_loop_config}",
        "actor_rollout_ref.rollout.gpu_memory_utilization=0.6",
        "actor_rollout_ref.rollout.tensor_model_parallel_size=1",
        f"actor_rollout_ref.rollout.log_prob_max_token_len_per_gpu={max_tokens_per_gpu}",
        # Credit assignment over turns.
        f"algorithm.adv_estimator={args.adv_estimator}",
        f"algorithm.gamma={args.gamma}",
        "algorithm.use_kl_in_reward=False",
        # Actor.
        f"actor_rollout_ref.model.path={args.model}",
        f"actor_rollout_ref.actor.optim.lr={args.lr}",
        f"actor_rollout_ref.actor.ppo_mini_batch_size={mini_batch}",
        "actor_rollout_ref.actor.use_dynamic_bsz=True",
        f"actor_rollout_ref.actor.ppo_max_token_len_per_gpu={max_tokens_per_gpu}",
        f"actor_rollout_ref.ref.log_prob_max_token_len_per_gpu={max_tokens_per_gpu}",
        "actor_rollout_ref.actor.use_kl_loss=False",
        "actor_rollout_ref.model.enable_gradient_checkpointing=True",
        # Critic, only for GAE.
        f"critic.model.path={args.model}",
        f"critic.ppo_max_token_len_per_gpu={max_tokens_per_gpu}",
        "critic.use_dynamic_bsz=True",
        # Trainer.
        "trainer.nnodes=1",
        f"trainer.n_gpus_per_node={args.n_gpus}",
        f"trainer.total_epochs={args.total_epochs}",
        "trainer.project_name=gem",
        f"trainer.experiment_name={args.env.replace(':', '_')}-{args.adv_estimator}",
        "trainer.logger=[console]" if args.report_to == "none" else f"trainer.logger=[console,{args.report_to}]",
        "trainer.val_before_train=True",
        "trainer.test_freq=10",
        "trainer.save_freq=-1",
    ]


def build_data(args: Args) -> tuple[Path, Path, Path]:
    from gem_adapters.verl import make_dataset
    from gem_adapters.verl.config import agent_loop_yaml
    from gem_adapters.verl.make_dataset import write_dataset

    data_dir = Path(args.data_dir).resolve()
    train_file, val_file, config_file = data_dir / "train.parquet", data_dir / "val.parquet", data_dir / "gem_agent_loop.yaml"
    write_dataset(make_dataset(args.env, args.n_train, seed_start=0), train_file)
    write_dataset(make_dataset(args.env, args.n_val, seed_start=1_000_000), val_file)
    config_file.write_text(agent_loop_yaml())
    return train_file, val_file, config_file


def main(argv: list[str] | None = None) -> list[str]:
    args, extra = parse_args(argv)
    if not args.dry_run and (problem := missing_prerequisites(args)):
        raise SystemExit(problem)  # before any data is written or Ray starts
    train_file, val_file, config_file = build_data(args)
    command = [sys.executable, "-m", "verl.trainer.main_ppo", *verl_overrides(args, train_file, val_file, config_file), *extra]
    print(" \\\n    ".join(shlex.quote(word) for word in command))
    if not args.dry_run:
        # verl computes advantages in a Ray actor: this makes `import verl` there register gem_rebn even where
        # the `verl.plugins` entry point of the installed gem package is missing (e.g. a source checkout).
        modules = [m for m in os.environ.get("VERL_USE_EXTERNAL_MODULES", "").split(",") if m]
        env = {**os.environ, "VERL_USE_EXTERNAL_MODULES": ",".join([*modules, "gem_adapters.verl.advantage"])}
        subprocess.run(command, env=env, check=True)
    return command


if __name__ == "__main__":
    main()
