"""The rollout_func route through the real ``trl.GRPOTrainer`` on CPU: what reaches the loss."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from trl import GRPOTrainer

import gem_adapters.trl.rollout as rollout_module
from gem_adapters.trl import GemRolloutFunc, TurnCreditGRPOTrainer, env_return_reward, make_dataset
from gem_core.testing import QWEN3_THINKING_SWITCH
from gem_core.rollout import discounted_returns, return_batch_normalize

ENV_ID = "game:GuessTheNumber-v0-easy"


class RecordingPolicy:
    """Wraps the trainer's policy and records what it sampled for each context."""

    def __init__(self, inner):
        self.inner = inner
        self.sampled: dict[tuple[int, ...], list[list[int]]] = {}  # a GRPO group shares its first context

    async def generate(self, prompt_ids, sampling):
        generation = await self.inner.generate(prompt_ids, sampling)
        self.sampled.setdefault(tuple(prompt_ids), []).append(list(generation.token_ids))
        return generation

    def __getattr__(self, name):  # episode_finished and the rest of the batcher's protocol
        return getattr(self.inner, name)


@pytest.fixture
def recorded(monkeypatch):
    policies: list[RecordingPolicy] = []
    real = rollout_module.trainer_policy

    def spy(trainer, num_episodes, **kwargs):
        policies.append(RecordingPolicy(real(trainer, num_episodes, **kwargs)))
        return policies[-1]

    monkeypatch.setattr(rollout_module, "trainer_policy", spy)
    return policies


def loss_inputs_recorder(base):
    class Recorder(base):
        seen: list[dict] = []

        def _compute_loss(self, model, inputs):
            type(self).seen.append({k: v.clone() if torch.is_tensor(v) else v for k, v in inputs.items()})
            return super()._compute_loss(model, inputs)

    Recorder.seen = []
    return Recorder


def test_rollout_func_tokens_masks_and_rewards_reach_the_loss(grpo_config, fresh_model, tiny_tokenizer, recorded):
    received: list[dict] = []

    def reward(completions, env_return, turn_rewards, **kwargs):
        received.append({"env_return": list(env_return), "turn_rewards": [list(t) for t in turn_rewards]})
        return env_return_reward(completions, env_return)

    rollout = GemRolloutFunc(max_new_tokens=12)
    Trainer = loss_inputs_recorder(GRPOTrainer)
    trainer = Trainer(
        model=fresh_model, reward_funcs=reward, args=grpo_config(), processing_class=tiny_tokenizer,
        train_dataset=make_dataset(ENV_ID, n=8, seed_start=0), rollout_func=rollout,
    )
    trainer.train()

    assert Trainer.seen, "the loss never ran"
    batch = Trainer.seen[-1]
    trajectories = rollout.last_trajectories
    assert len(trajectories) == batch["completion_ids"].shape[0] == 4
    rows = batch["completion_ids"].tolist()
    for trajectory in trajectories:
        n = len(trajectory.response_ids)
        # TRL shuffles the generation batch before the loss: find this episode's row by its tokens.
        matches = [r for r, completion in enumerate(rows) if completion[:n] == trajectory.response_ids]
        assert matches, "an episode's tokens did not reach the loss unchanged"
        row = matches[0]
        # env_mask became TRL's tool_mask: 1 exactly on sampled tokens, 0 on env tokens.
        assert batch["tool_mask"][row, :n].tolist() == trajectory.loss_mask
        assert 0 in trajectory.loss_mask and 1 in trajectory.loss_mask
        # The sampled ids appear verbatim: every turn is exactly what the policy sampled in that context.
        for start, end in trajectory.turn_spans:
            context = tuple(trajectory.prompt_ids + trajectory.response_ids[:start])
            assert trajectory.response_ids[start:end] in recorded[-1].sampled[context]
        assert sum(trajectory.loss_mask) == sum(e - s for s, e in trajectory.turn_spans)

    # GRPO groups: both copies of a prompt start from the same env state.
    assert trajectories[0].prompt_ids == trajectories[1].prompt_ids and trajectories[0].seed == trajectories[1].seed
    assert trajectories[0].seed != trajectories[2].seed

    last = received[-1]
    assert last["env_return"] == [t.episode_return for t in trajectories]
    assert last["turn_rewards"] == [list(t.rewards) for t in trajectories]
    assert all(np.isclose(sum(r), g) for r, g in zip(last["turn_rewards"], last["env_return"]))


