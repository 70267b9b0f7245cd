"""The main job's recipe for the tiny model (issue 29): what the tokenizer shows and what the warm start teaches."""

from __future__ import annotations

import asyncio
from pathlib import Path

import torch

import gem_core
from gem_core.rollout import EpisodeSession
from gem_core.testing import load_script

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "train_trl.py"


def load_example():
    return load_script(EXAMPLE, "train_trl")


def first_turn_context(example, tokenizer, seed: int = 0) -> list[int]:
    async def start() -> list[int]:
        session = EpisodeSession(gem_core.make(example.DEFAULT_ENV, **example.DEFAULT_ENV_KWARGS), tokenizer)
        try:
            return await session.start(seed=seed)
        finally:
            await session.aclose()

    return asyncio.run(start())


def test_every_hint_of_the_default_env_is_one_token_of_the_tiny_tokenizer():
    example = load_example()
    _, tokenizer, _, _ = example.tiny_model_and_tokenizer(example.DEFAULT_ENV, example.DEFAULT_ENV_KWARGS, 0, None)
    hints = {obs for observations, _ in example.random_episodes(example.DEFAULT_ENV, example.DEFAULT_ENV_KWARGS)
             for obs in observations[1:] if "higher" in obs or "lower" in obs}
    assert len(hints) >= 6
    for hint in hints:
        assert len(tokenizer(hint, add_special_tokens=False)["input_ids"]) == 1, hint


def test_the_warm_start_teaches_the_move_format_and_no_favourite_move():
    example = load_example()
    torch.manual_seed(0)
    model, tokenizer, _, max_completion_length = example.tiny_model_and_tokenizer(
        example.DEFAULT_ENV, example.DEFAULT_ENV_KWARGS, 0, None)
    moves = [tokenizer.convert_tokens_to_ids(f"\\boxed{{{k}}}") for k in range(1, 5)]
    context = torch.tensor([first_turn_context(example, tokenizer)])

    def move_probabilities() -> torch.Tensor:
        model.eval()
        with torch.no_grad():
            return torch.softmax(model(context).logits[0, -1], -1)[moves]

    assert move_probabilities().sum() < 0.1  # random weights: the 4 moves are 4 tokens of ~500
    example.format_warm_start(model, tokenizer, example.DEFAULT_ENV, example.DEFAULT_ENV_KWARGS, 15, 0,
                              max_completion_length)
    probabilities = move_probabilities()
    assert probabilities.sum() > 0.9, probabilities
    assert probabilities.min() > 0.1, probabilities  # no strategy: each move keeps a fair share
