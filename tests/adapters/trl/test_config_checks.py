"""Bad settings of the TRL adapter fail where they are given, as one error naming the setting and the fix,
instead of at the first episode inside the trainer (or never: settings that were silently dropped)."""

from __future__ import annotations

from importlib import metadata

import pytest

from gem_adapters.trl import GemRolloutFunc, TRLVersionError, env_return_reward, environment_factory, make_dataset
from gem_core.curriculum import TaskSampler
from gem_core.rows import EnvKwargsError

ENV_ID = "game:GuessTheNumber-v0-easy"


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"max_turns": 0}, "GemRolloutFunc: max_turns=0 must be a positive whole number of turns, or None."),
        ({"max_turns": -1}, "GemRolloutFunc: max_turns=-1 must be a positive whole number"),
        ({"max_turns": 1.5}, "GemRolloutFunc: max_turns=1.5 must be a positive whole number"),
        ({"max_turns": "3"}, "GemRolloutFunc: max_turns='3' must be a positive whole number"),
        ({"max_new_tokens": 0}, "GemRolloutFunc: max_new_tokens=0 must be a positive whole number, or None."),
        ({"max_new_tokens": -5}, "GemRolloutFunc: max_new_tokens=-5 must be a positive whole number"),
        ({"max_new_tokens": 2.5}, "GemRolloutFunc: max_new_tokens=2.5 must be a positive whole number"),
    ],
)
def test_rollout_func_refuses_bad_turn_and_token_limits_when_built(options, message):
    with pytest.raises(ValueError) as err:
        GemRolloutFunc(**options)
    assert str(err.value) == message or str(err.value).startswith(message)


@pytest.mark.parametrize("task_sampler", ["game:GuessTheNumber-v0", [ENV_ID], {"tasks": [ENV_ID]}])
def test_rollout_func_refuses_a_task_sampler_that_is_not_one(task_sampler):
    with pytest.raises(TypeError) as err:
        GemRolloutFunc(task_sampler=task_sampler)
    assert str(err.value) == (
        f"GemRolloutFunc: task_sampler must be a gem_core.curriculum.TaskSampler (or None), got {type(task_sampler).__name__}."
    )


def test_rollout_func_still_takes_a_task_sampler():
    sampler = TaskSampler([ENV_ID])
    assert GemRolloutFunc(max_turns=2, max_new_tokens=4, task_sampler=sampler).task_sampler is sampler


@pytest.mark.parametrize("build", [lambda: GemRolloutFunc(), lambda: environment_factory(ENV_ID)], ids=["rollout_func", "environment_factory"])
def test_the_main_route_checks_the_trl_version(monkeypatch, build):
    real = metadata.version
    monkeypatch.setattr(metadata, "version", lambda name: "1.17.0" if name == "trl" else real(name))
    with pytest.raises(TRLVersionError, match=r'found 1\.17\.0\. Install the supported version with `pip install -e "\.\[trl\]"`'):
        build()


def _wrong_guess(env) -> str:
    return f"\\boxed{{{1 if env.env.target != 1 else 2}}}"


def test_factory_kwargs_apply_to_make_dataset_rows_under_the_rows_own():
    row = make_dataset(ENV_ID, 1, seed_start=1, env_kwargs={"max_turns": 1})[0]
    env = environment_factory(ENV_ID, max_turns=1)()
    env.reset(**row)
    reply = env.act(_wrong_guess(env))  # with max_turns=1 the episode ends on it
    assert env.done and reply.endswith("The game is over.")
    # the row's own kwargs win over the factory's (its prompt was rendered with them)
    row = make_dataset(ENV_ID, 1, seed_start=3, env_kwargs={"max_turns": 3})[0]
    env.reset(**row)
    env.act(_wrong_guess(env))
    assert not env.done