@pytest.mark.parametrize("turn_credit", ["rebn", "reinforce", "baseline"])
def test_turn_credit_trainer_feeds_per_turn_advantages_to_the_loss(turn_credit, grpo_config, fresh_model, tiny_tokenizer):
    """ReBN: the batch-normalized discounted returns; vanilla REINFORCE: the discounted returns as they are;
    baseline: the discounted returns minus their batch mean."""
    rollout = GemRolloutFunc(max_new_tokens=12)
    Trainer = loss_inputs_recorder(TurnCreditGRPOTrainer)
    gamma = 0.9
    trainer = Trainer(
        model=fresh_model, reward_funcs=env_return_reward, args=grpo_config(max_steps=1), processing_class=tiny_tokenizer,
        train_dataset=make_dataset(ENV_ID, n=4, seed_start=3), rollout_func=rollout, turn_credit=turn_credit, gamma=gamma,
    )
    trainer.train()

    advantages = Trainer.seen[-1]["advantages"]
    rows = Trainer.seen[-1]["completion_ids"].tolist()
    trajectories = rollout.last_trajectories
    assert advantages.dim() == 2 and advantages.shape[0] == len(trajectories)
    expected_turns = np.concatenate([discounted_returns(t.rewards, gamma) for t in trajectories])
    if turn_credit == "rebn":
        expected_turns = return_batch_normalize(expected_turns)
    elif turn_credit == "baseline":
        expected_turns = expected_turns - expected_turns.mean()
    assert np.any(expected_turns != 0), "a batch of zero returns cannot tell the two credits apart"
    k = 0
    for trajectory in trajectories:
        row = next(r for r, c in enumerate(rows) if c[: len(trajectory.response_ids)] == trajectory.response_ids)
        mask = torch.tensor(trajectory.loss_mask, dtype=torch.bool)
        row_adv = advantages[row, : len(mask)]
        assert torch.all(row_adv[~mask] == 0)
        for start, end in trajectory.turn_spans:
            assert torch.allclose(row_adv[start:end], torch.tensor(expected_turns[k], dtype=torch.float32))
            k += 1
    assert k == len(expected_turns)


def test_rebn_without_turn_rewards_says_how_to_fix(grpo_config, fresh_model, tiny_tokenizer):
    from datasets import Dataset

    with pytest.raises(ValueError, match="GemRolloutFunc"):
        trainer = TurnCreditGRPOTrainer(
            model=fresh_model, reward_funcs=lambda completions, **kw: [0.0] * len(completions),
            args=grpo_config(max_steps=1, max_completion_length=8), processing_class=tiny_tokenizer,
            train_dataset=Dataset.from_list([{"prompt": [{"role": "user", "content": "hi"}]}] * 4),
        )
        trainer.train()


def test_prompt_without_gem_tag_is_rejected_with_the_fix(tiny_tokenizer):
    from gem_adapters.trl.make_dataset import episode_label

    with pytest.raises(ValueError, match="make_dataset"):
        episode_label([{"role": "user", "content": "Guess a number"}])
    with pytest.raises(ValueError, match="seed"):  # the core's label check, not a tag of TRL's own
        episode_label([{"role": "user", "content": "Guess", "gem": '{"env_id": "game:GuessTheNumber-v0"}'}])


LABEL = '{"env_id": "game:GuessTheNumber-v0-easy", "seed": 1}'


