"""TransformersPolicy keeps each episode's attention states between turns (issue 46): a turn prefills only its
new tokens, and greedy outputs and log-probs are those of a full prefill."""

from __future__ import annotations

import asyncio
import copy

import pytest
import torch

from gem_core.rollout import ChatTemplate, SamplingParams, TransformersPolicy
from gem_core.rollout.kv_cache import PrefixKVCache
from gem_core.rollout.policy_version import VersionedPolicy
from gem_core.rollout.runner import run_episodes

GREEDY = SamplingParams(max_new_tokens=6, temperature=0.0, stop_token_ids=[])
TASKS = ["Guess a number between 1 and 20.", "Hi.", "Play Wordle: five letters, six tries."]


def play(policy, tokenizer, prompts, sampling=GREEDY, turns=3, joins=None):
    """Sample ``turns`` turns of one episode per prompt, each next prompt the context plus an observation;
    ``joins`` (turn -> prompts) adds new episodes' first prompts to that turn's batch."""
    template = ChatTemplate.for_tokenizer(tokenizer)
    contexts = [list(p) for p in prompts]
    out = []
    for turn in range(turns):
        contexts += [list(p) for p in (joins or {}).get(turn, [])]
        results = policy.sample_batch(contexts, sampling, sampling.max_new_tokens)
        out.append(results)
        contexts = [
            context + ids + template.close_turn_ids() + template.observation_ids(f"turn {turn} of episode {i}: try again")
            for i, (context, (ids, _)) in enumerate(zip(contexts, results))
        ]
    return out


def assert_same(got, want):
    for got_turn, want_turn in zip(got, want, strict=True):
        for (ids, logprobs), (want_ids, want_logprobs) in zip(got_turn, want_turn, strict=True):
            assert ids == want_ids
            assert logprobs == pytest.approx(want_logprobs, abs=1e-4)


def first_prompts(tokenizer):
    template = ChatTemplate.for_tokenizer(tokenizer)
    return [template.initial_ids(task) for task in TASKS]


def test_greedy_turns_with_kept_states_equal_a_full_prefill_and_prefill_only_the_new_tokens(tiny_tokenizer, tiny_model):
    prompts = first_prompts(tiny_tokenizer)
    full = play(TransformersPolicy(tiny_model, tiny_tokenizer, kv_cache_tokens=0), tiny_tokenizer, prompts)
    policy = TransformersPolicy(tiny_model, tiny_tokenizer)
    assert_same(play(policy, tiny_tokenizer, prompts), full)
    # Turns 2 and 3 each reused their whole context but the sampled turn's last id and the observation.
    assert policy.kv_cache.hits >= 2 * len(prompts)
    assert policy.kv_cache.reused_tokens >= 2 * sum(map(len, prompts))
    assert len(policy.kv_cache) == len(prompts), "an episode's earlier turn is dropped once its next turn extends it"


def test_rows_that_stop_at_different_steps_keep_their_states_up_to_their_stop(tiny_tokenizer, tiny_model):
    prompts = first_prompts(tiny_tokenizer)
    free = play(TransformersPolicy(tiny_model, tiny_tokenizer, kv_cache_tokens=0), tiny_tokenizer, prompts, turns=1)
    stop = free[0][0][0][2]  # row 0's third greedy id: row 0 stops there, the others run on (or stop elsewhere)
    sampling = SamplingParams(max_new_tokens=6, temperature=0.0, stop_token_ids=[stop])
    want = play(TransformersPolicy(tiny_model, tiny_tokenizer, kv_cache_tokens=0), tiny_tokenizer, prompts, sampling)
    cut = [[(ids[: ids.index(stop) + 1] if stop in ids else ids) for ids, _ in turn] for turn in want]
    assert any(len(ids) < sampling.max_new_tokens for turn in cut for ids in turn), "no row stopped early"
    got = play(TransformersPolicy(tiny_model, tiny_tokenizer), tiny_tokenizer, prompts, sampling)
    assert_same(got, want)


def test_a_batch_mixing_continued_episodes_and_new_ones_equals_a_full_prefill(tiny_tokenizer, tiny_model):
    prompts = first_prompts(tiny_tokenizer)
    joins = {1: [prompts[1]], 2: [prompts[0], prompts[2]]}
    full = play(TransformersPolicy(tiny_model, tiny_tokenizer, kv_cache_tokens=0), tiny_tokenizer, prompts[:2], joins=joins)
    policy = TransformersPolicy(tiny_model, tiny_tokenizer)
    assert_same(play(policy, tiny_tokenizer, prompts[:2], joins=joins), full)
    assert policy.kv_cache.hits > 0


