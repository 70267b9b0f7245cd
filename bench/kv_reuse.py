"""What a later turn's ``generate`` costs once ``TransformersPolicy`` keeps each episode's attention states.

A multi-turn episode's context only grows; without reuse every turn re-prefills all of it. This plays the
same greedy episodes three ways in one run, side by side, ``--repeats`` times (the machine is shared and
noisy: medians are printed):

- turn 1: a fresh policy samples ``--new-tokens`` ids for ``--rows`` first prompts of ``--context`` tokens
  (the whole prompt is prefilled: nothing was kept yet);
- turn 3, reuse: the same policy after two turns, the prompts now the context, two sampled turns and two
  observations; only the last sampled id and the new observation are prefilled;
- turn 3, full prefill: the same turn-3 prompts with reuse off (``kv_cache_tokens=0``), the cost before.

The acceptance of issue 46 is ``turn 3 with reuse <= 1.1 x turn 1`` for the same new-token count. The
model is a random-weight Qwen2 (``--layers``, ``--hidden``) over the in-process test tokenizer, float32
on the CPU; the sampled ids of both turn-3 runs are checked equal (greedy)::

    python bench/kv_reuse.py [--rows 8] [--context 768] [--new-tokens 32] [--repeats 7] [--threads 1]
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch

from gem_core.rollout import ChatTemplate, SamplingParams, TransformersPolicy
from gem_core.testing import make_tokenizer


def build_model(tokenizer, layers: int, hidden: int):
    from transformers import Qwen2Config, Qwen2ForCausalLM

    torch.manual_seed(0)
    config = Qwen2Config(
        vocab_size=len(tokenizer), hidden_size=hidden, intermediate_size=4 * hidden, num_hidden_layers=layers,
        num_attention_heads=max(1, hidden // 64), num_key_value_heads=max(1, hidden // 128), max_position_embeddings=8192,
        tie_word_embeddings=True, pad_token_id=tokenizer.pad_token_id, eos_token_id=tokenizer.eos_token_id,
    )
    return Qwen2ForCausalLM(config).eval()


def first_prompts(template: ChatTemplate, tokenizer, rows: int, context: int) -> list[list[int]]:
    """``rows`` distinct first prompts of about ``context`` tokens (a long task text, as in SWE or QA envs)."""
    words = "the quick brown fox jumps over a lazy dog while seven wizards quietly pack boxes of liquor".split()
    prompts = []
    for row in range(rows):
        text, ids = f"Task {row}:", template.initial_ids(f"Task {row}:")
        i = row
        while len(ids) < context:
            text += " " + " ".join(words[(i + k) % len(words)] for k in range(32))
            i += 7
            ids = template.initial_ids(text)
        prompts.append(ids)
    return prompts


def next_prompts(template: ChatTemplate, contexts, results, turn: int) -> list[list[int]]:
    return [
        context + ids + template.close_turn_ids() + template.observation_ids(f"Turns left: {5 - turn}. The number is lower than {40 + row}.")
        for row, (context, (ids, _)) in enumerate(zip(contexts, results))
    ]


def timed(policy: TransformersPolicy, prompts, sampling: SamplingParams):
    start = time.perf_counter()
    results = policy.sample_batch(prompts, sampling, sampling.max_new_tokens)
    return time.perf_counter() - start, results


def one_repeat(model, tokenizer, template, prompts, sampling) -> tuple[float, float, float, bool, int]:
    reuse = TransformersPolicy(model, tokenizer)
    turn1, results = timed(reuse, prompts, sampling)
    contexts = next_prompts(template, prompts, results, 1)
    _, results = timed(reuse, contexts, sampling)
    contexts = next_prompts(template, contexts, results, 2)
    turn3_reuse, reused = timed(reuse, contexts, sampling)
    turn3_full, full = timed(TransformersPolicy(model, tokenizer, kv_cache_tokens=0), contexts, sampling)
    same = [ids for ids, _ in reused] == [ids for ids, _ in full]
    return turn1, turn3_reuse, turn3_full, same, max(map(len, contexts))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=8, help="episodes per generate call")
    parser.add_argument("--context", type=int, default=768, help="tokens of each first prompt")
    parser.add_argument("--new-tokens", type=int, default=32, help="ids sampled per turn")
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--hidden", type=int, default=256)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--threads", type=int, default=1, help="torch CPU threads (1: steadier on a shared machine)")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    tokenizer = make_tokenizer("chatml")
    template = ChatTemplate.for_tokenizer(tokenizer)
    model = build_model(tokenizer, args.layers, args.hidden)
    prompts = first_prompts(template, tokenizer, args.rows, args.context)
    sampling = SamplingParams(max_new_tokens=args.new_tokens, temperature=0.0, stop_token_ids=[])
    print(f"Qwen2 {args.layers} layers x {args.hidden} hidden, float32 CPU ({args.threads} thread(s)); {args.rows} rows, "
          f"first prompts {min(map(len, prompts))}-{max(map(len, prompts))} tokens, {args.new_tokens} new tokens per turn")
    one_repeat(model, tokenizer, template, prompts, sampling)  # warm-up
    runs = [one_repeat(model, tokenizer, template, prompts, sampling) for _ in range(args.repeats)]
    turn1, reuse, full = (statistics.median(r[i] for r in runs) for i in range(3))
    print(f"turn-3 prompts: up to {runs[0][4]} tokens; greedy ids equal with and without reuse: {all(r[3] for r in runs)}")
    print(f"turn 1 (full prefill):       {turn1 * 1e3:8.1f} ms   (runs: {' '.join(f'{r[0] * 1e3:.0f}' for r in runs)})")
    print(f"turn 3, kept states reused:  {reuse * 1e3:8.1f} ms   (runs: {' '.join(f'{r[1] * 1e3:.0f}' for r in runs)})")
    print(f"turn 3, full prefill:        {full * 1e3:8.1f} ms   (runs: {' '.join(f'{r[2] * 1e3:.0f}' for r in runs)})")
    ratios = [r[1] / r[0] for r in runs]
    print(f"turn 3 with reuse / turn 1: {statistics.median(ratios):.2f}x (median of per-run ratios; target <= 1.1x); "
          f"without reuse: {statistics.median(r[2] / r[0] for r in runs):.2f}x")


if __name__ == "__main__":
    main()
