"""The vLLM route when vLLM has no log-prob for a token: TRL's ``vllm_generation.generate`` gives ``None`` there
(vLLM's NaN, ``extract_logprobs``) and TRL's own path neutralizes such tokens in its importance ratios. The rollout
keeps training: the turn is recorded without log-probs, and its episode goes to TRL with ``None`` log-probs
(TRL makes them NaN and gives them no correction); zeros would read as probability-one samples."""

from __future__ import annotations

import inspect
from types import SimpleNamespace

import pytest

from gem_adapters.trl import GemRolloutFunc, make_dataset
from gem_core.rollout import ChatTemplate

ENV_ID = "game:GuessTheNumber-v0-easy"


class MissingLogprobVLLM:
    """Answers ``\\boxed{2}`` + end-of-turn + junk; the first prompt of each call has ``missing`` as one log-prob, at
    ``position`` (inside the move, or in the junk past its stop)."""

    mode, tensor_parallel_size = "colocate", 1

    def __init__(self, tokenizer, missing, position):
        self.move = tokenizer.encode("\\boxed{2}", add_special_tokens=False) + ChatTemplate.for_tokenizer(tokenizer).end_of_turn_ids
        self.junk = tokenizer.encode(" after the end", add_special_tokens=False)
        self.missing, self.position = missing, position

    def generate(self, *args, **kwargs):
        from trl.generation.vllm_generation import VLLMGeneration

        prompts = inspect.signature(VLLMGeneration.generate).bind(self, *args, **kwargs).arguments["prompts"]
        completion = self.move + self.junk
        logprobs = [[[-0.5] for _ in completion] for _ in prompts]  # [B][T][K]
        position = 1 if self.position == "move" else len(completion) - 1
        logprobs[0][position] = [self.missing]
        return prompts, [list(completion) for _ in prompts], logprobs, None


def play(tokenizer, missing, position):
    generation = MissingLogprobVLLM(tokenizer, missing, position)
    trainer = SimpleNamespace(use_vllm=True, vllm_generation=generation, processing_class=tokenizer,
                              args=SimpleNamespace(temperature=1.0, top_p=1.0, top_k=0, max_completion_length=400))
    rollout = GemRolloutFunc(max_new_tokens=16)
    prompts = [row["prompt"] for row in make_dataset(ENV_ID, n=2, seed_start=0)]
    return rollout(prompts, trainer), rollout.last_trajectories


@pytest.mark.parametrize("missing", [None, float("nan")], ids=["None", "NaN"])
def test_a_token_without_a_log_prob_leaves_its_episode_without_them_and_training_goes_on(tiny_tokenizer, missing):
    out, trajectories = play(tiny_tokenizer, missing, "move")
    lacking = [t.metrics["has_logprobs"] is False for t in trajectories]
    assert any(lacking) and not all(lacking), "one episode's turns came first in each call, the other's never"
    for trajectory, logprobs, completion, lacks in zip(trajectories, out["logprobs"], out["completion_ids"], lacking, strict=True):
        if lacks:
            assert logprobs == [None] * len(completion)
        else:
            assert all(logprobs[start:end] == [-0.5] * (end - start) for start, end in trajectory.turn_spans)


def test_a_missing_log_prob_past_the_turns_stop_costs_nothing(tiny_tokenizer):
    out, trajectories = play(tiny_tokenizer, None, "junk")
    assert all(t.metrics["has_logprobs"] for t in trajectories)
    for trajectory, logprobs in zip(trajectories, out["logprobs"], strict=True):
        for start, end in trajectory.turn_spans:
            assert logprobs[start:end] == [-0.5] * (end - start)