def test_a_prompt_that_leaves_a_kept_sequence_reuses_only_the_shared_prefix(tiny_tokenizer, tiny_model):
    prompt = first_prompts(tiny_tokenizer)[2]
    policy = TransformersPolicy(tiny_model, tiny_tokenizer)
    (ids, _), = policy.sample_batch([prompt], GREEDY, GREEDY.max_new_tokens)
    edited = prompt[:-3] + [prompt[-3] + 1] + prompt[-2:] + ids + [5, 6, 7]  # one token of history changed
    entry, shared = policy.kv_cache.lookup(edited)
    assert shared == len(prompt) - 3
    alone = TransformersPolicy(tiny_model, tiny_tokenizer, kv_cache_tokens=0).sample_batch([edited], GREEDY, 6)
    got = policy.sample_batch([edited], GREEDY, 6)
    assert got[0][0] == alone[0][0]
    assert got[0][1] == pytest.approx(alone[0][1], abs=1e-4)


def test_weights_written_in_place_drop_every_kept_state(tiny_tokenizer, tiny_model):
    model = copy.deepcopy(tiny_model)
    prompts = first_prompts(tiny_tokenizer)
    policy = TransformersPolicy(model, tiny_tokenizer)
    turn = play(policy, tiny_tokenizer, prompts, turns=1)[0]
    template = ChatTemplate.for_tokenizer(tiny_tokenizer)
    nexts = [p + ids + template.close_turn_ids() + template.observation_ids("again") for p, (ids, _) in zip(prompts, turn)]
    with torch.no_grad():  # an optimizer step on the policy's own model (TRL without vLLM)
        for parameter in model.model.layers[0].parameters():
            parameter.mul_(3.0)
    want = TransformersPolicy(model, tiny_tokenizer, kv_cache_tokens=0).sample_batch(nexts, GREEDY, 6)
    hits = policy.kv_cache.hits
    got = policy.sample_batch(nexts, GREEDY, 6)
    assert policy.kv_cache.hits == hits, "states computed by the old weights were reused"
    assert [ids for ids, _ in got] == [ids for ids, _ in want]
    for (_, logprobs), (_, want_logprobs) in zip(got, want):
        assert logprobs == pytest.approx(want_logprobs, abs=1e-4)


def test_a_versioned_policy_update_drops_every_kept_state(tiny_tokenizer, tiny_model):
    policy = TransformersPolicy(tiny_model, tiny_tokenizer)
    versioned = VersionedPolicy(policy)
    play(policy, tiny_tokenizer, first_prompts(tiny_tokenizer), turns=1)
    assert len(policy.kv_cache) == 3
    asyncio.run(versioned.update(lambda: None))  # weights loaded elsewhere (a server, another process)
    assert len(policy.kv_cache) == 0 and policy.kv_cache.tokens == 0


def test_an_ended_episode_frees_its_states(tiny_tokenizer, tiny_model, scripted_env):
    policy = TransformersPolicy(tiny_model, tiny_tokenizer)
    sampling = SamplingParams(max_new_tokens=4, temperature=0.0)
    trajectories = asyncio.run(run_episodes(lambda: scripted_env(rewards=[0.0, 0.0, 1.0]), policy, tiny_tokenizer, [0, 1],
                                            sampling=sampling))
    assert all(t.num_turns == 3 for t in trajectories)
    assert policy.kv_cache.hits >= 4, "turns 2 and 3 of both episodes did not reuse their context"
    assert len(policy.kv_cache) == 0 and policy.kv_cache.tokens == 0


