"""Train on a GEM env with RL2 (main from source, or PyPI rl-square 0.0.2), in one file.

RL2 runs its own trainer (``torchrun -m RL2.trainer.ppo`` with Hydra overrides) and imports an env
file from ``rollout.env_path``. The two RL2 releases call different env hooks, so this script finds
the installed one, writes the dataset (one row per episode, env id and seed in the row), and launches
the stock trainer with the matching env file::

    python examples/train_rl2.py --env game:GuessTheNumber-v0 --model Qwen/Qwen2.5-1.5B-Instruct --gpus 8
    python examples/train_rl2.py --dry-run --api generate    # print the command only
    python examples/train_rl2.py --report-to wandb           # RL2's metrics to wandb (default none)

RL2 main keeps each turn's reward on that turn's last action token; ``adv.estimator=reinforce`` sums
them per episode, ``gae`` discounts per token with ``adv.gamma``.
"""

from __future__ import annotations

import argparse
import math
import os
import shlex
import subprocess
import sys
from pathlib import Path

from gem_adapters.files import shipped_path
from gem_adapters.gpu_stack import require_gpu_stack
from gem_adapters.rl2 import installed_rl2_api
from gem_adapters.rl2.make_dataset import make_dataset
from gem_core.cli.options import OneLineErrors
from gem_core.rows import write_jsonl


# -- arguments -------------------------------------------------------------------------------------
class _Parser(OneLineErrors, argparse.ArgumentParser):
    pass


parser = _Parser(description=__doc__.split("\n\n")[0])
parser.add_argument("--env", default="game:GuessTheNumber-v0", help="GEM env id")
parser.add_argument("--episodes", type=int, default=4096, help="dataset rows (one episode each)")
parser.add_argument("--model", default="Qwen/Qwen2.5-1.5B-Instruct", help="HF model name or path (actor.model_name)")
parser.add_argument("--gpus", type=int, default=8, help="torchrun --nproc_per_node")
parser.add_argument("--max-new-tokens", type=int, default=512, help="per-turn cap (RL2's default null fails)")
parser.add_argument("--max-length", type=int, default=8192, help="actor.max_length_per_device (>= the env file's max_total_tokens)")
parser.add_argument("--responses-per-prompt", type=int, default=8, help="episodes per row (group baseline)")
parser.add_argument("--prompts-per-rollout", type=int, default=64, help="dataset rows per training step")
parser.add_argument("--total-steps", type=int, default=None, help="RL2 main's trainer.total_steps (default: one pass over the dataset)")
parser.add_argument("--api", choices=["generate", "reset_step"], default=None, help="RL2 env hook (default: the installed RL2's)")
parser.add_argument("--out", default="runs/rl2", help="dataset directory")
parser.add_argument("--report-to", choices=["none", "wandb"], default="none",
                    help="where RL2 also logs its metrics (trainer.use_wandb; RL2 has no TensorBoard logger); wandb needs "
                         "`wandb login` first (default: none, though RL2's own default is wandb)")
parser.add_argument("--dry-run", action="store_true", help="write the dataset, print the command, do not launch")
args = parser.parse_args()
# A bad option ends here in one line (exit 2), before the RL2 and GPU checks and before anything is written.
counts = {"--episodes": args.episodes, "--gpus": args.gpus, "--max-new-tokens": args.max_new_tokens, "--max-length": args.max_length,
          "--responses-per-prompt": args.responses_per_prompt, "--prompts-per-rollout": args.prompts_per_rollout,
          "--total-steps": 1 if args.total_steps is None else args.total_steps}
parser.require_counts(counts)
parser.require_env(args.env)
parser.require_folder("--out", args.out)

# -- setup -----------------------------------------------------------------------------------------
api = args.api or installed_rl2_api()
if api is None and args.dry_run:  # nothing is launched: write the dataset, print RL2 main's command
    api = "generate"
    print("train_rl2.py: RL2 is not installed; printing RL2 main's command (--api reset_step prints rl-square 0.0.2's).",
          file=sys.stderr)
if api is None:
    raise SystemExit("train_rl2.py: RL2 is not installed: `pip install rl-square==0.0.2`, or RL2 main from source "
                     "(pip install -e .); --dry-run --api generate|reset_step writes the dataset and prints the command without it.")
if not args.dry_run:
    require_gpu_stack("train_rl2.py", packages=("RL2", "sglang"), launcher="torchrun", install="RL2's README lists its GPU packages")
dataset = Path(args.out) / "train.jsonl"
print(f"wrote {write_jsonl(make_dataset(args.env, args.episodes), dataset)} episodes of {args.env} to {dataset}")

common = [
    f"actor.model_name={args.model}",
    f"actor.max_length_per_device={args.max_length}",
    "adv.estimator=reinforce",
    "trainer.project=gem",
    f"trainer.use_wandb={str(args.report_to == 'wandb').lower()}",
    f"trainer.experiment_name=rl2-{args.env.replace(':', '-')}",
]
if api == "generate":  # RL2 main: no default step count (its scheduler and loop need trainer.total_steps)
    overrides = [
        f"rollout.train.path={dataset}",
        f"rollout.env_path={shipped_path('rl2-generate')}",
        f"rollout.train.responses_per_prompt={args.responses_per_prompt}",
        f"rollout.train.sampling_params.max_new_tokens={args.max_new_tokens}",
        f"rollout.train.prompts_per_rollout={args.prompts_per_rollout}",
        f"trainer.total_steps={args.total_steps or math.ceil(args.episodes / args.prompts_per_rollout)}",
    ]
else:  # rl-square 0.0.2: the env file reads the actor's tokenizer name from GEM_RL2_MODEL
    overrides = [
        f"train_data.path={dataset}",
        f"rollout.env_path={shipped_path('rl2-reset-step')}",
        f"train_data.responses_per_prompt={args.responses_per_prompt}",
        f"rollout.train_sampling_params.max_new_tokens={args.max_new_tokens}",
        "rollout.max_turns=100",  # rl-square's default is 1; the env's own limit ends episodes
        f"train_data.prompts_per_rollout={args.prompts_per_rollout}",
    ]

# -- launch: the stock trainer ----------------------------------------------------------------------
environment = {"GEM_RL2_MODEL": args.model}
command = ["torchrun", f"--nproc_per_node={args.gpus}", "-m", "RL2.trainer.ppo", *overrides, *common]
print(shlex.join([f"{k}={v}" for k, v in environment.items()] + command))
if not args.dry_run:
    subprocess.run(command, check=True, env={**os.environ, **environment})
