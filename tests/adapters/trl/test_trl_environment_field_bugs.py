"""The environment_factory route's episode fields, and the sampler callback's resume folder.

Each test names what went wrong before its fix: a prompt shown for one game while another was played, a seed row
whose task the model never saw, an episode that ignored the tool outscoring a malformed move, and a curriculum
restored from another step than the model's.
"""

from __future__ import annotations

import json
import os
import types
import warnings

import pytest

from gem_adapters.trl import TaskSamplerCallback, environment_factory, make_dataset
from gem_core import make
from gem_core.curriculum import TaskSampler, save_sampler_state
from gem_core.errors import InvalidArgument

ENV_ID = "game:GuessTheNumber-v0"


def test_factory_kwargs_a_make_dataset_row_was_not_built_with_are_refused_by_name():
    """Before: the class's kwargs applied over the row's label, so the prompt (rendered by make_dataset without them)
    said "between 1 and 20, at most 8 turns" while the env played up to 1000 in 3 turns, in silence."""
    row = make_dataset(ENV_ID, 1)[0]
    env = environment_factory(ENV_ID, max_number=1000, max_turns=3)()
    with pytest.raises(InvalidArgument) as err:
        env.reset(**row)
    message = str(err.value)
    assert "max_number" in message and "max_turns" in message and "make_dataset" in message and "env_kwargs=" in message
    # a row built with the same kwargs plays them
    row = make_dataset(ENV_ID, 1, env_kwargs={"max_number": 1000, "max_turns": 3})[0]
    assert env.reset(**row) is None and env.env is not None
    # a row built with another value plays its own (its prompt says that one)
    row = make_dataset(ENV_ID, 1, env_kwargs={"max_number": 50, "max_turns": 3})[0]
    assert env.reset(**row) is None and env.env.unwrapped.max_number == 50


def test_the_seed_column_route_shows_the_model_the_envs_first_observation():
    """Before: reset(seed=...) returned None, so TRL appended nothing and the model never saw the seed's task."""
    env = environment_factory(ENV_ID, max_number=1000)()
    shown = env.reset(prompt=[{"role": "user", "content": "Play the game."}], seed=5)
    fresh = make(ENV_ID, max_number=1000)
    first_observation, _ = fresh.reset(seed=5)
    assert isinstance(shown, str) and first_observation in shown
    assert shown.startswith("\n\n")  # TRL appends it to the last message as is: it must not run into the row's text
    # labelled rows already carry the first observation in their prompt
    assert environment_factory()().reset(**make_dataset(ENV_ID, 1)[0]) is None


def test_an_episode_the_model_never_moved_in_scores_the_envs_empty_move_and_is_truncated():
    """Before: an episode where act() was never called paid 0.0 (not done, not truncated), more than a malformed
    move's -0.1: ignoring the tool was what GRPO rewarded."""
    factory = environment_factory(ENV_ID)
    silent = factory()
    silent.reset(seed=3)
    tried = factory()
    tried.reset(seed=3)
    tried.act("my guess is 10")
    assert silent.get_reward() <= tried.get_reward() < 0
    assert silent.done and silent.truncated and len(silent.rewards) == 1
    assert silent.get_reward() == silent.get_reward()  # scored once: a second call does not step again
    assert len(silent.rewards) == 1


def test_an_episode_stopped_partway_is_truncated_with_its_moves_so_far():
    """Before: an episode cut before the game ended (TRL's max_tool_calling_iterations, or the model stopped) was
    reported as neither done nor truncated."""
    env = environment_factory(ENV_ID)()
    env.reset(seed=3)
    env.act(f"\\boxed{{{1 if env.env.target != 1 else 2}}}")
    moved = list(env.rewards)
    assert env.get_reward() == sum(moved) and env.rewards == moved
    assert env.done and env.truncated


TASKS = ["game:GuessTheNumber-v0", "game:GuessTheNumber-v0-easy"]


def _checkpoints(out):
    sampler = TaskSampler(TASKS, seed=1)
    for step in (2, 4):
        sampler.draw(step)
        folder = os.path.join(out, f"checkpoint-{step}")
        os.makedirs(folder)
        save_sampler_state(sampler, folder)
        with open(os.path.join(folder, "trainer_state.json"), "w") as handle:
            json.dump({"global_step": step}, handle)
    return sampler.draws


def test_the_sampler_restores_from_the_resumed_steps_checkpoint_not_a_stale_args_field(tmp_path):
    """Before: a stale TrainingArguments.resume_from_checkpoint (checkpoint-2) was read although training resumed at
    step 4 (Trainer never reads that field): the curriculum silently resumed two steps behind the model."""
    out = str(tmp_path)
    draws_at_4 = _checkpoints(out)
    args = types.SimpleNamespace(output_dir=out, resume_from_checkpoint=os.path.join(out, "checkpoint-2"))
    state = types.SimpleNamespace(global_step=4, is_world_process_zero=True)
    restored = TaskSampler(TASKS, seed=1)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        TaskSamplerCallback(restored).on_train_begin(args, state, None)
    assert restored.draws == draws_at_4


def test_a_checkpoint_of_another_step_than_the_resumed_one_is_refused_naming_both(tmp_path):
    """Before: the sampler was restored from whatever folder was named, whatever its step, without a word."""
    out = str(tmp_path / "ckpts")
    _checkpoints(out)
    stale = os.path.join(out, "checkpoint-2")
    state = types.SimpleNamespace(global_step=4, is_world_process_zero=True)
    elsewhere = types.SimpleNamespace(output_dir=str(tmp_path / "new_out"), resume_from_checkpoint=stale)
    with pytest.raises(InvalidArgument) as err:
        TaskSamplerCallback(TaskSampler(TASKS, seed=1)).on_train_begin(elsewhere, state, None)
    assert "step 2" in str(err.value) and "step 4" in str(err.value) and stale in str(err.value)
    with pytest.raises(InvalidArgument, match="step 2"):
        TaskSamplerCallback(TaskSampler(TASKS, seed=1), resume_from=stale).on_train_begin(
            types.SimpleNamespace(output_dir=out, resume_from_checkpoint=None), state, None)