def test_weights_loaded_through_data_drop_every_kept_state(tiny_tokenizer, tiny_model):
    # A write through `.data` (a weight sync, `p.data.copy_(new)`) bumps neither the version counter nor the storage.
    from gem_core.testing import make_model

    model = copy.deepcopy(tiny_model)
    new = make_model(tiny_tokenizer, seed=1)
    prompts = first_prompts(tiny_tokenizer)
    policy = TransformersPolicy(model, tiny_tokenizer)
    turn = play(policy, tiny_tokenizer, prompts, turns=1)[0]
    template = ChatTemplate.for_tokenizer(tiny_tokenizer)
    nexts = [p + ids + template.close_turn_ids() + template.observation_ids("again") for p, (ids, _) in zip(prompts, turn)]
    for parameter, loaded in zip(model.parameters(), new.parameters(), strict=True):
        parameter.data.copy_(loaded.data)
    want = TransformersPolicy(model, tiny_tokenizer, kv_cache_tokens=0).sample_batch(nexts, GREEDY, 6)
    hits = policy.kv_cache.hits
    got = policy.sample_batch(nexts, GREEDY, 6)
    assert policy.kv_cache.hits == hits, "states computed by the old weights were reused"
    assert [ids for ids, _ in got] == [ids for ids, _ in want]


@pytest.mark.parametrize("history", ["as_sampled", "as_rendered"])
def test_an_ended_episode_frees_its_states_in_either_history_mode(tiny_tokenizer, tiny_model, scripted_env, history):
    policy = TransformersPolicy(tiny_model, tiny_tokenizer)
    sampling = SamplingParams(max_new_tokens=4, temperature=0.0)
    trajectories = asyncio.run(run_episodes(lambda: scripted_env(rewards=[0.0, 0.0, 1.0]), policy, tiny_tokenizer,
                                            [0, 1, 2], sampling=sampling, history=history))
    assert all(t.num_turns == 3 for t in trajectories)
    assert len(policy.kv_cache) == 0 and policy.kv_cache.tokens == 0


def test_a_failed_episode_frees_its_states(tiny_tokenizer, tiny_model, scripted_env, monkeypatch):
    policy = TransformersPolicy(tiny_model, tiny_tokenizer)
    sampling = SamplingParams(max_new_tokens=4, temperature=0.0)
    rounds = []
    sample_batch = policy.sample_batch

    def fail_on_the_second_round(*args, **kwargs):  # the backend fails once the first turn's states are kept
        rounds.append(None)
        if len(rounds) == 2:
            raise RuntimeError("backend crashed")
        return sample_batch(*args, **kwargs)

    monkeypatch.setattr(policy, "sample_batch", fail_on_the_second_round)
    with pytest.raises(RuntimeError, match="backend crashed"):
        asyncio.run(run_episodes(lambda: scripted_env(rewards=[0.0, 0.0, 1.0]), policy, tiny_tokenizer, [0, 1],
                                 sampling=sampling))
    assert len(policy.kv_cache) == 0 and policy.kv_cache.tokens == 0


def test_a_cancelled_episode_frees_its_states(tiny_tokenizer, tiny_model, scripted_env):
    policy = TransformersPolicy(tiny_model, tiny_tokenizer)
    sampling = SamplingParams(max_new_tokens=4, temperature=0.0)

    async def cancel_after_a_few_turns():
        task = asyncio.ensure_future(run_episodes(lambda: scripted_env(rewards=[0.0] * 50, step_delay=0.01), policy,
                                                  tiny_tokenizer, [0, 1], sampling=sampling))
        while policy.kv_cache.hits < 2:  # both episodes are past their first turn: states are held
            await asyncio.sleep(0.01)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(cancel_after_a_few_turns())
    assert len(policy.kv_cache) == 0 and policy.kv_cache.tokens == 0


def test_the_store_keeps_its_bounds_least_recently_used_out_first():
    layers = lambda n: [(torch.zeros(1, 1, n, 2), torch.zeros(1, 1, n, 2))]  # noqa: E731
    store = PrefixKVCache(max_sequences=2, max_tokens=10)
    store.store([1, 2, 3], 2, layers(3))
    store.store([4, 5, 6], 2, layers(3))
    assert store.lookup([1, 2, 3, 9])[1] == 3  # used: [4, 5, 6] is now the least recently used
    store.store([7, 8, 9], 2, layers(3))
    assert store.lookup([4, 5, 6, 9]) == (None, 0)
    assert store.lookup([1, 2, 3, 9])[1] == 3 and len(store) == 2
    store.store([1, 2, 3, 4, 5, 6, 7, 8], 4, layers(8))  # past max_tokens with the others: they go
    assert len(store) == 1 and store.tokens == 8
    store.store(list(range(11)), 4, layers(11))  # longer than max_tokens alone: not kept
    assert store.tokens == 8


