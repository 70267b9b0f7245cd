"""Train on a GEM env with oat-llm 0.2.x (multi-turn PPO / REINFORCE with per-turn rewards), in one file.

oat's actor plays GEM episodes with vLLM (``gem_adapters.oat``: ``PPOMultiTurnActor`` with the core's
episode runner) and its learner trains one sample per turn with turn-level GAE (``--critic_type ppo``)
or the discounted return (``--gamma``). Needs Python 3.10, GPUs and ``pip install -e ".[oat]"``::

    python examples/train_oat.py --env_id game:GuessTheNumber-v0 --pretrain Qwen/Qwen3-1.7B-Base \
        --gpus 8 --collocate --vllm_sleep --gamma 0.9 --generate_max_length 1024 --rollout_batch_size_per_device 16

The flags are oat's ``PPOArgs`` (``--help`` lists them where oat is installed) plus the env fields of
``gem_adapters.oat.GemArgsMixin``: ``--env_id``, ``--num_env``, ``--max_turns``, ``--max_total_tokens``,
``--system_prompt``. The training length is oat's ``--max_train`` (prompts, i.e. actor steps x batch).
``--report_to wandb`` (default ``none``) turns on oat's wandb logging (``--use_wb``; log in first with
``wandb login``); oat has no TensorBoard logger.
"""

from __future__ import annotations

import importlib.util
import sys
from dataclasses import dataclass
from typing import Literal

from gem_adapters.gpu_stack import require_gpu_stack

GPU_PACKAGES = ("oat", "vllm", "launchpad", "deepspeed")
INSTALL = 'pip install -e ".[oat]" on Python 3.10'


def args_class() -> type:
    """oat's PPO flags plus the env fields (imports oat, which imports vLLM and launchpad)."""
    from oat.algorithms.ppo import PPOArgs

    from gem_adapters.oat import GemArgsMixin

    @dataclass
    class Args(GemArgsMixin, PPOArgs):
        gamma: float = 0.9  # per-turn discount: credit moves to the turns that led to the reward
        # None: every learner's batch, rollout_batch_size_per_device x gpus x num_groups (oat's learner asserts it divides)
        rollout_batch_size: int | None = None
        whiten_adv: bool = True  # normalize per-turn advantages over the batch (ReBN-style)
        # Where oat also logs its metrics: wandb sets oat's --use_wb (oat has no TensorBoard logger).
        report_to: Literal["none", "wandb"] = "none"

    return Args


def training_args() -> object:
    """oat's args from the command line (``sys.argv``), with the env in place of the prompt dataset and oracle."""
    from oat.args import default_args_validation, get_default_args

    args = get_default_args(args_class())
    args.algo = "PPO"
    args.oracle = ""
    args.prompt_data = ""
    if args.rollout_batch_size is None:  # an explicit --rollout_batch_size stands
        args.rollout_batch_size = args.rollout_batch_size_per_device * args.gpus * args.num_groups
    args.use_wb = args.use_wb or args.report_to == "wandb"  # oat's own wandb switch (its --wb_project names the project)
    return default_args_validation(args)


def main() -> None:
    import launchpad as lp
    from oat.interface import get_program

    from gem_adapters.oat import actor_class, learner_class

    args = training_args()
    # -- launch: oat's own program (plasma IPC, vLLM actors, DeepSpeed learners)
    program, local_resources = get_program(args, learner_cls=learner_class(), actor_cls=actor_class())
    lp.launch(program, launch_type=args.launch_type, local_resources=local_resources, terminal="current_terminal")


if __name__ == "__main__":
    wants_help = any(a in ("-h", "--help") for a in sys.argv[1:])
    if wants_help and any(importlib.util.find_spec(name) is None for name in GPU_PACKAGES):
        print(__doc__)
        print(f"oat's own flags are listed once its packages are installed ({INSTALL}).")
        raise SystemExit(0)
    if not wants_help:
        # oat launches in this process and reads its flags with its GPU packages loaded: no command to print.
        require_gpu_stack("train_oat.py", packages=GPU_PACKAGES, install=INSTALL, dry_run=False)
    main()
