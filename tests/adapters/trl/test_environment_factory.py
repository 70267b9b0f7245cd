"""The environment_factory route: TRL's own tool-calling loop drives a GEM env.

A random tiny model never emits a tool call, so the model's ``generate`` is scripted here (it returns
a fixed tool call, then a final reply); everything else is the real ``GRPOTrainer``: TRL renders the
tools into the prompt with the chat template of `tool_tokenizer` (conftest), parses the call with ``parse_response``, runs
``act`` on the env, appends the result with ``tool_mask`` 0 and scores ``get_reward``.
"""

from __future__ import annotations

import pytest
import torch
from trl import GRPOTrainer

from gem_adapters.trl import environment_factory, make_dataset

ENV_ID = "game:GuessTheNumber-v0-easy"


def scripted_generate(tokenizer, replies):
    """A stand-in for ``model.generate`` that appends the next scripted reply to every row."""
    calls = {"n": 0}

    def generate(input_ids, attention_mask=None, **kwargs):
        text = replies[min(calls["n"], len(replies) - 1)]
        calls["n"] += 1
        ids = tokenizer.encode(text, add_special_tokens=False)
        completion = torch.tensor([ids] * input_ids.shape[0], dtype=input_ids.dtype)
        return torch.cat([input_ids, completion], dim=1)

    return generate


def test_environment_factory_plays_the_env_through_trls_tool_loop(grpo_config, fresh_model, tool_tokenizer):
    dataset = make_dataset(ENV_ID, n=2, seed_start=0)  # one batch holds both prompts, seeds 0 and 1
    seed = 0
    target = __import__("gem_core").make(ENV_ID)
    target.reset(seed=seed)
    guess = target.target  # the first prompt's hidden number: its episodes must win

    call = '<tool_call>\n{"name": "act", "arguments": {"action": "\\\\boxed{%d}"}}\n</tool_call><|im_end|>' % guess
    fresh_model.generate = scripted_generate(tool_tokenizer, [call, "I am done.<|im_end|>"])

    Factory = environment_factory()
    seen = []

    class Recorder(GRPOTrainer):
        def _compute_loss(self, model, inputs):
            seen.append({k: v.clone() for k, v in inputs.items() if torch.is_tensor(v)})
            return super()._compute_loss(model, inputs)

    trainer = Recorder(
        model=fresh_model, args=grpo_config(max_steps=1, max_completion_length=200), processing_class=tool_tokenizer,
        train_dataset=dataset, environment_factory=Factory,
    )
    trainer.train()

    environments = trainer.environments
    assert len(environments) == 4 and all(isinstance(e, Factory) for e in environments)
    # Each env was stepped once by the tool call, with the guessed action.
    assert all(len(e.rewards) == 1 for e in environments)
    returns = [e.get_reward() for e in environments]
    winners = [e for e in environments if e.env.target == guess]
    assert winners and all(e.get_reward() == 1.0 and e.done for e in winners)
    assert all(r in (0.0, 1.0) for r in returns)

    # The tool result's tokens reached the loss with tool_mask 0, the model's tokens with 1.
    batch = seen[-1]
    mask = batch["tool_mask"] * batch["completion_mask"]
    for row in range(batch["completion_ids"].shape[0]):
        ids = batch["completion_ids"][row][batch["completion_mask"][row].bool()].tolist()
        text_masked = tool_tokenizer.decode([t for t, m in zip(ids, batch["tool_mask"][row].tolist()) if m == 0])
        text_trained = tool_tokenizer.decode([t for t, m in zip(ids, mask[row].tolist()) if m == 1])
        assert "<tool_response>" in text_masked and "reward" in text_masked
        assert "<tool_call>" in text_trained and "I am done." in text_trained
        assert "<tool_response>" not in text_trained


def test_factory_rejects_unknown_env_and_unrouted_rows():
    from gem_core.registry import UnknownEnvError

    with pytest.raises(UnknownEnvError, match="game:Wordle-v0"):
        environment_factory("game:Wordel-v0")
    with pytest.raises(ValueError, match="make_dataset"):
        environment_factory()().reset(prompt=[{"role": "user", "content": "hi"}])


def test_act_after_the_end_raises_so_trl_reports_it_to_the_model():
    env = environment_factory("game:GuessTheNumber-v0-easy")()
    env.reset(seed=4)
    env.act(f"\\boxed{{{env.env.target}}}")
    with pytest.raises(RuntimeError, match="over"):
        env.act("\\boxed{1}")