def test_release_drops_the_ended_episode_but_not_one_sharing_only_its_prompt():
    layers = lambda n: [(torch.zeros(1, 1, n, 2), torch.zeros(1, 1, n, 2))]  # noqa: E731
    store = PrefixKVCache()
    store.store([1, 2, 3, 10, 11], 3, layers(5))  # prompt [1, 2, 3], sampled [10, 11]
    store.store([1, 2, 3, 20, 21], 3, layers(5))  # the same prompt, another sample (a GRPO group)
    assert store.release([1, 2, 3, 10, 11, 12]) == 1
    assert store.lookup([1, 2, 3, 20, 21, 5])[1] == 5


def test_release_drops_exactly_the_sequences_the_ended_context_continues_past_their_prompt():
    """An ended context drops exactly the held sequences whose prompt and first sampled id it repeats (the episode's
    own), against an id-by-id check over sequences that agree with it by chance well past their start; another
    episode's, sharing only a prefix of the prompt, stays."""
    import numpy as np

    rng = np.random.default_rng(11)
    held = []
    for _ in range(40):  # few distinct ids: contexts that agree with a sequence by chance well past its start
        parent = held[rng.integers(len(held))][0] if held and rng.random() < 0.6 else rng.integers(0, 4, 5).tolist()
        ids = parent[: rng.integers(1, len(parent) + 1)] + rng.integers(0, 4, rng.integers(1, 8)).tolist()
        held.append((ids, int(rng.integers(0, len(ids) + 1))))
    for _ in range(200):
        base = held[rng.integers(len(held))][0]
        done = base[: rng.integers(0, len(base) + 1)] + rng.integers(0, 4, rng.integers(0, 6)).tolist()
        store = PrefixKVCache(max_sequences=64, max_tokens=10**6)
        for ids, prompt_len in held:
            store.store(ids, prompt_len, None)
        need = [min(len(ids), prompt_len + 1) for ids, prompt_len in held]
        want = [ids for (ids, _), n in zip(held, need) if not (len(done) >= n and ids[:n] == done[:n])]
        assert store.release(done) == len(held) - len(want)
        assert [entry.ids.tolist() for entry in store._entries.values()] == want


def test_a_negative_bound_is_refused_naming_the_argument(tiny_tokenizer, tiny_model):
    from gem_core.errors import GemError

    with pytest.raises(GemError, match="kv_cache_tokens") as error:
        TransformersPolicy(tiny_model, tiny_tokenizer, kv_cache_tokens=-1)
    assert isinstance(error.value, ValueError)


def test_a_turn_moves_kept_states_with_a_few_copies_per_row_not_per_row_and_layer(tiny_tokenizer, tiny_model):
    """On a GPU every copy is a kernel launch: gathering and restoring each row's states layer by layer cost
    two launches per row and layer (1,792 per 32-row turn of a 28-layer model), about what the saved prefill
    did on an H200. Counted here as aten calls: index_select (the gather after a turn) and copy_ (the restore
    before one) must not grow with the number of layers."""
    from torch.utils._python_dispatch import TorchDispatchMode

    class Count(TorchDispatchMode):
        def __init__(self):
            super().__init__()
            self.calls: dict[str, int] = {}

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            name = func.overloadpacket.__name__
            self.calls[name] = self.calls.get(name, 0) + 1
            return func(*args, **(kwargs or {}))

    layers = tiny_model.config.num_hidden_layers
    assert layers >= 2, "the count below cannot tell per-layer copies apart on a one-layer model"
    policy = TransformersPolicy(tiny_model, tiny_tokenizer)
    prompts = first_prompts(tiny_tokenizer)
    rows = len(prompts)
    keep, restore = policy._keep_states, policy._inputs
    counts: dict[str, Count] = {}

    def counted(name, fn):
        def wrapper(*args, **kwargs):
            with Count() as count:
                result = fn(*args, **kwargs)
            counts[name] = count
            return result
        return wrapper

    policy._keep_states, policy._inputs = counted("keep", keep), counted("restore", restore)
    play(policy, tiny_tokenizer, prompts, turns=2)
    assert policy.kv_cache.hits >= rows, "turn 2 did not reuse the kept states"
    assert counts["keep"].calls.get("index_select", 0) <= 2 * rows, counts["keep"].calls
    assert counts["restore"].calls.get("copy_", 0) <= 2 * rows, counts["restore"].calls


