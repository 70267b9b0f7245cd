"""The vLLM route of GemRolloutFunc, against TRL's documented ``trainer.vllm_generation.generate``
contract (vLLM itself does not install on this CPU machine): prompts in, ``(prompt_ids, completion_ids,
logprobs[B][T][K], logprob_token_ids)`` out, one call per batch. The arguments are checked against the
real ``VLLMGeneration.generate`` signature; the cross-rank protocol is in test_vllm_protocol.py."""

from __future__ import annotations

import inspect
from types import SimpleNamespace

from gem_adapters.trl import GemRolloutFunc, make_dataset
from gem_core.rollout import ChatTemplate


class FakeVLLMGeneration:
    """Answers each prompt with ``\\boxed{2}`` + end-of-turn + junk (vLLM samples up to its own limit)."""

    def __init__(self, tokenizer):
        self.calls: list[int] = []
        self.move = tokenizer.encode("\\boxed{2}", add_special_tokens=False)
        self.end = ChatTemplate.for_tokenizer(tokenizer).end_of_turn_ids
        self.junk = tokenizer.encode(" after the end", add_special_tokens=False)

    def generate(self, *args, **kwargs):
        from trl.generation.vllm_generation import VLLMGeneration

        # The call must fit TRL's real method (test_vllm_protocol.py runs that method across two ranks).
        bound = inspect.signature(VLLMGeneration.generate).bind(self, *args, **kwargs).arguments
        prompts, images, num_generations = bound["prompts"], bound["images"], bound["num_generations"]
        assert images is None and num_generations == 1
        self.calls.append(len(prompts))
        completion = self.move + self.end + self.junk
        logprobs = [[-0.5] for _ in completion]  # [T][K], K = 1
        return prompts, [list(completion) for _ in prompts], [logprobs for _ in prompts], None


def test_turns_of_all_live_episodes_go_out_as_one_batch_and_are_cut_at_the_stop(tiny_tokenizer):
    generation = FakeVLLMGeneration(tiny_tokenizer)
    trainer = SimpleNamespace(
        use_vllm=True, vllm_generation=generation, processing_class=tiny_tokenizer,
        args=SimpleNamespace(temperature=1.0, top_p=1.0, top_k=0, max_completion_length=400),
    )
    dataset = make_dataset("game:GuessTheNumber-v0-easy", n=3, seed_start=0)
    prompts = [row["prompt"] for row in dataset for _ in range(2)]  # TRL repeats each prompt
    rollout = GemRolloutFunc(max_new_tokens=16)
    out = rollout(prompts, trainer)

    trajectories = rollout.last_trajectories
    # Every round holds one turn of each episode still playing; the rounds shrink only as episodes end.
    assert generation.calls[0] == 6 and generation.calls == sorted(generation.calls, reverse=True)
    assert sum(generation.calls) == sum(t.num_turns for t in trajectories)
    for trajectory, completion, mask, logprobs in zip(trajectories, out["completion_ids"], out["env_mask"], out["logprobs"]):
        for start, end in trajectory.turn_spans:
            assert completion[start:end] == generation.move + generation.end  # junk after the stop is dropped
            assert logprobs[start:end] == [-0.5] * (end - start)
            assert all(m == 1 for m in mask[start:end])
    assert out["env_return"] == [t.episode_return for t in trajectories]


def test_colocated_vllm_without_tensor_parallelism_skips_the_cross_rank_agreement(tiny_tokenizer, monkeypatch):
    import gem_adapters.trl.policy as policy_module

    def no_collective(count):
        raise AssertionError("colocate mode with tensor_parallel_size=1 is not a collective call")

    monkeypatch.setattr(policy_module, "_largest_across_ranks", no_collective)
    generation = FakeVLLMGeneration(tiny_tokenizer)
    generation.mode, generation.tensor_parallel_size = "colocate", 1
    trainer = SimpleNamespace(
        use_vllm=True, vllm_generation=generation, processing_class=tiny_tokenizer,
        args=SimpleNamespace(temperature=1.0, top_p=1.0, top_k=0, max_completion_length=400),
    )
    dataset = make_dataset("game:GuessTheNumber-v0-easy", n=2, seed_start=0)
    GemRolloutFunc(max_new_tokens=16)([row["prompt"] for row in dataset], trainer)
    assert generation.calls and generation.calls[0] == 2
