"""Attention key/value states kept between the turns of an episode, so a turn prefills only its new tokens.

A multi-turn episode's context only grows: turn ``t + 1``'s prompt is turn ``t``'s prompt, the sampled
tokens and the observation's tokens. A causal model's keys and values at a position depend on the tokens
up to it and nothing else, so the states computed while sampling turn ``t`` are exactly those turn
``t + 1`` needs for its shared prefix. :class:`PrefixKVCache` holds them per sequence, keyed by the token
ids they were computed from; a prompt reuses the longest prefix it shares with a held sequence (its own
episode's, or another episode's with the same system prompt and task text), and nothing else: a prompt
that shares no prefix is a miss, never a wrong reuse.

Bounds and eviction (the memory rule):

- at most ``max_sequences`` sequences and ``max_tokens`` tokens are held (a token costs
  ``2 x layers x kv_heads x head_dim x bytes per value``: 112 KiB for Qwen3-0.6B in bf16, so the default
  65,536 tokens hold 7 GiB there, 1 MiB for the 2-layer test model); past either bound the least recently
  used sequence goes first, and a sequence longer than ``max_tokens`` is not kept;
- a sequence is dropped when a longer one that extends it is stored (the episode's next turn), when its
  episode ends (:meth:`PrefixKVCache.release`), and every sequence when the weights change
  (:meth:`PrefixKVCache.clear`): states computed by other weights are not these weights' states.
"""

from __future__ import annotations

import numbers
import threading
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from gem_core.errors import InvalidArgument

__all__ = ["CachedSequence", "PrefixKVCache"]


@dataclass
class CachedSequence:
    """One sequence's keys and values: ``layers`` is ``(keys, values)``, each of shape
    ``(layers, 1, kv_heads, len(ids), head_dim)`` (all layers in one tensor, so a turn copies them in one go)."""

    ids: np.ndarray
    """The token ids whose states these are (int64)."""
    prompt_len: int
    """The length of the prompt that produced it (the rest are sampled ids)."""
    layers: Any
    prefix_hashes: np.ndarray = field(repr=False)
    """``prefix_hashes[k]`` hashes ``ids[: k + 1]`` (a position-weighted sum): a lookup skips in O(1) a sequence that
    cannot share more than the best prefix found so far."""

    def __len__(self) -> int:
        return len(self.ids)


def _position_weights(n: int) -> np.ndarray:
    """A fixed pseudo-random 64-bit weight per position (splitmix64 of the index): the same on every call."""
    z = np.arange(n, dtype=np.uint64) * np.uint64(0x9E3779B97F4A7C15)
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


