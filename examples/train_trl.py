"""Train an LLM agent on a multi-turn GEM env with TRL's stock GRPOTrainer.

With no arguments this runs on a CPU: a tiny transformer with random weights and a tokenizer trained
right here learn to play GuessTheNumber (1-4, three guesses, "higher"/"lower" hints) from the env's
rewards alone. The tokenizer makes each move (`\boxed{3}`) and each of this game's observations a single
token, and a turn is one sampled token, so the run fits a CPU. A short warm start on random-move episodes
teaches the move format only (a pretrained model's prior); RL then finds the binary search the hints allow:
random moves win 57% of the games, a fixed guessing order at most 75%, the trained model 99.7-99.9% on seeds
0-4 (mean return over the last 20% of steps; bench/learning/results/README.md tells how). Each step prints
one line (step, mean return, success rate, seconds); TRL's full metrics go to `runs/trl/log.jsonl` (and to
wandb or TensorBoard with `--report_to wandb|tensorboard`), the reward curve (next to a random-move baseline)
to `runs/trl/reward_curve.png`, the numbers to `metrics.json`. Ctrl-C, or SIGTERM as a scheduler sends it, stops
early and still writes the curve and metrics of the steps done (exit 130, 143).

`--env` takes any env id (`gem list`) with its registered kwargs unless `--env_kwargs` overrides them (the 1-4
setting belongs to the main job, run without `--env`); the tiny tokenizer makes every move seen in random play
a token of its own, so the tiny model can learn any game whose moves it can enumerate.
Repeat `--env` (`ID` or `ID:WEIGHT`) to train on a mixture of tasks; `--curriculum` picks how each GRPO
group's task is drawn: `uniform` by the fixed weights, `adaptive` toward the tasks whose groups disagree
(success neither 0 nor 1), `progress` toward those whose success is changing (gem_core.curriculum):

    python examples/train_trl.py --env game:GuessTheNumber-v0 --env game:GuessTheNumber-v0-easy \
        --env game:GuessTheNumber-v0-hard --curriculum adaptive

The same file trains a real model on a GPU:

    python examples/train_trl.py --model Qwen/Qwen3-0.6B --env game:Wordle-v0 \
        --use_vllm --steps 500 --max_new_tokens 512 --max_completion_length 4096

How GEM plugs into TRL (the only GEM-specific lines):
- `make_dataset(env_id, n)` writes the env id and seed into each prompt, so every copy of a prompt in
  a GRPO group replays the same episode start;
- `GemRolloutFunc` plays whole episodes with the trainer's model, token-exact, and returns the
  completion with `env_mask` 0 on the env's tokens;
- `TurnCreditGRPOTrainer` is `trl.GRPOTrainer` with per-turn advantages (REINFORCE with Return Batch
  Normalization); `--turn_credit episode` gives stock GRPO on the episode return;
- with a mixture, `GemRolloutFunc(task_sampler=TaskSampler(tasks))` draws each group's episode start and
  learns from its outcomes, and `TaskSamplerCallback` keeps the sampler's state in TRL's checkpoints.
The rest (argument checks, the tiny model and its warm start, the report) is `gem_adapters.trl.recipe`.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
import warnings
from dataclasses import dataclass, field

# Only light imports up here: a bad flag or env id is reported before torch and TRL load (~1 min on 2 cores).
from gem_adapters.trl.recipe import (DEFAULT_ENV, DEFAULT_ENV_KWARGS, REPORT_TO, TINY_VOCAB_SIZE, check_tasks,
                                     dataclass_parser, exit_code, format_warm_start, own_output_folder, report_to_list,
                                     run_metrics, save_model, step_log_callback, stop_signals, task_sampler,
                                     tiny_model_and_tokenizer, train_until_stopped, write_report)
from gem_adapters.trl.recipe import check_args, plot_reward_curve, random_episodes  # noqa: F401  (importable from here)
from gem_core.curriculum import Task


@dataclass
class Args:
    # From Python, a list of gem_core.curriculum.Task is a mixture whose tasks carry their own kwargs (the
    # curriculum bench mixes the main job's task with registered levels this way).
    env: str | list[str] | list[Task] | None = field(
        default=None,
        metadata={"help": f"GEM env id (`gem list` shows them); repeat for a mixture of tasks, ID:WEIGHT for a weighted one "
                          f"(a bare id weighs 1) (default: the main job, {DEFAULT_ENV} with {json.dumps(DEFAULT_ENV_KWARGS)})"},
    )
    env_kwargs: str | None = field(
        default=None,
        metadata={"help": "JSON kwargs for the env, every env of a mixture (default: the registry's own kwargs of each "
                          f"--env; with no --env, the main job's {json.dumps(DEFAULT_ENV_KWARGS)})"},
    )
    curriculum: str = field(
        default="uniform",
        metadata={"help": "how a mixture's tasks are drawn, one per GRPO group: 'uniform' (by the --env weights), "
                          "'adaptive' (toward tasks whose success is neither 0 nor 1) or 'progress' (toward tasks whose "
                          "success is changing); a single env always plays the dataset's episodes"},
    )
    curriculum_floor: float | None = field(
        default=None, metadata={"help": "adaptive/progress: the least probability of each task (default 0.25 / number of tasks)"})
    curriculum_window: int = field(
        default=64, metadata={"help": "adaptive/progress: recent episodes per task that its success rate counts"})
    model: str | None = field(default=None, metadata={"help": "hub id or local path; default: a tiny model built here"})
    use_vllm: bool = field(default=False, metadata={"help": "sample with vLLM (GPU) instead of model.generate"})
    steps: int = field(default=250, metadata={"help": "optimizer steps"})
    num_generations: int = field(default=2, metadata={"help": "episodes per prompt (one GRPO group)"})
    prompts_per_step: int = field(
        default=32,
        metadata={"help": "distinct episode starts per step (many starts, few copies each: a batch's return "
                          "differences then come from the moves more than from which episodes were drawn)"},
    )
    learning_rate: float = field(default=3e-3, metadata={"help": "AdamW learning rate"})
    max_new_tokens: int | None = field(
        default=None,
        metadata={"help": "most tokens the model writes per turn (default: the longest move in tokens for the tiny "
                          "model, whose moves are single tokens; 256 with --model)"},
    )
    max_completion_length: int | None = field(
        default=None,
        metadata={"help": "most tokens per episode after the prompt (default: fitted to the env's random episodes "
                          "for the tiny model; 1024 with --model)"},
    )
    turn_credit: str = field(
        default="rebn",
        metadata={"help": "'rebn' (per-turn ReBN), 'reinforce' (per-turn returns, no baseline), 'baseline' "
                          "(per-turn returns minus the batch mean) or 'episode' (GRPO)"},
    )
    gamma: float = field(default=0.9, metadata={"help": "discount over turns for the per-turn credits"})
    temperature: float = field(default=1.0, metadata={"help": "sampling temperature"})
    beta: float = field(default=0.0, metadata={"help": "KL penalty to the initial model (keeps the policy from collapsing)"})
    vocab_size: int = field(default=TINY_VOCAB_SIZE, metadata={
        "help": "tiny model only: BPE vocabulary of the tokenizer trained on the env's text (before the move tokens are added)"})
    warm_start_steps: int = field(
        default=15,
        metadata={"help": "tiny model only: supervised steps on random-move episodes before RL, which teach the move "
                          "format and no strategy (a pretrained model's prior); 0 starts RL from random weights"},
    )
    seed: int = field(default=0, metadata={"help": "seed of the model init, the sampling and the episodes"})
    out: str = field(default="runs/trl", metadata={"help": "output folder (curve, metrics, log, model)"})
    save_model: bool = field(default=False, metadata={"help": "save the trained model to OUT/model"})
    report_to: str = field(
        default="none",
        metadata={"help": "where TRL also sends its metrics (GRPOConfig.report_to): none, wandb or tensorboard (into "
                          "OUT/runs); wandb needs `pip install wandb`, tensorboard `pip install tensorboard`",
                  "choices": list(REPORT_TO)},
    )


def grpo_config(args: Args, max_completion_length: int, on_cpu: bool):
    """TRL's own config: every GRPO setting of the run (GEM adds none here)."""
    from trl import GRPOConfig

    return GRPOConfig(
        output_dir=args.out,
        max_steps=args.steps,
        per_device_train_batch_size=args.prompts_per_step * args.num_generations,
        num_generations=args.num_generations,
        max_completion_length=max_completion_length,
        learning_rate=args.learning_rate,
        temperature=args.temperature,
        beta=args.beta,
        use_vllm=args.use_vllm,
        vllm_mode="colocate",
        use_cpu=on_cpu,
        bf16=not on_cpu,
        activation_checkpointing=False,  # the new name: `gradient_checkpointing` warns (FutureWarning) since transformers 5
        logging_steps=1,
        save_strategy="no",
        report_to=report_to_list(args.report_to),  # [] for none: the console line and log.jsonl only
        disable_tqdm=True,
        seed=args.seed,
        data_seed=args.seed,
    )


