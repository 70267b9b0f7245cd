"""The main job's model: a 2-layer transformer with random weights, a BPE tokenizer trained on the env's own
text, and a warm start that teaches it the move format (``examples/train_trl.py`` without ``--model``).

A pretrained model is too slow for a CPU run; this one learns a small game in minutes because each move is one
token of its tokenizer, so one sampled token is one legal move. torch, tokenizers and transformers are imported
inside the functions: the example checks its arguments before any of them loads.
"""

from __future__ import annotations

from typing import Any

import numpy as np

import gem_core

__all__ = ["MAX_MOVE_TOKENS", "TINY_VOCAB_SIZE", "format_warm_start", "random_episodes", "tiny_model_and_tokenizer"]

MAX_MOVE_TOKENS = 4096
"""Up to this many distinct moves become whole tokens of the tiny tokenizer (games' move sets fit)."""
TINY_VOCAB_SIZE = 1000
"""BPE vocabulary of the tiny tokenizer: enough merges that GuessTheNumber's observations are one token each,
so the hint is one token a few positions before the move (with 320 it was spread over ~10 fragments)."""


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
                             vocab_size: int = TINY_VOCAB_SIZE, *, envs: list[tuple[str, dict]] | None = None) -> tuple[Any, Any, int, int]:
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


def format_warm_start(model: Any, tokenizer: Any, env_id: str, env_kwargs: dict, steps: int, seed: int, max_completion_length: int,
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
