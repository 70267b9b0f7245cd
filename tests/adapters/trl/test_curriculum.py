"""A task sampler through the real trl.GRPOTrainer on CPU: each GRPO group's copies share a drawn task,
finished episodes update the sampler, per-task metrics reach TRL's logs, and the sampler's state rides
in every checkpoint folder and comes back when training resumes."""

from __future__ import annotations

import copy
import json

import pytest
from trl import GRPOTrainer

from gem_adapters.trl import GemRolloutFunc, TaskSamplerCallback, env_return_reward, make_dataset
from gem_core.curriculum import SAMPLER_STATE_FILE, Task, TaskSampler, tag_task
from gem_core.rollout import TokenTrajectory
from gem_core.rows import EpisodeLabel
from gem_core.testing import make_model

#: Two envs, short episodes (two turns) so a 2-step run stays quick.
TASKS = [Task("game:GuessTheNumber-v0-easy", {"max_turns": 2}), Task("game:Mastermind-v0-easy", {"max_turns": 2})]


def sampler() -> TaskSampler:
    return TaskSampler(TASKS, seed=1, min_episodes=2, window=8)


def recording(rollout: GemRolloutFunc, calls: list[list[TokenTrajectory]]):
    """The rollout function as the trainer calls it, keeping each call's finished episodes."""

    def rollout_func(prompts, trainer):
        out = rollout(prompts, trainer)
        calls.append(list(rollout.last_trajectories))
        return out

    return rollout_func


def build_trainer(config, model, tokenizer, task_sampler, calls, **callback_kwargs):
    rollout = GemRolloutFunc(max_new_tokens=6, task_sampler=task_sampler)
    return GRPOTrainer(
        model=model, reward_funcs=env_return_reward, args=config, processing_class=tokenizer,
        # The dataset names only GuessTheNumber: the episodes' tasks can come from the sampler alone.
        train_dataset=make_dataset("game:GuessTheNumber-v0-easy", n=8, env_kwargs={"max_turns": 2}),
        rollout_func=recording(rollout, calls), callbacks=[TaskSamplerCallback(task_sampler, **callback_kwargs)],
    )


def starts(trajectories: list[TokenTrajectory]) -> list[tuple[str, str, int]]:
    return [(t.metrics["task"], t.env_id, t.seed) for t in trajectories]


def test_each_group_shares_a_drawn_task_the_sampler_learns_and_resuming_restores_it(grpo_config, fresh_model, tiny_tokenizer, tmp_path):
    config = grpo_config(output_dir=str(tmp_path / "run"), save_strategy="steps", save_steps=1, max_steps=2)
    task_sampler, calls = sampler(), []
    trainer = build_trainer(config, fresh_model, tiny_tokenizer, task_sampler, calls)
    trainer.train()

    assert len(calls) == 2 and all(len(batch) == 4 for batch in calls)
    names = {task.name for task in TASKS}
    for batch in calls:
        drawn = starts(batch)
        # Both copies of a GRPO group play the same task from the same seed; the two groups are two draws.
        assert drawn[0] == drawn[1] and drawn[2] == drawn[3] and drawn[0] != drawn[2]
        assert {name for name, _, _ in drawn} <= names
    played = [start for batch in calls for start in starts(batch)]
    assert {name for name, _, _ in played} == names, "this seed draws both tasks in four draws"
    # The sampler drew once per group and counted every finished episode of its task.
    assert task_sampler.draws == 4
    for task in TASKS:
        assert task_sampler.stats(task).episodes == sum(name == task.name for name, _, _ in played)

    # Per-task and curriculum metrics reach TRL's logs beside its own.
    logged = {key for entry in trainer.state.log_history for key in entry}
    for task in TASKS:
        assert f"gem/curriculum/{task.name}/probability" in logged
    assert {f"gem/task/{name}/success" for name, _, _ in played} <= logged
    assert "frac_reward_zero_std" in logged

    # Every checkpoint folder holds the sampler's state as it was at that step.
    saved = {step: json.loads((tmp_path / "run" / f"checkpoint-{step}" / SAMPLER_STATE_FILE).read_text()) for step in (1, 2)}
    assert saved[1]["draws"] == 2 and saved[2] == task_sampler.state_dict()

    # Resuming from checkpoint-1 restores the sampler, so step 2 draws what the first run drew there.
    resumed_sampler, resumed_calls = sampler(), []
    resumed = build_trainer(config, copy.deepcopy(make_model(tiny_tokenizer, seed=0)), tiny_tokenizer, resumed_sampler, resumed_calls)
    resumed.train(resume_from_checkpoint=str(tmp_path / "run" / "checkpoint-1"))
    assert len(resumed_calls) == 1
    assert [(n, e, s) for n, e, s in starts(resumed_calls[0])] == starts(calls[1])
    assert resumed_sampler.draws == 4