@pytest.mark.parametrize(
    ("prompt", "message"),
    [
        (["hello", {"role": "user", "content": "x", "gem": LABEL}], "The prompt's message 0 ('hello') is not a chat message"),
        ([{"role": "system"}, {"role": "user", "content": "x", "gem": LABEL}], "The prompt's system message 0 ({'role': 'system'}) has no text"),
        ([{"role": "system", "content": 5}, {"role": "user", "content": "x", "gem": LABEL}], "The prompt's system message 0 ({'content': 5, 'role': 'system'}) has no text"),
    ],
)
def test_a_malformed_message_in_a_prompt_is_named_with_the_fix(prompt, message):
    """A raw AttributeError or KeyError from deep in the rollout named neither the row nor the fix."""
    from gem_adapters.trl.make_dataset import episode_label
    from gem_core.errors import InvalidArgument

    with pytest.raises(InvalidArgument) as err:
        episode_label(prompt)
    assert str(err.value).startswith(message) and str(err.value).endswith("Build the training dataset with gem_adapters.trl.make_dataset(env_ids, n) "
                                                                          "(TRL passes only the prompt column to rollout_func).")


def test_a_system_message_without_content_stops_the_trainer_naming_the_row(grpo_config, fresh_model, tiny_tokenizer):
    from gem_core.errors import InvalidArgument

    inner = GemRolloutFunc(max_new_tokens=8)

    def rollout(prompts, trainer):  # Arrow keeps every message's keys, so the damage is done on the way in
        for prompt in prompts:
            del prompt[0]["content"]
        return inner(prompts, trainer)

    trainer = GRPOTrainer(
        model=fresh_model, reward_funcs=env_return_reward, args=grpo_config(max_steps=1), processing_class=tiny_tokenizer,
        train_dataset=make_dataset(ENV_ID, n=2, system_prompt="Be brief."), rollout_func=rollout,
    )
    with pytest.raises(InvalidArgument, match=r"The prompt's system message 0 \(\{'gem': None, 'role': 'system'\}\) has no text"):
        trainer.train()


def test_make_dataset_rejects_unknown_env():
    with pytest.raises(ValueError, match="game:GuessTheNumber-v0"):
        make_dataset("game:GuessTheNumbr-v0", n=2)


def test_episodes_gem_truncated_are_masked_by_mask_truncated_completions(grpo_config, fresh_model, tiny_tokenizer):
    """TRL decides "truncated" from the completion's last id; GEM's truncated episodes must read as such."""
    rollout = GemRolloutFunc(max_turns=1, max_new_tokens=8)
    Trainer = loss_inputs_recorder(GRPOTrainer)
    trainer = Trainer(
        model=fresh_model, reward_funcs=env_return_reward, args=grpo_config(max_steps=1, mask_truncated_completions=True),
        processing_class=tiny_tokenizer, train_dataset=make_dataset("game:GuessTheNumber-v0-hard", n=4, seed_start=0),
        rollout_func=rollout,
    )
    trainer.train()

    batch = Trainer.seen[-1]
    rows = batch["completion_ids"].tolist()
    trajectories = rollout.last_trajectories
    assert any(t.truncated for t in trajectories), "the turn limit should truncate these episodes"
    for trajectory in trajectories:
        row = next(r for r, c in enumerate(rows) if c[: len(trajectory.response_ids)] == trajectory.response_ids)
        trained = int((batch["completion_mask"][row] * batch["tool_mask"][row]).sum())
        assert (trained == 0) == trajectory.truncated
    # The episode statistics reach TRL's logged metrics.
    logged = next(entry for entry in trainer.state.log_history if "gem/truncated" in entry)
    assert logged["gem/truncated"] == pytest.approx(np.mean([t.truncated for t in trajectories]))
    assert logged["gem/turns"] == pytest.approx(np.mean([t.num_turns for t in trajectories]))
    assert logged["gem/env_error_rate"] == 0 and "gem/success" in logged