def test_a_caller_cancelled_mid_round_that_changes_its_list_leaves_no_states_under_ids_they_were_not_computed_from(
    tiny_tokenizer, tiny_model, monkeypatch
):
    """``BatchingPolicy.generate`` reads the caller's list rather than copying it (issue 46): a caller cancelled while
    its round samples may reuse its list at once, and the states of that round must still be kept under the ids
    the model saw."""
    import threading

    prompts = first_prompts(tiny_tokenizer)
    template = ChatTemplate.for_tokenizer(tiny_tokenizer)
    policy = TransformersPolicy(tiny_model, tiny_tokenizer)
    sampling_started, go_on = threading.Event(), threading.Event()
    real_generate = tiny_model.generate

    def generate_held(*args, **kwargs):
        sampling_started.set()
        assert go_on.wait(30), "the test never let the round go on"
        return real_generate(*args, **kwargs)

    monkeypatch.setattr(tiny_model, "generate", generate_held)
    cancelled_list = list(prompts[0])

    async def round_with_a_cancelled_caller():
        cancelled = asyncio.ensure_future(policy.generate(cancelled_list, GREEDY))
        kept = asyncio.ensure_future(policy.generate(list(prompts[1]), GREEDY))
        assert await asyncio.to_thread(sampling_started.wait, 30)
        cancelled.cancel()
        cancelled_list.extend(prompts[2])  # the cancelled caller moves on with its list
        go_on.set()
        return await kept

    asyncio.run(round_with_a_cancelled_caller())
    monkeypatch.undo()
    assert len(policy.kv_cache) == 2
    full_prefill = TransformersPolicy(tiny_model, tiny_tokenizer, kv_cache_tokens=0)
    (sampled, _), = full_prefill.sample_batch([prompts[0]], GREEDY, 6)  # greedy: what the cancelled row sampled
    observation = template.close_turn_ids() + template.observation_ids("again")
    nexts = [prompts[0] + sampled + observation, cancelled_list + sampled + observation]
    hits = policy.kv_cache.hits
    assert_same([policy.sample_batch(nexts, GREEDY, 6)], [full_prefill.sample_batch(nexts, GREEDY, 6)])
    assert policy.kv_cache.hits > hits, "the cancelled row's states were not kept"


@pytest.mark.parametrize("weights", ["hashed", "every hash equal"])
def test_a_lookup_finds_the_longest_shared_prefix_among_sequences_that_share_a_system_prompt(weights, monkeypatch):
    """The lookup prunes with prefix hashes (issue 46); what it finds must stay the longest prefix an id-by-id
    comparison finds. With every hash equal (all weights zero) nothing is pruned on a hash, and the answer is the same."""
    import numpy as np

    from gem_core.rollout import kv_cache

    if weights == "every hash equal":
        monkeypatch.setattr(kv_cache, "_position_weights", lambda n: np.zeros(n, dtype=np.uint64))
    rng = np.random.default_rng(7)
    layers = lambda n: [(torch.zeros(1, 1, n, 2), torch.zeros(1, 1, n, 2))]  # noqa: E731
    system = rng.integers(0, 5, 6).tolist()  # few distinct ids: sequences that agree by chance past the system prompt
    store = PrefixKVCache(max_sequences=64, max_tokens=10**6)
    held = []
    for _ in range(40):
        parent = held[rng.integers(len(held))] if held and rng.random() < 0.6 else system
        ids = parent[: rng.integers(1, len(parent) + 1)] + rng.integers(0, 5, rng.integers(1, 8)).tolist()
        store.store(ids, len(ids) - 1, layers(len(ids)))
        held.append(ids)
    for _ in range(300):
        base = held[rng.integers(len(held))]
        prompt = base[: rng.integers(1, len(base) + 1)] + rng.integers(0, 5, rng.integers(0, 6)).tolist()
        want = max((next((i for i, (a, b) in enumerate(zip(ids, prompt[:-1])) if a != b), min(len(ids), len(prompt) - 1))
                    for ids in held), default=0)
        entry, shared = store.lookup(prompt)
        assert shared == want, (prompt, shared, want)
        if shared:
            assert entry.ids[:shared].tolist() == prompt[:shared]