def test_factory_episode_env_is_placed_with_the_factory_kwargs(monkeypatch):
    # The factory's episode env goes through gem_core.placement (TRL's route of tests/core/test_placement.py, which runs without
    # trl: the factory now checks the TRL version). The class is built, checking its kwargs, before recording.
    from gem_core import placement

    factory = environment_factory(ENV_ID, max_turns=4)
    placed = []

    def record(env_id, env_backend=None, **env_kwargs):
        placed.append((env_id, env_kwargs))
        raise RuntimeError("placed")

    monkeypatch.setattr(placement, "make_env", record)
    with pytest.raises(RuntimeError, match="placed"):
        factory().reset(seed=7)
    assert placed == [(ENV_ID, {"max_turns": 4})]


def test_factory_refuses_a_row_of_another_env():
    row = make_dataset(ENV_ID, 1)[0]
    with pytest.raises(ValueError) as err:
        environment_factory("game:Wordle-v0")().reset(**row)
    assert str(err.value) == (
        f"environment_factory('game:Wordle-v0') got a dataset row of {ENV_ID!r}: give environment_factory the rows' env id "
        f"({ENV_ID!r}), or no env id (rows from make_dataset name their own env)."
    )


def test_factory_refuses_a_row_with_neither_label_nor_seed():
    with pytest.raises(ValueError) as err:
        environment_factory(ENV_ID)().reset(prompt=[{"role": "user", "content": "hi"}])
    assert str(err.value) == (
        f"environment_factory({ENV_ID!r}) cannot tell which episode to reset: the dataset row has no GEM label, so it needs a "
        "default env_id and a 'seed' column; give the dataset a 'seed' column, or build it with gem_adapters.trl.make_dataset."
    )
    env = environment_factory(ENV_ID)()
    env.reset(seed=5, prompt=[{"role": "user", "content": "hi"}])  # a seed column is enough
    assert env.env is not None


def test_factory_refuses_kwargs_the_env_does_not_take_when_built():
    with pytest.raises(EnvKwargsError, match=r"(?s)\{\"bogus\": 1\} do not fit game:GuessTheNumber-v0-easy.*registered kwargs are .*max_number"):
        environment_factory(ENV_ID, bogus=1)


def test_env_return_reward_without_the_rollout_func_says_what_to_pass():
    with pytest.raises(ValueError) as err:
        env_return_reward(prompts=["p"], completions=["c"], completion_ids=[[1]])
    assert str(err.value) == (
        "env_return_reward reads the episode returns that GemRolloutFunc returns: pass rollout_func=GemRolloutFunc(...) "
        "to GRPOTrainer, or, with environment_factory, pass no reward_funcs (TRL then scores each episode with the env's get_reward())."
    )


@pytest.mark.parametrize("gamma", ["0.9", None, 2, float("nan")])
def test_turn_credit_trainer_refuses_a_gamma_that_is_not_a_discount(gamma):
    from gem_adapters.trl import TurnCreditGRPOTrainer

    with pytest.raises(ValueError) as err:
        TurnCreditGRPOTrainer(model=None, gamma=gamma)
    assert str(err.value) == f"TurnCreditGRPOTrainer: gamma={gamma!r} must be a number in [0, 1] (a discount over turns)."


@pytest.mark.parametrize(("options", "shown"), [({"logprobs": "no"}, "logprobs='no'"), ({"logprobs": 1}, "logprobs=1"),
                                                ({"score_env_tokens": "False"}, "score_env_tokens='False'"),
                                                ({"score_env_tokens": None}, "score_env_tokens=None")])
def test_rollout_func_refuses_a_switch_that_is_not_a_bool(options, shown):
    """A non-empty str such as "no" or "False" read as True, silently switching the option on."""
    from gem_core.errors import InvalidArgument

    with pytest.raises(InvalidArgument) as err:
        GemRolloutFunc(**options)
    assert str(err.value).startswith(f"GemRolloutFunc: {shown} must be True or False")
    assert GemRolloutFunc(logprobs=None, score_env_tokens=True).logprobs is None  # None still means "where TRL uses them"


