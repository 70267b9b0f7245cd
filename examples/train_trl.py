"""Train an LLM agent on a multi-turn GEM env with TRL's stock GRPOTrainer.

With no arguments this runs on a CPU: a tiny transformer with random weights and a tokenizer trained
right here learn to play GuessTheNumber (1-4, three guesses, "higher"/"lower" hints) from the env's
rewards alone. The tokenizer makes each move (`\boxed{3}`) and each of this game's observations a single
token, and a turn is one sampled token, so the run fits a CPU. A short warm start on random-move episodes
teaches the move format only (a pretrained model's prior); RL then finds the binary search the hints allow:
random moves win 57% of the games, a fixed guessing order at most 75%, the trained model 99.7-99.9% on seeds
0-4 (mean return over the last 20% of steps; bench/learning/results/README.md tells how). Each step prints
one line (step, mean return, success rate, seconds); TRL's full metrics go to `runs/trl/log.jsonl`,
the reward curve (next to a random-move baseline) to `runs/trl/reward_curve.png` and the numbers to
`metrics.json`. Ctrl-C stops early and still writes the curve and metrics of the steps done (exit 130).

`--env` takes any env id (`gem list`); its registered kwargs apply unless `--env_kwargs` overrides them
(the 1-4 setting above belongs to the main job, run without `--env`: a named `game:GuessTheNumber-v0` is the
registered game, alone or in a mixture). The tiny tokenizer makes every move seen in
random play a token of its own, so the tiny model can learn any game whose moves it can enumerate.

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
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import signal
import sys
import time
import typing
import warnings
from dataclasses import dataclass, field

# Only light imports up here: a bad flag or env id is reported before torch and TRL load (~1 min on 2 cores).
import numpy as np

import gem_core
from gem_core.cli.options import OneLineErrors, env_kwargs_option, folder_problem
from gem_core.curriculum import Task, TaskError, TaskSampler
from gem_core.registry import UnknownEnvError
from gem_core.rows import MixtureError, parse_env_options

DEFAULT_ENV = "game:GuessTheNumber-v0"
#: The main job's own setting (1-4 in three guesses: small enough to learn on a CPU); only when no --env is given.
#: A named --env (this id too, alone or in a mixture) gets the kwargs its registry spec declares (`--env_kwargs` overrides).
DEFAULT_ENV_KWARGS = {"min_number": 1, "max_number": 4, "max_turns": 3}
#: Up to this many distinct moves become whole tokens of the tiny tokenizer (games' move sets fit).
MAX_MOVE_TOKENS = 4096
#: BPE vocabulary of the tiny tokenizer: enough merges that GuessTheNumber's observations are one token each,
#: so the hint is one token a few positions before the move (with 320 it was spread over ~10 fragments).
TINY_VOCAB_SIZE = 1000
#: How each GRPO group's task is drawn from a mixture (gem_core.curriculum weightings).
CURRICULA = {"uniform": "uniform", "adaptive": "band", "progress": "progress"}


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
        default=None,
        metadata={"help": "adaptive/progress: the least probability of each task (default 0.25 / number of tasks)"},
    )
    curriculum_window: int = field(
        default=64, metadata={"help": "adaptive/progress: recent episodes per task that its success rate counts"},
    )
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
    vocab_size: int = field(
        default=TINY_VOCAB_SIZE,
        metadata={"help": "tiny model only: BPE vocabulary of the tokenizer trained on the env's text (before the "
                          "move tokens are added)"},
    )
    warm_start_steps: int = field(
        default=15,
        metadata={"help": "tiny model only: supervised steps on random-move episodes before RL, which teach the move "
                          "format and no strategy (a pretrained model's prior); 0 starts RL from random weights"},
    )
    seed: int = field(default=0, metadata={"help": "seed of the model init, the sampling and the episodes"})
    out: str = field(default="runs/trl", metadata={"help": "output folder (curve, metrics, log, model)"})
    save_model: bool = field(default=False, metadata={"help": "save the trained model to OUT/model"})


class UsageError(ValueError):
    """A bad argument, found before anything heavy loads or anything is written."""


def env_mixture(args: Args) -> dict[str, float]:
    """``--env`` as ``{env_id: weight}`` (one id: weight 1; repeated bare ids: weight 1 each; none: the main job's)."""
    if args.env is None:
        return {DEFAULT_ENV: 1.0}
    try:
        parsed = parse_env_options([args.env] if isinstance(args.env, str) else list(args.env), "--env")
    except MixtureError as error:
        raise UsageError(str(error)) from None
    except UnknownEnvError as error:
        raise UsageError(f"--env: {error}") from None
    if isinstance(parsed, dict):
        return parsed
    ids = [parsed] if isinstance(parsed, str) else parsed
    if len(set(ids)) != len(ids):
        raise UsageError(f"--env {next(i for i in ids if ids.count(i) > 1)} is given twice: give each env once (ID:WEIGHT for a larger share)")
    return dict.fromkeys(ids, 1.0)


def env_kwargs_for(args: Args, env_id: str | None = None) -> dict:
    """The env kwargs of ``env_id`` (default: the run's only env) in this run, checked by building the env once
    (cheap; no torch)."""
    env_id = env_id or next(iter(env_mixture(args)))
    if args.env_kwargs is None or args.env_kwargs == "":
        # Only the main job (no --env) plays its 1-4 setting; a named env, in a mixture too, is the registered one.
        env_kwargs = dict(DEFAULT_ENV_KWARGS) if args.env is None else {}
    else:
        try:
            env_kwargs = env_kwargs_option(args.env_kwargs, "--env_kwargs")
        except ValueError as error:
            raise UsageError(str(error)) from None
    try:
        registered = gem_core.spec(env_id).kwargs
    except UnknownEnvError as error:
        raise UsageError(f"--env: {error}") from None
    try:
        gem_core.make(env_id, **env_kwargs).close()
    except TypeError as error:
        raise UsageError(
            f"--env_kwargs {json.dumps(env_kwargs)} do not fit {env_id} ({error}); its registered kwargs are "
            f"{json.dumps(registered, default=str)}: pass only those names, or --env_kwargs '{{}}' to use them as they are"
        ) from None
    except ValueError as error:  # a known name with a value the env refuses (GuessTheNumber: max_number below min_number)
        if args.env_kwargs:
            raise UsageError(f"--env_kwargs {json.dumps(env_kwargs)} are not valid for {env_id}: {error} Change the values "
                             f"(its registered kwargs are {json.dumps(registered, default=str)})") from None
        raise UsageError(f"--env {env_id} cannot be built with the kwargs {json.dumps(env_kwargs)}: {error} "
                         "Set them with --env_kwargs") from None
    except ImportError as error:
        raise UsageError(f"--env {env_id} cannot be built here: {error}") from None
    return env_kwargs


def check_args(args: Args) -> dict:
    """Everything that can be wrong with the arguments, before torch loads; returns the env kwargs (of the first
    env of a mixture: :func:`check_tasks` gives every task's)."""
    return dict(check_tasks(args)[0].env_kwargs)


def check_tasks(args: Args) -> list[Task]:
    """Everything that can be wrong with the arguments, before torch loads; returns the run's tasks (one per
    ``--env``, with its kwargs and weight)."""
    if args.turn_credit not in ("rebn", "reinforce", "baseline", "episode"):
        raise UsageError(f"--turn_credit must be 'rebn', 'reinforce', 'baseline' or 'episode', got {args.turn_credit!r}")
    if args.vocab_size < 259:
        raise UsageError(f"--vocab_size must be at least 259 (the 256 bytes and 3 special tokens), got {args.vocab_size}")
    if args.warm_start_steps < 0:
        raise UsageError(f"--warm_start_steps must be 0 or more, got {args.warm_start_steps}")
    for name in ("steps", "num_generations", "prompts_per_step"):
        if getattr(args, name) < 1:
            raise UsageError(f"--{name} must be at least 1, got {getattr(args, name)}")
    if args.num_generations < 2:
        raise UsageError("--num_generations must be at least 2 (GRPO compares the episodes of a group)")
    for name in ("max_new_tokens", "max_completion_length"):
        if getattr(args, name) is not None and getattr(args, name) < 1:
            raise UsageError(f"--{name} must be at least 1, got {getattr(args, name)}")
    if args.curriculum not in CURRICULA:
        raise UsageError(f"--curriculum must be 'uniform', 'adaptive' or 'progress', got {args.curriculum!r}")
    if problem := folder_problem(args.out):
        raise UsageError(f"--out {problem}: give a folder path (new or existing)")
    if isinstance(args.env, list) and args.env and all(isinstance(task, Task) for task in args.env):
        tasks = list(args.env)  # from Python: each task's kwargs are its own
        for task in tasks:
            args_for_task = dataclasses.replace(args, env=task.env_id, env_kwargs=json.dumps(dict(task.env_kwargs)))
            env_kwargs_for(args_for_task)  # built once: kwargs that do not fit fail here, before torch loads
    else:
        tasks = [Task(env_id, env_kwargs_for(args, env_id), weight=weight) for env_id, weight in env_mixture(args).items()]
    if len(tasks) == 1 and args.curriculum != "uniform":
        raise UsageError(f"--curriculum {args.curriculum} chooses among tasks, and there is one: repeat --env for a mixture "
                         "(e.g. a game's -easy, -v0 and -hard levels)")
    if len(tasks) > 1:
        task_sampler(args, tasks)  # a floor or window that cannot work fails here, before torch loads
    return tasks


def task_sampler(args: Args, tasks: list[Task]) -> TaskSampler:
    """Where a mixture's episodes start: one draw per GRPO group, seeded by ``--seed`` (episode seeds as the
    single-env dataset's, from ``seed * 100_000``)."""
    try:
        return TaskSampler(tasks, weighting=CURRICULA[args.curriculum], seed=args.seed, seed_start=args.seed * 100_000,
                           floor=args.curriculum_floor, window=args.curriculum_window,
                           min_episodes=min(8, args.curriculum_window), group_size=args.num_generations)
    except (TaskError, ValueError) as error:
        raise UsageError(f"--curriculum: {error}") from None


def random_episodes(env_id: str, env_kwargs: dict, episodes: int = 200) -> list[tuple[list[str], list[str]]]:
    """``(observations, moves)`` of episodes played with ``env.sample_random_action()`` (the tokenizer's corpus)."""
    env, played = gem_core.make(env_id, **env_kwargs), []
    for episode_seed in range(episodes):
        obs, _ = env.reset(seed=episode_seed)
        observations, moves = [obs], []
        for _ in range(64):  # long games are cut: a sample of their text is enough
            moves.append(env.sample_random_action())
            obs, _, terminated, truncated, _ = env.step(moves[-1])
            observations.append(obs)
            if terminated or truncated:
                break
        played.append((observations, moves))
    env.close()
    return played


def tiny_model_and_tokenizer(env_id: str, env_kwargs: dict, seed: int, max_completion_length: int | None,
                             vocab_size: int = TINY_VOCAB_SIZE, *, envs: list[tuple[str, dict]] | None = None):
    """A 2-layer transformer with random weights and a BPE tokenizer trained on the env's own text.

    Every distinct well-formed move seen in random play (``\\boxed{3}``, ``\\boxed{1 2 4}``) is a token of its
    own, so one sampled token is one legal move and the model learns which moves pay; a byte-level
    fragment of a move would always be malformed and earn only the format penalty. ``envs`` (``(env_id,
    env_kwargs)`` pairs, default ``env_id``'s alone) are the envs of a mixture: the text of all of them.
    Returns ``(model, tokenizer, max_new_tokens, max_completion_length)``.
    """
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast, Qwen2Config, Qwen2ForCausalLM

    played = [episode for mixed_id, mixed_kwargs in (envs or [(env_id, env_kwargs)])
              for episode in random_episodes(mixed_id, mixed_kwargs)]
    corpus = []
    for observations, moves in played:
        corpus += observations
        for move in moves[:3]:
            corpus += [move] * 20  # moves weigh more: they are what the model must write
    # The chat template's role lines, one token each: the last observation then sits four tokens before the move.
    corpus += ["user\n", "assistant\n"] * len(played)
    specials = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
    bpe = Tokenizer(models.BPE())
    # No regex split: merges may cross punctuation, so a whole move such as \boxed{2} can become one token.
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    bpe.decoder = decoders.ByteLevel()
    bpe.train_from_iterator(corpus, trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=specials, show_progress=False,
                                                        initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=bpe, eos_token="<|im_end|>", pad_token="<|endoftext|>")
    distinct_moves = sorted({move for _, moves in played for move in moves})
    if len(distinct_moves) <= MAX_MOVE_TOKENS:
        tokenizer.add_tokens(distinct_moves)  # those BPE already made single tokens stay as they are
    tokenizer.chat_template = (
        "{% for m in messages %}{{ '<|im_start|>' + m['role'] + '\n' + m['content'] + '<|im_end|>\n' }}{% endfor %}"
        "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
    )

    def length(text: str) -> int:
        return len(tokenizer(text, add_special_tokens=False)["input_ids"])

    max_new_tokens = max(length(move) for move in distinct_moves)
    turn_overhead = length("<|im_end|>\n<|im_start|>user\n<|im_end|>\n<|im_start|>assistant\n")
    if max_completion_length is None:  # the longest random episode, with room for longer error messages
        longest = max(
            sum(max_new_tokens + 1 + length(obs) + turn_overhead for obs in observations[1:])
            for observations, _ in played
        )
        max_completion_length = int(1.5 * longest) + 16
    longest_prompt = max(length(observations[0]) for observations, _ in played) + 16
    torch.manual_seed(seed)
    config = Qwen2Config(vocab_size=len(tokenizer), hidden_size=128, intermediate_size=256, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2,
                         max_position_embeddings=max(512, longest_prompt + max_completion_length + 8),
                         eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id)
    return Qwen2ForCausalLM(config), tokenizer, max_new_tokens, max_completion_length


def format_warm_start(model, tokenizer, env_id: str, env_kwargs: dict, steps: int, seed: int, max_completion_length: int,
                      episodes: int = 200, batch_size: int = 32, learning_rate: float = 3e-3,
                      envs: list[tuple[str, dict]] | None = None) -> float:
    """Teach the tiny model the move format, and nothing of the strategy, before RL; returns the last loss.

    A pretrained model arrives knowing how to write a move; a random-weight one spends its first RL steps
    (and its entropy) finding the few move tokens among hundreds, and settles on a fixed guessing order
    that lacks some moves before the hints pay off (issue 29). So: ``steps`` supervised steps on episodes
    of random moves (``env.sample_random_action()``), the loss on the move tokens only. The moves ignore
    the hints, so what is learnt is "write one of these moves, uniformly": the prior RL then shapes.
    The episodes are played through ``EpisodeSession``, so their tokens are exactly those of RL's rollouts.
    ``envs`` (a mixture's ``(env_id, env_kwargs)`` pairs, default ``env_id``'s alone) each give ``episodes`` of them.
    """
    import asyncio

    import torch

    from gem_core.rollout import EpisodeSession

    async def play(played_id: str, played_kwargs: dict, episode_seed: int) -> tuple[list[int], list[int]]:
        label = {"env_id": played_id, "seed": episode_seed, "env_kwargs": played_kwargs}
        session = EpisodeSession.from_label(label, tokenizer, max_response_tokens=max_completion_length)  # placed as RL's are
        try:
            await session.start()
            while not session.done and session.num_turns < 64:
                move = tokenizer(session.env.sample_random_action(), add_special_tokens=False)["input_ids"]
                await session.step(move, finish_reason="length")
            trajectory = session.trajectory()
        finally:
            await session.aclose()
        ids = list(trajectory.prompt_ids) + list(trajectory.response_ids)
        return ids, [len(trajectory.prompt_ids) + i for i, m in enumerate(trajectory.loss_mask) if m]

    examples = [asyncio.run(play(played_id, played_kwargs, 20_000_000 + episode_seed))
                for played_id, played_kwargs in (envs or [(env_id, env_kwargs)]) for episode_seed in range(episodes)]
    examples = [(ids, positions) for ids, positions in examples if positions]
    if not examples:  # no episode let a move in (a prompt longer than the token budget): nothing to teach
        return float("nan")
    rng = np.random.default_rng(seed)
    optimizer = torch.optim.AdamW(model.parameters(), lr=learning_rate)
    model.train()
    loss = torch.tensor(float("nan"))
    for _ in range(steps):
        batch = [examples[i] for i in rng.choice(len(examples), size=min(batch_size, len(examples)), replace=False)]
        width = max(len(ids) for ids, _ in batch)
        input_ids = torch.full((len(batch), width), tokenizer.pad_token_id)
        attention_mask = torch.zeros((len(batch), width), dtype=torch.long)
        labels = torch.full((len(batch), width), -100)
        for row, (ids, positions) in enumerate(batch):
            input_ids[row, : len(ids)] = torch.tensor(ids)
            attention_mask[row, : len(ids)] = 1
            labels[row, positions] = input_ids[row, positions]
        loss = model(input_ids=input_ids, attention_mask=attention_mask, labels=labels).loss
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
    return loss.item()


def random_move_return(env_id: str, env_kwargs: dict, episodes: int = 2000) -> float:
    """Mean return of a policy that plays `env.sample_random_action()` every turn (the baseline)."""
    env, total = gem_core.make(env_id, **env_kwargs), 0.0
    for episode_seed in range(episodes):
        env.reset(seed=10_000 + episode_seed)
        done = False
        while not done:
            _, reward, terminated, truncated, _ = env.step(env.sample_random_action())
            total, done = total + float(reward), terminated or truncated
    return total / episodes


class StepLog:
    """One console line per step (step, mean return, success rate, seconds); TRL's whole dict to ``log.jsonl``.

    A ``transformers.TrainerCallback`` (built in :func:`step_log_callback`, so this module imports no torch).
    """

    def __init__(self, rollout_func, total_steps: int, log_path: str):
        self.rollout_func, self.total_steps, self.log_path = rollout_func, total_steps, log_path
        self.rewards: list[float] = []
        self.success: list[float] = []
        self.frac_reward_zero_std: list[float | None] = []  # groups whose episodes all scored the same
        self.task_metrics: list[dict[str, float]] = []  # per step: gem/task/... and gem/curriculum/... of TRL's log
        self.stop_requested = False  # set by Ctrl-C: training ends after the step under way
        self._last = time.perf_counter()

    def on_step_end(self, args, state, control, **kwargs):
        if self.stop_requested:
            control.should_training_stop = True

    def on_log(self, args, state, control, logs=None, **kwargs):
        if not logs or "reward" not in logs:
            return
        trajectories = self.rollout_func.last_trajectories
        success = sum(bool(t.metrics.get("success")) for t in trajectories) / max(1, len(trajectories))
        now, seconds = time.perf_counter(), time.perf_counter() - self._last
        self._last = now
        self.rewards.append(float(logs["reward"]))
        self.success.append(success)
        self.frac_reward_zero_std.append(logs.get("frac_reward_zero_std"))
        self.task_metrics.append({k: v for k, v in logs.items() if k.startswith(("gem/task/", "gem/curriculum/"))})
        print(f"step {state.global_step:>4}/{self.total_steps}  return {logs['reward']:+.3f}  "
              f"success {success:.2f}  {seconds:5.1f} s", flush=True)
        with open(self.log_path, "a") as f:
            f.write(json.dumps({"step": state.global_step, "success": success, "seconds": seconds, **logs}) + "\n")


def step_log_callback(rollout_func, total_steps: int, log_path: str):
    from transformers import TrainerCallback

    return type("StepLogCallback", (StepLog, TrainerCallback), {})(rollout_func, total_steps, log_path)


def main(args: Args) -> dict:
    """Train; on Ctrl-C, write the metrics and the curve of the steps done and return them (``interrupted``)."""
    tasks = check_tasks(args)  # raises UsageError before anything heavy loads or is written
    env_id, env_kwargs = tasks[0].env_id, dict(tasks[0].env_kwargs)
    envs = [(task.env_id, dict(task.env_kwargs)) for task in tasks]
    mixture = len(tasks) > 1

    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")  # rollout_func is marked experimental by TRL
    # TRL 1.16 reads `model.is_gradient_checkpointing` (trl/models/utils.py), an alias transformers 5 deprecated;
    # the config below uses the new name, so the one warning left is TRL's own, not the user's business.
    warnings.filterwarnings("ignore", message="`is_gradient_checkpointing` is deprecated", category=FutureWarning)
    import torch
    from transformers.trainer_callback import PrinterCallback, ProgressCallback
    from trl import GRPOConfig

    from gem_adapters.trl import GemRolloutFunc, TaskSamplerCallback, TurnCreditGRPOTrainer, env_return_reward, make_dataset

    torch.manual_seed(args.seed)
    max_new_tokens, max_completion_length = args.max_new_tokens, args.max_completion_length
    initial_model_dir, warm_start_seconds = None, 0.0
    if args.model is None:
        model, tokenizer, fitted_turn_tokens, max_completion_length = tiny_model_and_tokenizer(
            env_id, env_kwargs, args.seed, max_completion_length, args.vocab_size, envs=envs
        )
        max_new_tokens = max_new_tokens or fitted_turn_tokens
        if args.warm_start_steps:
            warm_start_seconds = time.perf_counter()
            loss = format_warm_start(model, tokenizer, env_id, env_kwargs, args.warm_start_steps, args.seed,
                                     max_completion_length, envs=envs)
            warm_start_seconds = time.perf_counter() - warm_start_seconds
            print(f"Warm start: {args.warm_start_steps} supervised steps on random-move episodes (the move format, "
                  f"no strategy) in {warm_start_seconds:.1f} s, loss {loss:.3f}", flush=True)
        if args.beta > 0:  # TRL loads the KL reference model from a path: keep the initial weights on disk
            initial_model_dir = os.path.join(args.out, "initial_model")
            model.save_pretrained(initial_model_dir)
            model = initial_model_dir
    else:
        from transformers import AutoModelForCausalLM, AutoTokenizer

        model, tokenizer = AutoModelForCausalLM.from_pretrained(args.model), AutoTokenizer.from_pretrained(args.model)
        max_new_tokens, max_completion_length = max_new_tokens or 256, max_completion_length or 1024
    on_cpu = not torch.cuda.is_available()

    config = GRPOConfig(
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
        report_to=[],
        disable_tqdm=True,
        seed=args.seed,
        data_seed=args.seed,
    )
    # A mixture's episode starts come from the sampler (one draw per GRPO group); the dataset's prompts then
    # only set how many groups a step has (and would carry a system prompt).
    sampler = task_sampler(args, tasks) if mixture else None
    rollout_func = GemRolloutFunc(max_new_tokens=max_new_tokens, task_sampler=sampler)
    os.makedirs(args.out, exist_ok=True)
    log_path = os.path.join(args.out, "log.jsonl")
    open(log_path, "w").close()
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
    for printer in (PrinterCallback, ProgressCallback):  # the compact line above replaces TRL's dict per step
        trainer.remove_callback(printer)
    what = (f"{len(tasks)} tasks ({', '.join(task.name for task in tasks)}), drawn {args.curriculum}" if mixture
            else f"{env_id} {json.dumps(env_kwargs)}")
    print(f"Training on {what} for {args.steps} steps; each step's full TRL metrics go to {log_path}", flush=True)

    def request_stop(signum, frame):
        # A flag, not a KeyboardInterrupt: one raised inside a rollout's event loop can be lost in its
        # cancellation, and one raised in backward leaves the step half done. A second Ctrl-C stops at once.
        if step_log.stop_requested:
            raise KeyboardInterrupt
        step_log.stop_requested = True
        print("\nCtrl-C: stopping after this step (Ctrl-C again to stop at once).", file=sys.stderr, flush=True)

    start, interrupted = time.perf_counter(), False
    previous_handler = signal.signal(signal.SIGINT, request_stop)
    try:
        trainer.train()
    except KeyboardInterrupt:
        interrupted = True
    finally:
        signal.signal(signal.SIGINT, previous_handler)
    interrupted = interrupted or step_log.stop_requested
    if interrupted:
        print(f"Interrupted after {len(step_log.rewards)} steps; saving what was done.", file=sys.stderr, flush=True)
    minutes = (time.perf_counter() - start + warm_start_seconds) / 60  # training = warm start + RL

    curve = np.array(step_log.rewards)
    fifth = max(1, len(curve) // 5)
    random_per_task = {task.name: random_move_return(task.env_id, dict(task.env_kwargs)) for task in tasks}
    metrics = {
        "env": {task.env_id: task.weight for task in tasks} if mixture else env_id,
        "env_kwargs": env_kwargs,
        "tasks": [task.to_json() for task in tasks],
        "curriculum": args.curriculum if mixture else None,
        "seed": args.seed,
        "turn_credit": args.turn_credit,
        "steps": len(curve),
        "warm_start_steps": args.warm_start_steps if args.model is None else 0,
        "interrupted": interrupted,
        "minutes": round(minutes, 2),
        "max_new_tokens": max_new_tokens,
        "max_completion_length": max_completion_length,
        "first_20pct_reward": float(curve[:fifth].mean()) if len(curve) else None,
        "last_20pct_reward": float(curve[-fifth:].mean()) if len(curve) else None,
        # A mixture's: the tasks' random-move returns averaged by their --env weights.
        "random_move_reward": sum(task.weight * random_per_task[task.name] for task in tasks) / sum(task.weight for task in tasks),
        "random_move_reward_per_task": random_per_task,
        "reward_per_step": curve.tolist(),
        "success_per_step": step_log.success,
        "frac_reward_zero_std_per_step": step_log.frac_reward_zero_std,
    }
    if mixture:
        metrics["task_metrics_per_step"] = step_log.task_metrics
        from gem_core.curriculum import save_sampler_state

        metrics["sampler_state_file"] = str(save_sampler_state(sampler, args.out))
    with open(os.path.join(args.out, "metrics.json"), "w") as f:
        json.dump(metrics, f, indent=2)
    if len(curve):
        plot_reward_curve(curve, metrics, os.path.join(args.out, "reward_curve.png"))
    if args.save_model and not interrupted:
        trainer.save_model(os.path.join(args.out, "model"))
    if len(curve):
        print(
            f"\nreward: first 20% {metrics['first_20pct_reward']:.3f} -> last 20% {metrics['last_20pct_reward']:.3f} "
            f"(random moves: {metrics['random_move_reward']:.3f}) in {minutes:.1f} min; curve: {args.out}/reward_curve.png"
        )
    return metrics


def plot_reward_curve(curve: np.ndarray, metrics: dict, path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    steps = np.arange(1, len(curve) + 1)
    window = max(1, len(curve) // 15)
    smooth = np.convolve(curve, np.ones(window) / window, mode="valid")
    # Constrained layout keeps the title and the legend inside the figure; the legend sits below the axes,
    # where it can hide no part of the curve.
    fig, ax = plt.subplots(figsize=(7, 4.6), layout="constrained")
    ax.plot(steps, curve, color="tab:blue", alpha=0.3, label="mean episode return per step")
    ax.plot(steps[window - 1 :], smooth, color="tab:blue", label=f"moving average ({window} steps)")
    ax.axhline(metrics["random_move_reward"], color="tab:red", linestyle="--", label="random moves")
    ax.set_xlabel("training step")
    ax.set_ylabel("episode return")
    env = metrics["env"] if isinstance(metrics["env"], str) else f"{len(metrics['env'])} tasks ({metrics['curriculum']})"
    ax.set_title(f"TRL GRPOTrainer ({metrics['turn_credit']} credit) on {env}\n{metrics['minutes']:.1f} min", fontsize=11)
    fig.legend(loc="outside lower center", ncols=3, fontsize=9)
    fig.savefig(path, dpi=120)
    plt.close(fig)


class _Parser(OneLineErrors, argparse.ArgumentParser):
    pass


class _DefaultsOnce(argparse.ArgumentDefaultsHelpFormatter):
    """Appends "(default: X)" only where the help does not already say what the default is (a default that
    depends on the model or the env is explained in words there; argparse would add "(default: None)")."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        if "default" in (action.help or "").lower():
            return action.help
        return super()._get_help_string(action)


def build_parser() -> argparse.ArgumentParser:
    """``--name value`` for every field of :class:`Args`.

    transformers' ``HfArgumentParser`` builds the same parser, but importing transformers takes 1.2 s of
    CPU (4 s on this loaded 2-core machine) before a mistyped flag could be reported.
    """
    parser = _Parser(prog="train_trl.py", description=__doc__.split("\n\n")[0], formatter_class=_DefaultsOnce)
    hints = typing.get_type_hints(Args)
    for f in dataclasses.fields(Args):
        kind = hints[f.name]
        if kind is bool:
            parser.add_argument(f"--{f.name}", action="store_true", help=f.metadata["help"])
            continue
        if list[str] in typing.get_args(kind):  # --env: repeatable (a mixture); absent: the main job
            parser.add_argument(f"--{f.name}", action="append", default=argparse.SUPPRESS, metavar="ID[:WEIGHT]",
                                help=f.metadata["help"])
            continue
        kind = next(t for t in typing.get_args(kind) if t is not type(None)) if typing.get_args(kind) else kind
        parser.add_argument(f"--{f.name}", type=kind, default=f.default, help=f.metadata["help"])
    return parser


def cli(argv: list[str] | None = None) -> int:
    """The command line: exit 0 when trained, 2 on a bad argument (one line, nothing written), 130 on Ctrl-C."""
    options = vars(build_parser().parse_args(argv))
    env = options.pop("env", None)  # None: no --env given, the main job
    args = Args(env=env if env is None or len(env) > 1 else env[0], **options)
    try:
        metrics = main(args)
    except UsageError as error:
        print(f"train_trl.py: error: {error}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:  # before training started: nothing to save
        print("\nInterrupted before the first step; nothing written.", file=sys.stderr)
        return 130
    return 130 if metrics["interrupted"] else 0


if __name__ == "__main__":
    sys.exit(cli())
