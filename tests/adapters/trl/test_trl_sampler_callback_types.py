"""TaskSamplerCallback refuses a sampler or a resume folder of the wrong type when it is built, naming the argument:
it failed at the first checkpoint save (a whole save interval later) or on resume, as a raw AttributeError or
TypeError from deep inside."""

from __future__ import annotations

from pathlib import Path

import pytest

from gem_adapters.trl import GemRolloutFunc, TaskSamplerCallback
from gem_core.curriculum import TaskSampler
from gem_core.errors import InvalidArgumentType

ENV_ID = "game:GuessTheNumber-v0-easy"


@pytest.mark.parametrize("sampler", [ENV_ID, [ENV_ID], None, GemRolloutFunc()], ids=["str", "list", "None", "rollout_func"])
def test_a_sampler_that_is_not_a_task_sampler_is_refused_naming_it(sampler):
    with pytest.raises(InvalidArgumentType) as err:
        TaskSamplerCallback(sampler)
    assert str(err.value).startswith(f"TaskSamplerCallback: sampler must be a gem_core.curriculum.TaskSampler, got {type(sampler).__name__}")


@pytest.mark.parametrize("resume_from", [123, [ENV_ID]], ids=["int", "list"])
def test_a_resume_folder_that_is_not_a_path_is_refused_naming_it(resume_from):
    with pytest.raises(InvalidArgumentType) as err:
        TaskSamplerCallback(TaskSampler([ENV_ID]), resume_from=resume_from)
    assert str(err.value).startswith(f"TaskSamplerCallback: resume_from must be a checkpoint folder (a str or path), or None, got {type(resume_from).__name__}")


@pytest.mark.parametrize("resume_from", [None, "run/checkpoint-5", Path("run/checkpoint-5")])
def test_a_resume_folder_may_be_a_str_a_path_or_none(resume_from):
    sampler = TaskSampler([ENV_ID])
    callback = TaskSamplerCallback(sampler, resume_from=resume_from)
    assert callback.sampler is sampler and callback.resume_from == resume_from