def test_episode_that_ended_normally_gets_eos_and_a_truncated_one_never_ends_in_eos():
    from gem_adapters.trl import trajectories_to_rollout
    from gem_core.rollout import TokenTrajectory

    def trajectory(response, truncated):
        return TokenTrajectory(prompt_ids=[1], response_ids=response, loss_mask=[1] * len(response),
                               logprobs=[0.0] * len(response), turn_spans=[(0, len(response))], rewards=[0.0],
                               terminated=not truncated, truncated=truncated)

    out = trajectories_to_rollout(
        [trajectory([5, 6], False), trajectory([5, 6], True), trajectory([5, 9], True), trajectory([5, 9], False)],
        eos_token_id=9, filler_token_id=3,
    )
    assert out["completion_ids"] == [[5, 6, 9], [5, 6], [5, 9, 3], [5, 9]]
    assert out["env_mask"] == [[1, 1, 0], [1, 1], [1, 1, 0], [1, 1]]
    assert out["truncated"] == [False, True, True, False]


def test_a_truncated_episode_never_ends_in_an_id_trl_takes_as_eos(grpo_config, fresh_model, tiny_tokenizer, monkeypatch):
    """Phi-3 style: the tokenizer's eos is not the chat template's end of turn, which the model's generation_config
    lists as an eos. TRL ends a completion at any of those ids (or pad), so a GEM-truncated episode ending in the
    end of turn read as finished: mask_truncated_completions trained on it and clipped_ratio read 0."""
    import copy

    from gem_core.testing import ScriptedPolicy

    tokenizer = copy.deepcopy(tiny_tokenizer)
    tokenizer.eos_token = "<|endoftext|>"
    end_of_turn = tokenizer.convert_tokens_to_ids("<|im_end|>")
    assert tokenizer.eos_token_id != end_of_turn
    fresh_model.generation_config.eos_token_id = [tokenizer.eos_token_id, end_of_turn]
    monkeypatch.setattr(rollout_module, "trainer_policy", lambda trainer, n, **kwargs: ScriptedPolicy(tokenizer, ["\\boxed{1}"]))
    rollout = GemRolloutFunc(max_turns=1, max_new_tokens=16)
    Trainer = loss_inputs_recorder(GRPOTrainer)
    trainer = Trainer(
        model=fresh_model, reward_funcs=env_return_reward, args=grpo_config(max_steps=1, mask_truncated_completions=True),
        processing_class=tokenizer, train_dataset=make_dataset("game:GuessTheNumber-v0-hard", n=2), rollout_func=rollout,
    )
    assert end_of_turn in trainer.eos_token_ids
    trainer.train()

    trajectories = rollout.last_trajectories
    assert all(t.truncated and t.response_ids[-1] == end_of_turn for t in trajectories)
    batch = Trainer.seen[-1]
    assert (batch["completion_mask"] * batch["tool_mask"]).sum(1).tolist() == [0] * len(trajectories)
    logged = next(entry for entry in trainer.state.log_history if "gem/truncated" in entry)
    assert logged["gem/truncated"] == 1 and logged["completions/clipped_ratio"] == 1


def test_an_empty_completion_gets_one_masked_id_even_without_a_filler_or_eos():
    from gem_adapters.trl import trajectories_to_rollout
    from gem_core.rollout import TokenTrajectory

    def empty(truncated):
        return TokenTrajectory(prompt_ids=[1], response_ids=[], loss_mask=[], logprobs=[], turn_spans=[], rewards=[],
                               terminated=not truncated, truncated=truncated)

    cases = {(9, 3): [[3], [9]], (9, None): [[9], [9]], (None, 3): [[3], [3]], (None, None): [[0], [0]]}
    for (eos, filler), completions in cases.items():
        out = trajectories_to_rollout([empty(True), empty(False)], eos_token_id=eos, filler_token_id=filler, end_token_ids=[9, 4])
        assert out["completion_ids"] == completions and out["env_mask"] == [[0], [0]] and out["logprobs"] == [[0.0], [0.0]]
    # The trainer's end ids, not the tokenizer's eos alone: a truncated episode ending in any of them gets the filler.
    truncated = TokenTrajectory(prompt_ids=[1], response_ids=[5, 4], loss_mask=[1, 1], logprobs=[0.0, 0.0], turn_spans=[(0, 2)],
                                rewards=[0.0], terminated=False, truncated=True)
    assert trajectories_to_rollout([truncated], eos_token_id=9, filler_token_id=3)["completion_ids"] == [[5, 4]]
    assert trajectories_to_rollout([truncated], eos_token_id=9, filler_token_id=3, end_token_ids=[9, 4])["completion_ids"] == [[5, 4, 3]]