def test_resuming_restores_from_a_named_folder_and_warns_when_the_state_is_missing(grpo_config, tmp_path):
    from transformers import TrainerControl, TrainerState

    original = sampler()
    original.update(original.draw(1)[0], True)
    elsewhere = tmp_path / "copied-checkpoint"
    TaskSamplerCallback(original).on_save(grpo_config(output_dir=str(elsewhere.parent)), TrainerState(global_step=0), TrainerControl())
    (tmp_path / "checkpoint-0").rename(elsewhere)

    restored = sampler()
    TaskSamplerCallback(restored, resume_from=elsewhere).on_train_begin(
        grpo_config(output_dir=str(tmp_path / "new")), TrainerState(global_step=7), TrainerControl()
    )
    assert restored.state_dict() == original.state_dict()

    fresh = sampler()
    with pytest.warns(UserWarning, match="starts afresh; if the checkpoint is elsewhere, pass TaskSamplerCallback"):
        TaskSamplerCallback(fresh).on_train_begin(grpo_config(output_dir=str(tmp_path / "new")), TrainerState(global_step=7), TrainerControl())
    assert fresh.draws == 0


def test_the_rollout_logs_each_tasks_success_and_the_samplers_probabilities():
    from collections import defaultdict
    from types import SimpleNamespace

    from gem_adapters.trl.rollout import _log_episode_metrics

    def episode(env_id: str, kwargs: dict, reward: float) -> TokenTrajectory:
        trajectory = TokenTrajectory(
            prompt_ids=[1], response_ids=[2], loss_mask=[1], logprobs=[0.0], turn_spans=[(0, 1)], rewards=[reward],
            terminated=True, truncated=False, env_id=env_id, seed=0, infos=[{"success": reward > 0}],
        )
        return tag_task(trajectory, EpisodeLabel(env_id, 0, kwargs))

    easy, hard = episode("game:GuessTheNumber-v0", {"max_number": 4}, 1.0), episode("game:GuessTheNumber-v0", {"max_number": 8}, 0.0)
    trainer = SimpleNamespace(_metrics={"train": defaultdict(list), "eval": defaultdict(list)}, model=SimpleNamespace(training=True))
    # Two batches of one logging window: GRPOTrainer.log reports each metric list's mean.
    _log_episode_metrics(trainer, [easy, hard], {"gem/curriculum/x/probability": 0.25})
    _log_episode_metrics(trainer, [easy], {"gem/curriculum/x/probability": 0.5})
    logged = {name: sum(values) / len(values) for name, values in trainer._metrics["train"].items()}
    assert logged["gem/task/game:GuessTheNumber-v0[max_number=4]/success"] == 1.0
    assert logged["gem/task/game:GuessTheNumber-v0[max_number=4]/episodes"] == 2
    assert logged["gem/task/game:GuessTheNumber-v0[max_number=8]/return"] == 0.0
    assert logged["gem/success"] == pytest.approx(2 / 3) and logged["gem/episodes"] == 3
    assert logged["gem/curriculum/x/probability"] == 0.375
    assert not trainer._metrics["eval"]
    assert env_return_reward([None, None], [1.0, 0.0]) == [1.0, 0.0]


def test_a_sampler_of_vision_tasks_is_refused_because_trl_shows_the_dataset_rows_images():
    with pytest.raises(ValueError, match="cannot draw vision tasks"):
        GemRolloutFunc(task_sampler=TaskSampler(["game:GuessTheNumber-v0", "vision:ChartQA-v0"]))
