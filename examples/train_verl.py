"""Train an LLM on a GEM env with verl's stock PPO trainer (needs GPUs and `pip install "verl[vllm]==0.9.1"` and `pip install -e ".[verl]"`).

What this file does, top to bottom:
1. build the train/validation parquet files (one row per env seed) with gem_adapters.verl.make_dataset;
2. run `python -m verl.trainer.main_ppo` with the overrides below: GEM's agent loop
   (examples/verl/gem_agent_loop.yaml) plays the episodes, and `algorithm.adv_estimator=gem_rebn` gives
   per-turn credit (REINFORCE with Return Batch Normalization over turns, discount `algorithm.gamma`).

verl itself is not modified or wrapped: the trainer is verl's, started as verl documents it.

    python examples/train_verl.py                                  # Wordle, Qwen2.5-1.5B-Instruct, 8 GPUs
    python examples/train_verl.py --env game:Sudoku-v0-easy --n-gpus 4 --adv-estimator grpo
    python examples/train_verl.py --dry-run                        # build the data, print the command
    python examples/train_verl.py trainer.total_epochs=3           # extra `key=value` go to verl as they are
"""

from __future__ import annotations

import argparse
import os
import shlex
import subprocess
import sys
from dataclasses import dataclass, fields
from pathlib import Path

HERE = Path(__file__).resolve().parent
AGENT_LOOP_CONFIG = HERE / "verl" / "gem_agent_loop.yaml"


@dataclass
class Args:
    env: str = "game:Wordle-v0"
    """GEM env id (`gem list` shows them)."""
    model: str = "Qwen/Qwen2.5-1.5B-Instruct"
    """Hugging Face model id or local path of the policy."""
    n_train: int = 4096
    """Training episodes (env seeds 0..n_train-1)."""
    n_val: int = 128
    """Validation episodes (seeds from 1_000_000, disjoint from training)."""
    data_dir: str = "data/gem_verl"
    """Where the parquet files go."""
    adv_estimator: str = "gem_rebn"
    """gem_rebn (per-turn ReBN), or any verl estimator: grpo, rloo, reinforce_plus_plus, gae (adds a critic)."""
    gamma: float = 0.9
    """Discount over turns (algorithm.gamma)."""
    rollout_n: int = 4
    """Episodes per dataset row (per seed); GRPO and RLOO need more than 1."""
    train_batch_size: int = 64
    """Dataset rows per training step (x rollout_n episodes)."""
    max_prompt_length: int = 1024
    """Tokens of the first observation with the chat template."""
    max_response_length: int = 4096
    """Tokens of all turns together (actions and observations); the episode is truncated to fit."""
    lr: float = 1e-6
    """Actor learning rate."""
    n_gpus: int = 8
    """GPUs on this node."""
    total_epochs: int = 10
    """Passes over the training rows."""
    dry_run: bool = False
    """Build the data and print the command without starting verl."""


def parse_args(argv: list[str] | None = None) -> tuple[Args, list[str]]:
    """``Args`` from ``--flag value`` options; bare ``key=value`` words are extra verl overrides."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    for f in fields(Args):
        flag = "--" + f.name.replace("_", "-")
        if f.type in ("bool", bool):
            parser.add_argument(flag, action="store_true")
        else:
            kind = {"int": int, "float": float}.get(str(f.type), str)
            parser.add_argument(flag, type=kind, default=f.default)
    known, rest = parser.parse_known_args(argv)
    bad = [word for word in rest if "=" not in word or word.startswith("-")]
    if bad:
        parser.error(f"unrecognized arguments: {' '.join(bad)} (verl overrides are written key=value)")
    return Args(**vars(known)), rest


def verl_overrides(args: Args, train_file: Path, val_file: Path) -> list[str]:
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
        "actor_rollout_ref.rollout.name=vllm",
        f"actor_rollout_ref.rollout.n={args.rollout_n}",
        "actor_rollout_ref.rollout.calculate_log_probs=True",
        f"actor_rollout_ref.rollout.agent.agent_loop_config_path={AGENT_LOOP_CONFIG}",
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
        "trainer.logger=[console]",
        "trainer.val_before_train=True",
        "trainer.test_freq=10",
        "trainer.save_freq=-1",
    ]


def build_data(args: Args) -> tuple[Path, Path]:
    from gem_adapters.verl.make_dataset import build_rows, write_dataset

    data_dir = Path(args.data_dir).resolve()
    train_file, val_file = data_dir / "train.parquet", data_dir / "val.parquet"
    write_dataset(build_rows(args.env, args.n_train, seed_start=0), train_file)
    write_dataset(build_rows(args.env, args.n_val, seed_start=1_000_000), val_file)
    return train_file, val_file


def main(argv: list[str] | None = None) -> list[str]:
    args, extra = parse_args(argv)
    train_file, val_file = build_data(args)
    command = [sys.executable, "-m", "verl.trainer.main_ppo", *verl_overrides(args, train_file, val_file), *extra]
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
