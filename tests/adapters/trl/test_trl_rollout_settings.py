"""GemRolloutFunc's settings hold from the trainer's config to the model: GRPOConfig's sampling settings reach
``model.generate``, an option assigned after construction is checked as at construction, a count past what a
backend takes is refused when given, and a task sampler's group matches the trainer's."""

from __future__ import annotations

import pytest
from trl import GRPOTrainer

from gem_adapters.trl import GemRolloutFunc, env_return_reward, make_dataset
from gem_core.curriculum import TaskSampler
from gem_core.errors import InvalidArgument, InvalidArgumentType

ENV_ID = "game:GuessTheNumber-v0-easy"


def build_trainer(grpo_config, model, tokenizer, rollout, **config):
    return GRPOTrainer(
        model=model, reward_funcs=env_return_reward, args=grpo_config(max_steps=1, **config), processing_class=tokenizer,
        train_dataset=make_dataset(ENV_ID, n=4), rollout_func=rollout,
    )


def spy_on_generate(trainer) -> list[dict]:
    """Every keyword the trainer's model's ``generate`` gets, one dict per call."""
    model = trainer.accelerator.unwrap_model(trainer.model)
    real, calls = model.generate, []

    def generate(*args, **kwargs):
        calls.append(dict(kwargs))
        return real(*args, **kwargs)

    model.generate = generate
    return calls


def test_grpo_configs_repetition_penalty_min_p_and_generation_kwargs_reach_generate(grpo_config, fresh_model, tiny_tokenizer):
    rollout = GemRolloutFunc(max_new_tokens=6)
    trainer = build_trainer(grpo_config, fresh_model, tiny_tokenizer, rollout,
                            repetition_penalty=1.7, min_p=0.3, generation_kwargs={"no_repeat_ngram_size": 2})
    calls = spy_on_generate(trainer)
    rollout(list(make_dataset(ENV_ID, 2)["prompt"]), trainer)
    assert calls
    for kwargs in calls:
        assert (kwargs.get("repetition_penalty"), kwargs.get("min_p"), kwargs.get("no_repeat_ngram_size")) == (1.7, 0.3, 2)
    assert calls[0]["max_new_tokens"] == 6  # the turn's budget is still the rollout's (later turns' may be less: the episode's)


@pytest.mark.parametrize(("key", "instead"), [("max_new_tokens", "GemRolloutFunc(max_new_tokens=...)"), ("temperature", "GRPOConfig.temperature"),
                                              ("num_beams", "remove it from generation_kwargs.")])
def test_a_generation_kwarg_the_rollout_sets_per_turn_is_refused_naming_the_setting_to_use(grpo_config, fresh_model, tiny_tokenizer, key, instead):
    rollout = GemRolloutFunc(max_new_tokens=6)
    trainer = build_trainer(grpo_config, fresh_model, tiny_tokenizer, rollout, generation_kwargs={key: 5})
    with pytest.raises(InvalidArgument) as err:
        rollout(list(make_dataset(ENV_ID, 2)["prompt"]), trainer)
    assert f"GRPOConfig.generation_kwargs[{key!r}]" in str(err.value) and instead in str(err.value)


def test_a_turn_budget_past_what_backends_take_is_refused_when_given():
    with pytest.raises(InvalidArgument) as err:
        GemRolloutFunc(max_new_tokens=2**31)
    assert str(err.value).startswith("GemRolloutFunc: max_new_tokens=2147483648 is past 2147483647")
    assert GemRolloutFunc(max_new_tokens=2**31 - 1).max_new_tokens == 2**31 - 1


@pytest.mark.parametrize(
    ("name", "value", "error", "message"),
    [
        ("max_new_tokens", 0, InvalidArgument, "GemRolloutFunc: max_new_tokens=0 must be a positive whole number, or None."),
        ("max_turns", -1, InvalidArgument, "GemRolloutFunc: max_turns=-1 must be a positive whole number"),
        ("logprobs", "no", InvalidArgument, "GemRolloutFunc: logprobs='no' must be True or False, or None."),
        ("score_env_tokens", 1, InvalidArgument, "GemRolloutFunc: score_env_tokens=1 must be True or False."),
        ("task_sampler", "x", InvalidArgumentType, "GemRolloutFunc: task_sampler must be a gem_core.curriculum.TaskSampler"),
        ("agent", "x", InvalidArgumentType, "GemRolloutFunc: agent must be a gem_core.agent.AgentProgram"),
    ],
)
def test_an_option_assigned_after_construction_is_checked_as_at_construction(name, value, error, message):
    """``rollout.max_new_tokens = 0`` played empty moves in silence, and ``logprobs = "no"`` read as True."""
    rollout = GemRolloutFunc(max_new_tokens=4)
    before = getattr(rollout, name)
    with pytest.raises(error) as err:
        setattr(rollout, name, value)
    assert str(err.value).startswith(message)
    assert getattr(rollout, name) == before
    rollout.max_new_tokens = 8  # a good value is still taken
    assert rollout.max_new_tokens == 8


def test_a_band_sampler_whose_group_is_not_the_trainers_is_refused_naming_both(grpo_config, fresh_model, tiny_tokenizer):
    sampler = TaskSampler([ENV_ID, "game:GuessTheNumber-v0-hard"])  # group_size 2, the default
    rollout = GemRolloutFunc(max_new_tokens=4, task_sampler=sampler)
    trainer = build_trainer(grpo_config, fresh_model, tiny_tokenizer, rollout, num_generations=4)
    trainer.model.train()
    with pytest.raises(InvalidArgument) as err:
        rollout(list(make_dataset(ENV_ID, 1)["prompt"]) * 4, trainer)
    message = str(err.value)
    assert "group_size=2" in message and "num_generations=4" in message and "TaskSampler(..., group_size=4)" in message
    assert sampler.state_dict() == TaskSampler([ENV_ID, "game:GuessTheNumber-v0-hard"]).state_dict()  # nothing drawn or recorded