def test_turn_credit_trainer_logs_the_advantages_it_trains_on(grpo_config, fresh_model, tiny_tokenizer):
    class Recorder(TurnCreditGRPOTrainer):
        def _generate_and_score_completions(self, inputs):
            output = super()._generate_and_score_completions(inputs)
            self.logged = list(self._logs["advantages"])[-len(inputs):]
            self.output = output
            return output

    class VariedTurnRewards(GemRolloutFunc):
        """A random tiny model earns the same reward every turn; give the turns distinct rewards instead."""

        def __call__(self, prompts, trainer):
            out = super().__call__(prompts, trainer)
            out["turn_rewards"] = [[float((3 * i + j) % 4) for j in range(len(r))] for i, r in enumerate(out["turn_rewards"])]
            return out

    trainer = Recorder(
        model=fresh_model, reward_funcs=env_return_reward, args=grpo_config(max_steps=1), processing_class=tiny_tokenizer,
        train_dataset=make_dataset(ENV_ID, n=4, seed_start=3), rollout_func=VariedTurnRewards(max_new_tokens=12),
        turn_credit="rebn", gamma=0.9,
    )
    trainer.train()

    out = trainer.output
    mask = (out["completion_mask"] * out["tool_mask"]).float()
    trained = ((out["advantages"] * mask).sum(1) / mask.sum(1).clamp(min=1)).tolist()
    assert any(abs(a) > 1e-3 for a in trained)
    assert trainer.logged == pytest.approx(trained, abs=1e-6)




def test_grpo_config_chat_template_kwargs_reach_the_prompt_ids_of_the_loss(grpo_config, fresh_model):
    from gem_core.testing import make_tokenizer

    tokenizer = make_tokenizer("chatml")  # a new object each call: its template is ours to change
    tokenizer.chat_template = QWEN3_THINKING_SWITCH
    rollout = GemRolloutFunc(max_new_tokens=8)
    Trainer = loss_inputs_recorder(GRPOTrainer)
    trainer = Trainer(
        model=fresh_model, reward_funcs=env_return_reward,
        args=grpo_config(max_steps=1, chat_template_kwargs={"enable_thinking": False}),
        processing_class=tokenizer, train_dataset=make_dataset(ENV_ID, n=2, seed_start=0), rollout_func=rollout,
    )
    trainer.train()

    batch = Trainer.seen[-1]
    for ids, mask in zip(batch["prompt_ids"].tolist(), batch["prompt_mask"].tolist()):
        prompt = tokenizer.decode([i for i, m in zip(ids, mask) if m])
        assert prompt.endswith("<|im_start|>assistant\n<think>\n\n</think>\n\n"), prompt[-80:]


def test_make_dataset_command_line_writes_rows_the_rollout_reads(tmp_path):
    import subprocess
    import sys

    from datasets import load_dataset

    from gem_adapters.trl.make_dataset import episode_label

    out = tmp_path / "train.jsonl"
    done = subprocess.run(
        [sys.executable, "-m", "gem_adapters.trl", "--env", ENV_ID, "--n", "3", "--seed-start", "5", "--out", str(out)],
        capture_output=True, text=True, timeout=300,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    rows = load_dataset("json", data_files=str(out), split="train")
    labels = [episode_label(row["prompt"])[0] for row in rows]
    assert [(label.env_id, label.seed) for label in labels] == [(ENV_ID, 5), (ENV_ID, 6), (ENV_ID, 7)]
    assert [row["prompt"] for row in rows] == make_dataset(ENV_ID, n=3, seed_start=5)["prompt"]


def test_the_old_names_are_gone_at_0_1_0():
    with pytest.raises(TypeError, match="max_turn_tokens"):
        GemRolloutFunc(max_turn_tokens=12)
    with pytest.raises(TypeError, match="'seed'"):
        make_dataset(ENV_ID, n=1, seed=3)
