"""Keep a task sampler's state in TRL's checkpoints: ``GRPOTrainer(..., callbacks=[TaskSamplerCallback(sampler)])``.

A curriculum is part of the training state: a run resumed without it would start measuring every task
again and draw the tasks it had already moved past. transformers' ``TrainerCallback`` is the documented
hook for this: ``on_save`` runs right after a checkpoint folder is written, so the sampler's state goes in
beside the model (``checkpoint-<step>/gem_task_sampler.json``); ``on_train_begin`` runs after
``trainer.train(resume_from_checkpoint=...)`` has restored the trainer's state, so the sampler is restored
from the same folder before the first new rollout.
"""

from __future__ import annotations

import json
import os
import warnings
from typing import Any

from transformers import TrainerCallback
from transformers.trainer_utils import PREFIX_CHECKPOINT_DIR

from gem_core.curriculum import SAMPLER_STATE_FILE, TaskSampler, load_sampler_state, save_sampler_state
from gem_core.errors import InvalidArgument, InvalidArgumentType

__all__ = ["TaskSamplerCallback"]

TRAINER_STATE_NAME = "trainer_state.json"  # transformers.trainer.TRAINER_STATE_NAME (importing that module loads the whole Trainer)


class TaskSamplerCallback(TrainerCallback):
    """Saves ``sampler`` into every checkpoint folder and restores it when training resumes from one.

    The folder it restores from: ``resume_from`` if given, else ``<output_dir>/checkpoint-<step>`` of the resumed
    step if it exists (where ``resume_from_checkpoint=True`` and any checkpoint of this run's output folder are),
    else ``TrainingArguments.resume_from_checkpoint`` if it names a folder (``Trainer`` itself never reads that
    field, so it may name another checkpoint than the one resumed: the folder's step is checked).

    Raises:
        InvalidArgumentType: ``sampler`` is not a ``TaskSampler``, or ``resume_from`` neither a folder path nor None
            (refused here: they failed at the first checkpoint save, or on resume, naming neither).
    """

    def __init__(self, sampler: TaskSampler, resume_from: str | os.PathLike[str] | None = None) -> None:
        if not isinstance(sampler, TaskSampler):
            raise InvalidArgumentType(
                f"TaskSamplerCallback: sampler must be a gem_core.curriculum.TaskSampler, got {type(sampler).__name__}; "
                "pass the sampler given to GemRolloutFunc(task_sampler=...)."
            )
        if not isinstance(resume_from, (str, os.PathLike, type(None))):
            raise InvalidArgumentType(
                f"TaskSamplerCallback: resume_from must be a checkpoint folder (a str or path), or None, got "
                f"{type(resume_from).__name__} {resume_from!r:.60}; None restores from the checkpoint training resumes from."
            )
        self.sampler = sampler
        self.resume_from = resume_from

    def on_save(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        """Write the sampler's state into the checkpoint folder just saved (on the main process only)."""
        if state.is_world_process_zero:  # every process holds the same sampler; one writes it
            save_sampler_state(self.sampler, os.path.join(args.output_dir, f"{PREFIX_CHECKPOINT_DIR}-{state.global_step}"))

    def on_train_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        """Restore the sampler from the checkpoint training resumes from (nothing on a fresh run).

        A missing state file is a warning, not an error: the sampler then starts afresh.

        Raises:
            InvalidArgument: The folder's ``trainer_state.json`` is of another step than the one training resumed
                at (the curriculum would resume behind or ahead of the model).
            TaskError: The checkpoint holds another sampler's state (other tasks).
            SamplerStateError: (a TaskError) The checkpoint's state file is not JSON or is damaged.
        """
        if not state.global_step:  # a fresh run: nothing to restore
            return
        resumed = os.path.join(args.output_dir, f"{PREFIX_CHECKPOINT_DIR}-{state.global_step}")
        folder = self.resume_from
        if folder is None and not os.path.isdir(resumed) and isinstance(getattr(args, "resume_from_checkpoint", None), str):
            folder = args.resume_from_checkpoint
        if folder is None:
            folder = resumed
        _check_step(folder, state.global_step)
        if not load_sampler_state(self.sampler, folder):
            warnings.warn(
                f"Training resumes at step {state.global_step} but {os.path.join(folder, SAMPLER_STATE_FILE)} does not exist, "
                "so the task sampler starts afresh; if the checkpoint is elsewhere, pass TaskSamplerCallback(sampler, "
                "resume_from=<checkpoint folder>).",
                stacklevel=2,
            )


def _check_step(folder: str | os.PathLike[str], global_step: int) -> None:
    """Refuse a checkpoint folder of another step than the resumed one (no ``trainer_state.json``: nothing to check)."""
    try:
        with open(os.path.join(folder, TRAINER_STATE_NAME), encoding="utf-8") as handle:
            saved = json.load(handle).get("global_step")
    except (OSError, ValueError, AttributeError):  # no readable trainer state: the sampler's own checks still apply
        return
    if isinstance(saved, int) and saved != global_step:
        raise InvalidArgument(
            f"TaskSamplerCallback: training resumed at step {global_step}, but the checkpoint it would restore the task sampler "
            f"from, {os.fspath(folder)}, is of step {saved} (its {TRAINER_STATE_NAME}); pass TaskSamplerCallback(sampler, "
            f"resume_from=<the checkpoint folder of step {global_step}>), or clear a stale TrainingArguments.resume_from_checkpoint."
        )