def test_rollout_func_names_a_misspelt_keyword_and_the_closest_one():
    from gem_core.errors import GemError

    with pytest.raises(GemError) as err:
        GemRolloutFunc(max_turn=3)
    assert isinstance(err.value, TypeError)  # code catching the dataclass's TypeError still does
    assert str(err.value).startswith("GemRolloutFunc got an unexpected keyword 'max_turn' (did you mean 'max_turns'?); it takes max_turns, ")


@pytest.mark.parametrize("seed", ["3", -1, True, 1.5, 2**63, [1]])
def test_factory_refuses_a_seed_column_that_is_not_a_seed_naming_the_column(seed):
    """The rule of a label's seed (gem_core.rows.parse_label): gymnasium's own error named neither the column nor the
    fix, and True or a seed past 64 bits was played."""
    from gem_core.errors import InvalidArgument

    with pytest.raises(InvalidArgument) as err:
        environment_factory(ENV_ID)().reset(seed=seed, prompt=[{"role": "user", "content": "hi"}])
    message = str(err.value)
    assert message.startswith(f"environment_factory({ENV_ID!r}) cannot reset to the dataset row's 'seed' column: ")
    assert "seed must be an integer from 0 to 9223372036854775807" in message and message.endswith(
        "Give the dataset a 'seed' column of such integers, or build it with gem_adapters.trl.make_dataset.")


def test_factories_refuse_env_ids_that_are_neither_a_list_nor_a_mixture():
    from gem_adapters.trl import environment_factories
    from gem_core.errors import InvalidArgumentType

    with pytest.raises(InvalidArgumentType) as err:
        environment_factories(5)
    assert str(err.value).startswith("environment_factories: env_ids must be a list of env ids or a mixture {env_id: weight}, got int")


def test_rollout_func_refuses_last_trajectories_its_output_as_an_option():
    """GemRolloutFunc(last_trajectories=5) was taken, and the next call overwrote it."""
    from gem_core.errors import InvalidArgumentType

    with pytest.raises(InvalidArgumentType) as err:
        GemRolloutFunc(last_trajectories=5)
    assert str(err.value).startswith("GemRolloutFunc got an unexpected keyword 'last_trajectories' (an output, not an option); it takes max_turns, ")
    assert "last_trajectories" not in str(err.value).split("it takes")[1]
    assert GemRolloutFunc().last_trajectories == []


@pytest.mark.parametrize("env_ids", [[], {}, ()])
def test_factories_refuse_no_env_ids(env_ids):
    """An empty dict of factories was returned, which TRL fails on later without naming env_ids."""
    from gem_adapters.trl import environment_factories
    from gem_core.errors import InvalidArgument

    with pytest.raises(InvalidArgument) as err:
        environment_factories(env_ids)
    assert str(err.value).startswith(f"environment_factories: env_ids={env_ids!r} names no env; give at least one")


def test_environment_column_refuses_a_dataset_without_prompts_or_with_the_column_naming_it():
    """Bad input failed with datasets' own ValueError (no 'prompt' column, a duplicate 'environment' column)."""
    from datasets import Dataset

    from gem_adapters.trl import with_environment_column
    from gem_core.errors import InvalidArgument, InvalidArgumentType

    with pytest.raises(InvalidArgument) as err:
        with_environment_column(Dataset.from_list([{"x": 1}]))
    assert str(err.value).startswith("with_environment_column: the dataset has no 'prompt' column (its columns: ['x']); ")
    assert "make_dataset" in str(err.value)
    with_column = with_environment_column(make_dataset(ENV_ID, 2))
    assert with_column["environment"] == [ENV_ID, ENV_ID]
    with pytest.raises(InvalidArgument) as err:
        with_environment_column(with_column)
    assert str(err.value).startswith("with_environment_column: the dataset already has an 'environment' column; ")
    assert "remove_columns('environment')" in str(err.value)
    with pytest.raises(InvalidArgumentType) as err:
        with_environment_column([{"prompt": []}])
    assert str(err.value).startswith("with_environment_column takes a datasets.Dataset (from make_dataset), got list")