def _prefix_hashes(ids: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """Element ``k`` hashes ``ids[: k + 1]`` (a position-weighted sum, modulo 2**64; ``weights`` at least as long as
    ``ids``). Equal prefixes hash equal, so unequal hashes prove unequal prefixes; equal hashes are checked id by id."""
    return np.cumsum(ids.astype(np.uint64) * weights[: len(ids)], dtype=np.uint64)


class PrefixKVCache:
    """Bounded, least-recently-used store of per-sequence attention states (see the module docstring).

    Thread-safe: the policy samples in a worker thread while episodes end on the event loop's thread.

    Args:
        max_sequences: most sequences held.
        max_tokens: most tokens held, all sequences together.

    Raises:
        InvalidArgument: if a limit is not a whole number >= 0 (named as TransformersPolicy's keyword).
    """

    def __init__(self, max_sequences: int = 256, max_tokens: int = 65_536):
        for name, policy_name, value in (("max_sequences", "kv_cache_sequences", max_sequences), ("max_tokens", "kv_cache_tokens", max_tokens)):
            if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 0:  # NaN turned reuse off in silence
                raise InvalidArgument(
                    f"{policy_name}={value!r:.40} must be a whole number >= 0 (0 turns reuse off); PrefixKVCache takes it as {name}."
                )
        self.max_sequences = max_sequences
        self.max_tokens = max_tokens
        self.tokens = 0
        """Tokens held now."""
        self.hits = 0
        """Prompts that reused a held prefix."""
        self.reused_tokens = 0
        """Prompt tokens not prefilled thanks to a held prefix."""
        self._entries: OrderedDict[int, CachedSequence] = OrderedDict()
        self._next_key = 0
        self._lock = threading.Lock()
        self._weights = _position_weights(0)  # grown to the longest sequence seen (_prefix_hashes)

    def _hashes(self, ids: np.ndarray) -> np.ndarray:
        weights = self._weights
        if len(weights) < len(ids):
            self._weights = weights = _position_weights(max(len(ids), 2 * len(weights)))
        return _prefix_hashes(ids, weights)

    @property
    def enabled(self) -> bool:
        """Whether it holds anything at all (both limits above zero)."""
        return self.max_sequences > 0 and self.max_tokens > 0

    def __len__(self) -> int:
        return len(self._entries)

    def lookup(self, prompt: Sequence[int]) -> tuple[CachedSequence | None, int]:
        """The held sequence sharing the longest prefix with ``prompt``, and that prefix's length.

        At most ``len(prompt) - 1``: the last prompt token is always fed to the model, which needs it to
        give the first sampled token's logits. ``(None, 0)`` when nothing is shared.
        """
        if len(prompt) < 2 or not self._entries:
            return None, 0
        query = np.asarray(prompt, dtype=np.int64)
        limit = len(query) - 1
        best, best_len = None, 0
        with self._lock:
            hashes = self._hashes(query)
            # Two passes, so the second prunes from the start: first the sequences the prompt extends whole (its own
            # episode's last turn, as a rule), then any that could share more. Comparing id by id with every held
            # sequence cost 2 ms a lookup at 256 sequences of 2,000 ids sharing a system prompt (issue 46).
            for key, entry in self._entries.items():
                n = min(len(entry.ids), limit)
                if n > best_len and entry.prefix_hashes[n - 1] == hashes[n - 1] and np.array_equal(entry.ids[:n], query[:n]):
                    best, best_len, best_key = entry, n, key
            for key, entry in self._entries.items():
                n = min(len(entry.ids), limit)
                if n <= best_len or entry.prefix_hashes[best_len] != hashes[best_len]:
                    continue  # it differs from the prompt within the best prefix found: it cannot share more
                same = entry.ids[:n] == query[:n]
                shared = n if same.all() else int(np.argmin(same))
                if shared > best_len:
                    best, best_len, best_key = entry, shared, key
            if best is not None:
                self._entries.move_to_end(best_key)
                self.hits += 1
                self.reused_tokens += best_len
        return best, best_len

    def store(self, ids: Sequence[int], prompt_len: int, layers: Any, *, extends: CachedSequence | None = None) -> None:
        """Hold ``layers`` as the states of ``ids``; ``extends``, a held sequence that ``ids`` extend, is dropped."""
        with self._lock:
            if extends is not None:
                self._drop(lambda entry: entry is extends and len(extends) <= len(ids))
            if not self.enabled or len(ids) > self.max_tokens or not ids:
                return
            held = np.asarray(ids, dtype=np.int64)
            self._entries[self._next_key] = CachedSequence(held, prompt_len, layers, self._hashes(held))
            self._next_key += 1
            self.tokens += len(ids)
            while len(self._entries) > self.max_sequences or self.tokens > self.max_tokens:
                _, evicted = self._entries.popitem(last=False)
                self.tokens -= len(evicted)

    def release(self, token_ids: Sequence[int]) -> int:
        """Drop the sequences of an episode that ended with context ``token_ids``; returns how many.

        A sequence is the episode's when ``token_ids`` continue it past its prompt (at least one sampled
        id shared), so another episode that only shares the system prompt or the task text keeps its own.
        """
        if not self._entries:
            return 0
        done = np.asarray(token_ids, dtype=np.int64)

        def ended(entry: CachedSequence) -> bool:
            need = min(len(entry), entry.prompt_len + 1)
            return len(done) >= need and bool((entry.ids[:need] == done[:need]).all())

        with self._lock:
            return self._drop(ended)

    def clear(self) -> None:
        """Drop every sequence (the weights changed)."""
        with self._lock:
            self._entries.clear()
            self.tokens = 0

    def _drop(self, condition: Any) -> int:
        keys = [key for key, entry in self._entries.items() if condition(entry)]
        for key in keys:
            self.tokens -= len(self._entries.pop(key))
        return len(keys)