def main(args: Args) -> dict:
    """Train; on Ctrl-C or SIGTERM, write the metrics and the curve of the steps done and return them (``interrupted``,
    ``interrupted_by``)."""
    tasks = check_tasks(args)  # raises InvalidRecipeArgument before anything heavy loads or is written
    with own_output_folder(args.out):  # a second run given this --out (a seed sweep with one --out) is refused
        return train(args, tasks)


def train(args: Args, tasks: list[Task]) -> dict:
    """The run itself, in an ``--out`` this process holds: the model, TRL's trainer with GEM's rollout, the report."""
    env_id, env_kwargs = tasks[0].env_id, dict(tasks[0].env_kwargs)
    envs, mixture = [(task.env_id, dict(task.env_kwargs)) for task in tasks], len(tasks) > 1
    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")  # rollout_func is marked experimental by TRL
    # TRL 1.16 reads `model.is_gradient_checkpointing` (trl/models/utils.py), an alias transformers 5 deprecated.
    warnings.filterwarnings("ignore", message="`is_gradient_checkpointing` is deprecated", category=FutureWarning)
    import torch
    from transformers.trainer_callback import PrinterCallback, ProgressCallback

    from gem_adapters.trl import GemRolloutFunc, TaskSamplerCallback, TurnCreditGRPOTrainer, env_return_reward, make_dataset

    # -- the model: a tiny one built here (CPU), or a pretrained one ---------------------------------
    torch.manual_seed(args.seed)
    max_new_tokens, max_completion_length, warm_start_seconds = args.max_new_tokens, args.max_completion_length, 0.0
    if args.model is None:
        model, tokenizer, fitted_turn_tokens, max_completion_length = tiny_model_and_tokenizer(
            env_id, env_kwargs, args.seed, max_completion_length, args.vocab_size, envs=envs)
        max_new_tokens = max_new_tokens or fitted_turn_tokens
        if args.warm_start_steps:
            warm_start_seconds = time.perf_counter()
            loss = format_warm_start(model, tokenizer, env_id, env_kwargs, args.warm_start_steps, args.seed,
                                     max_completion_length, envs=envs)
            warm_start_seconds = time.perf_counter() - warm_start_seconds
            print(f"Warm start: {args.warm_start_steps} supervised steps on random-move episodes (the move format, "
                  f"no strategy) in {warm_start_seconds:.1f} s, loss {loss:.3f}", flush=True)
        if args.beta > 0:  # TRL loads the KL reference model from a path: keep the initial weights on disk
            save_model(model.save_pretrained, os.path.join(args.out, "initial_model"))
            model = os.path.join(args.out, "initial_model")
    else:
        from transformers import AutoModelForCausalLM, AutoTokenizer

        model, tokenizer = AutoModelForCausalLM.from_pretrained(args.model), AutoTokenizer.from_pretrained(args.model)
        max_new_tokens, max_completion_length = max_new_tokens or 256, max_completion_length or 1024

    # -- the trainer: TRL's, with GEM's rollout (and a mixture's sampler) -----------------------------
    config = grpo_config(args, max_completion_length, on_cpu=not torch.cuda.is_available())
    # A mixture's episode starts come from the sampler (one draw per GRPO group); the dataset's prompts then
    # only set how many groups a step has (and would carry a system prompt).
    sampler = task_sampler(args, tasks) if mixture else None
    rollout_func = GemRolloutFunc(max_new_tokens=max_new_tokens, task_sampler=sampler)
    log_path = os.path.join(args.out, "log.jsonl")
    step_log = step_log_callback(rollout_func, args.steps, log_path)
    trainer = TurnCreditGRPOTrainer(
        model=model,
        processing_class=tokenizer,
        args=config,
        reward_funcs=env_return_reward,
        train_dataset=make_dataset(env_id, n=1000, seed_start=args.seed * 100_000, env_kwargs=env_kwargs),
        rollout_func=rollout_func,
        turn_credit=args.turn_credit,
        gamma=args.gamma,
        callbacks=[step_log] + ([TaskSamplerCallback(sampler)] if sampler else []),
    )
    for printer in (PrinterCallback, ProgressCallback):  # the compact line per step replaces TRL's dict
        trainer.remove_callback(printer)
    what = (f"{len(tasks)} tasks ({', '.join(task.name for task in tasks)}), drawn {args.curriculum}" if mixture
            else f"{env_id} {json.dumps(env_kwargs)}")
    print(f"Training on {what} for {args.steps} steps; each step's full TRL metrics go to {log_path}", flush=True)

    # -- the loop (TRL's), then the report ----------------------------------------------------------
    start = time.perf_counter()
    with stop_signals(step_log):  # Ctrl-C or SIGTERM: stop after this step, keep what was done; any later one waits
        stopped_by = train_until_stopped(trainer, step_log)
        interrupted = stopped_by is not None
        minutes = (time.perf_counter() - start + warm_start_seconds) / 60  # training = warm start + RL
        metrics = run_metrics(args, tasks, step_log, interrupted=interrupted, minutes=minutes,
                              interrupted_by=signal.Signals(stopped_by).name if interrupted else None,
                              max_new_tokens=max_new_tokens, max_completion_length=max_completion_length)
        write_report(metrics, args.out, sampler)
        if args.save_model and not interrupted:
            save_model(trainer.save_model, os.path.join(args.out, "model"))
    return metrics


def cli(argv: list[str] | None = None) -> int:
    """The command line: exit 0 when trained, 2 on a bad argument, 1 when a full disk kept the report or the model
    from being written, 130 or 143 after Ctrl-C or SIGTERM (gem_adapters.trl.recipe.exit_code)."""
    options = vars(dataclass_parser(Args, "train_trl.py", __doc__.split("\n\n")[0]).parse_args(argv))
    env = options.pop("env", None)  # None: no --env given, the main job
    return exit_code(lambda: main(Args(env=env if env is None or len(env) > 1 else env[0], **options)), "train_trl.py")


if __name__ == "__main__":
    sys.exit(cli())
