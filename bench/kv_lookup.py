"""``PrefixKVCache.lookup`` against comparing the prompt id by id with every held sequence, side by side.

A TransformersPolicy round looks every row up in the kept states. In RL the held sequences share a system prompt
and a task text, so a first-id check prunes nothing: comparing each one cost ~2 ms a lookup at 256 sequences of
2,000 ids, a second per round of 512 rows (issue 46). The lookup now skips, in O(1) by prefix hashes, every
sequence that cannot share more than the best prefix found.

    python bench/kv_lookup.py [--sequences 256] [--system 1000] [--ids 1000] [--lookups 512]

Each held sequence is the system prompt plus its own ids; each lookup is one of them plus a new observation.
Prints both times per lookup and their ratio, and checks they find the same prefix lengths.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from gem_core.rollout.kv_cache import PrefixKVCache


def compare_each(held: list[np.ndarray], prompt: list[int]) -> int:
    """The longest prefix ``prompt`` shares with a held sequence (at most all but its last id), id by id."""
    query = np.asarray(prompt, dtype=np.int64)
    limit, best = len(query) - 1, 0
    for ids in held:
        n = min(len(ids), limit)
        if n <= best or ids[0] != query[0]:
            continue
        same = ids[:n] == query[:n]
        best = max(best, n if same.all() else int(np.argmin(same)))
    return best


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sequences", type=int, default=256, help="held sequences (TransformersPolicy's default bound)")
    parser.add_argument("--system", type=int, default=1000, help="ids of the system prompt every sequence shares")
    parser.add_argument("--ids", type=int, default=1000, help="each sequence's own ids after it")
    parser.add_argument("--lookups", type=int, default=512)
    args = parser.parse_args(argv)
    rng = np.random.default_rng(0)
    system = rng.integers(0, 50_000, args.system).tolist()
    store = PrefixKVCache(max_sequences=args.sequences, max_tokens=10**9)
    held = []
    for i in range(args.sequences):
        ids = system + rng.integers(0, 50_000, args.ids + i % 64).tolist()
        store.store(ids, len(ids) - 20, None)
        held.append(np.asarray(ids, dtype=np.int64))
    prompts = [held[i % len(held)].tolist() + rng.integers(0, 50_000, 30).tolist() for i in range(args.lookups)]
    start = time.perf_counter()
    found = [store.lookup(prompt)[1] for prompt in prompts]
    lookup = (time.perf_counter() - start) / len(prompts)
    start = time.perf_counter()
    want = [compare_each(held, prompt) for prompt in prompts]
    each = (time.perf_counter() - start) / len(prompts)
    assert found == want, "the lookup and the id-by-id comparison disagree"
    print(f"{args.sequences} held sequences of {args.system} + ~{args.ids} ids, {args.lookups} lookups")
    print(f"PrefixKVCache.lookup:       {lookup * 1e6:8.1f} us per lookup")
    print(f"id by id with each:         {each * 1e6:8.1f} us per lookup")
    print(f"lookup / id by id: {lookup / each:.3f}")


if __name__ == "__main__":
    main()
