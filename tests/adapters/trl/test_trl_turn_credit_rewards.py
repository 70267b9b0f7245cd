"""TurnCreditGRPOTrainer's per-turn credits come from the env's turn rewards alone, so reward settings it would
ignore (other reward functions, reward weights) are refused when it is built, naming them and the fix."""

from __future__ import annotations

import pytest

from gem_adapters.trl import GemRolloutFunc, TurnCreditGRPOTrainer, env_return_reward, make_dataset
from gem_core.errors import InvalidArgument

ENV_ID = "game:GuessTheNumber-v0-easy"


def bonus(completions, **kwargs):
    return [float(i) for i in range(len(completions))]


def build(grpo_config, model, tokenizer, reward_funcs, turn_credit="rebn", **config):
    return TurnCreditGRPOTrainer(
        model=model, reward_funcs=reward_funcs, args=grpo_config(max_steps=1, **config), processing_class=tokenizer,
        train_dataset=make_dataset(ENV_ID, n=4), rollout_func=GemRolloutFunc(max_new_tokens=4), turn_credit=turn_credit,
    )


@pytest.mark.parametrize(
    ("reward_funcs", "config", "named"),
    [
        ([env_return_reward, bonus], {}, "2 reward functions (env_return_reward, bonus)"),
        ([bonus, env_return_reward], {"reward_weights": [0.0, 1.0]}, "2 reward functions (bonus, env_return_reward)"),
        (env_return_reward, {"reward_weights": [2.0]}, "reward_weights=[2.0]"),
    ],
)
def test_per_turn_credit_refuses_reward_settings_it_would_ignore(grpo_config, fresh_model, tiny_tokenizer, reward_funcs, config, named):
    with pytest.raises(InvalidArgument) as err:
        build(grpo_config, fresh_model, tiny_tokenizer, reward_funcs, **config)
    message = str(err.value)
    assert message.startswith("TurnCreditGRPOTrainer(turn_credit='rebn')") and named in message
    assert "reward_funcs=env_return_reward" in message and "turn_credit='episode'" in message


def test_episode_credit_and_the_env_return_alone_are_taken(grpo_config, fresh_model, tiny_tokenizer):
    assert build(grpo_config, fresh_model, tiny_tokenizer, [env_return_reward, bonus], turn_credit="episode").turn_credit == "episode"
    assert build(grpo_config, fresh_model, tiny_tokenizer, env_return_reward, reward_weights=[1.0]).turn_credit == "rebn"
