"""Train on a GEM env with OpenRLHF 0.11 (multi-turn agent hook), in one file.

OpenRLHF runs its own loop (vLLM engines, Ray, DeepSpeed); GEM plugs in through
``--train.agent_func_path`` (the agent file shipped in ``gem_adapters``). This script writes the prompt dataset
(one row per episode, env id and seed in the label) and launches the stock trainer::

    python examples/train_openrlhf.py --env game:GuessTheNumber-v0 --model Qwen/Qwen3-1.7B --gpus 8
    python examples/train_openrlhf.py --dry-run      # print the command only (works without GPUs)
    python examples/train_openrlhf.py --report-to wandb   # OpenRLHF's metrics to wandb (or tensorboard; default none)

Needs ``pip install -e ".[openrlhf]"`` and ``pip install "openrlhf[vllm]==0.11.2"`` on a GPU machine.
"""

from __future__ import annotations

import argparse
import shlex
import subprocess
import sys
from pathlib import Path

from gem_adapters.files import shipped_path
from gem_adapters.gpu_stack import require_gpu_stack
from gem_adapters.openrlhf.make_dataset import make_dataset
from gem_core.cli.options import OneLineErrors
from gem_core.rows import write_jsonl


# -- arguments -------------------------------------------------------------------------------------
class _Parser(OneLineErrors, argparse.ArgumentParser):
    pass


parser = _Parser(description=__doc__.split("\n\n")[0])
parser.add_argument("--env", default="game:GuessTheNumber-v0", help="GEM env id")
parser.add_argument("--episodes", type=int, default=4096, help="rows in the prompt dataset (one episode each)")
parser.add_argument("--model", default="Qwen/Qwen3-1.7B", help="HF model name or path")
parser.add_argument("--gpus", type=int, default=8, help="GPUs on this node (actor, ref and vLLM colocated)")
parser.add_argument("--vllm-memory", type=float, default=0.6, help="vLLM's share of GPU memory; colocated with DeepSpeed, OpenRLHF's scripts use 0.5-0.75")
parser.add_argument("--max-len", type=int, default=4096, help="whole-episode token budget (--data.max_len)")
parser.add_argument("--n-samples", type=int, default=8, help="episodes per prompt row (group baseline)")
parser.add_argument("--estimator", default="reinforce_baseline", help="--algo.advantage.estimator")
parser.add_argument("--out", default="runs/openrlhf", help="dataset and checkpoint directory")
parser.add_argument("--agent-file", default=None, help="your edited agent file (default: the shipped one; `python -m gem_adapters.files openrlhf-agent > gem_agent.py` copies it)")
parser.add_argument("--report-to", choices=["none", "wandb", "tensorboard"], default="none",
                    help="where OpenRLHF also logs its metrics: wandb (log in first, `wandb login` or WANDB_API_KEY; the key "
                         "never goes on the command line) or tensorboard (OUT/tensorboard) (default: none)")
parser.add_argument("--dry-run", action="store_true", help="write the dataset, print the command, do not launch")
args = parser.parse_args()
# A bad option ends here in one line (exit 2), before the GPU check and before anything is written.
parser.require_counts({"--episodes": args.episodes, "--gpus": args.gpus, "--max-len": args.max_len, "--n-samples": args.n_samples})
if not 0 < args.vllm_memory <= 1:
    parser.error(f"--vllm-memory must be above 0 and at most 1 (a share of GPU memory), got {args.vllm_memory}")
parser.require_env(args.env)
parser.require_folder("--out", args.out)
agent_file = Path(args.agent_file).expanduser().resolve() if args.agent_file else shipped_path("openrlhf-agent")
if args.agent_file and not (agent_file.suffix == ".py" and agent_file.is_file()):  # OpenRLHF loads it in each vLLM actor
    parser.error(f"--agent-file {args.agent_file} is not an existing .py file (OpenRLHF imports the agent file as Python)")
if not args.dry_run:
    logger = () if args.report_to == "none" else (args.report_to,)  # its package, checked with the others
    require_gpu_stack("train_openrlhf.py", packages=("openrlhf", "ray", "vllm", "deepspeed", *logger),
                      install=f'pip install "openrlhf[vllm]==0.11.2"{"".join(" " + name for name in logger)}')

# -- setup: the dataset OpenRLHF counts episodes with ----------------------------------------------
out = Path(args.out)
dataset = out / "train.jsonl"
rows = write_jsonl(make_dataset(args.env, args.episodes), dataset)
print(f"wrote {rows} episodes of {args.env} to {dataset}")

# -- launch: the stock trainer with the GEM agent file ---------------------------------------------
command = [
    sys.executable, "-m", "openrlhf.cli.train_ppo_ray",
    "--actor.model_name_or_path", args.model,
    "--actor.num_gpus_per_node", str(args.gpus),
    "--ref.num_gpus_per_node", str(args.gpus),
    "--vllm.num_engines", str(args.gpus),
    "--vllm.tensor_parallel_size", "1",
    "--vllm.gpu_memory_utilization", str(args.vllm_memory),
    "--vllm.enable_sleep",  # colocated: vLLM and DeepSpeed each sleep (offload) while the other runs
    "--ds.enable_sleep",
    "--train.colocate_all",
    "--train.agent_func_path", str(agent_file),
    "--data.prompt_dataset", str(dataset),
    "--data.input_key", "prompt",
    "--data.label_key", "label",
    "--data.max_len", str(args.max_len),
    "--rollout.n_samples_per_prompt", str(args.n_samples),
    "--rollout.batch_size", "16",
    "--rollout.temperature", "1.0",
    "--train.batch_size", str(16 * args.n_samples),
    "--algo.advantage.estimator", args.estimator,
    "--actor.gradient_checkpointing_enable",
    "--ckpt.output_dir", str(out / "checkpoints"),
]
# OpenRLHF's loggers: wandb is on when --logger.wandb.key is set (a logged-in wandb never reads it, and OpenRLHF
# copies its args into the wandb run's config: so a placeholder, not the key), TensorBoard when its folder is.
if args.report_to == "wandb":
    command += ["--logger.wandb.key", "from-wandb-login", "--logger.wandb.project", "gem"]
elif args.report_to == "tensorboard":
    command += ["--logger.tensorboard_dir", str(out / "tensorboard")]
print(shlex.join(command))
if not args.dry_run:
    # On a multi-node cluster submit the same command with `ray job submit --address ... -- <command>`.
    subprocess.run(command, check=True)
