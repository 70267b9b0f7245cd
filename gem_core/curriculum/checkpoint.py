"""A sampler's state as a file in a trainer's checkpoint folder, named the same for every framework.

Trainers save checkpoints as folders (TRL/transformers ``checkpoint-<step>``, verl ``global_step_<n>``,
OpenRLHF ``global_step<n>``); the sampler's state goes in as ``gem_task_sampler.json`` beside the model,
so a resumed run continues its curriculum instead of starting it over.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from gem_core.curriculum.sampler import SamplerStateError, TaskSampler, _not_a_state
from gem_core.rows.label import _not_json
from gem_core.transport.atomic_file import atomic_path
from gem_core.transport.json_depth import nests_deeper_than

__all__ = ["SAMPLER_STATE_FILE", "load_sampler_state", "save_sampler_state"]

SAMPLER_STATE_FILE = "gem_task_sampler.json"
"""The file in a checkpoint folder that :func:`save_sampler_state` writes and :func:`load_sampler_state` reads."""
#: The deepest nesting a state file may hold (a sampler's own state is 5 deep); checked before ``json.loads``
#: recurses, so a file of nested brackets is a damaged state, not a RecursionError.
MAX_STATE_DEPTH = 32


def save_sampler_state(sampler: TaskSampler, folder: str | os.PathLike[str]) -> Path:
    """Write ``sampler.state_dict()`` to ``folder/gem_task_sampler.json`` (whole or not at all); returns the path."""
    path = Path(folder) / SAMPLER_STATE_FILE
    text = json.dumps(sampler.state_dict(), indent=1, allow_nan=False)  # NaN/Infinity are no JSON another reader takes
    with atomic_path(path) as partial:  # a run killed mid-save leaves the previous file, never half of one
        partial.write_text(text, encoding="utf-8")
    return path


def load_sampler_state(sampler: TaskSampler, folder: str | os.PathLike[str]) -> bool:
    """Restore ``sampler`` from ``folder/gem_task_sampler.json``; False (sampler untouched) when there is none.
    The saved seed replaces the constructor's (see :meth:`TaskSampler.load_state_dict`).

    Raises:
        gem_core.curriculum.task.TaskError: the file holds another sampler's state (other tasks).
        SamplerStateError: (a TaskError, a ValueError) the file is not UTF-8 JSON, holds no sampler state (another
            format), is damaged (the message names the entry), or is a folder or no regular file; the sampler is left
            untouched and the message names the file.
    """
    path = Path(folder) / SAMPLER_STATE_FILE
    if not path.exists():
        return False
    if not path.is_file():  # a folder by that name is no state: starting the curriculum over would hide the mistake
        what = "a folder" if path.is_dir() else "not a regular file (a FIFO, socket or device)"
        raise SamplerStateError(f"{path} is {what}, not the sampler's state file: remove it (or give another folder) to start "
                                "the curriculum afresh.")
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as error:
        raise SamplerStateError(f"{path} is not UTF-8 JSON ({error}); {_AFRESH}") from None
    if nests_deeper_than(text, MAX_STATE_DEPTH):
        raise SamplerStateError(f"{path} nests deeper than {MAX_STATE_DEPTH} levels, which no sampler state does; {_AFRESH}")
    try:
        state = json.loads(text)
    except ValueError as error:  # a JSONDecodeError, or a plain ValueError for an int past Python's 4300 digits
        raise SamplerStateError(f"{path} is not JSON Python reads ({_not_json(error)}); {_AFRESH}") from None
    problem = _not_a_state(state)
    if problem:  # the fix is the file's, not "pass what state_dict() returned"
        raise SamplerStateError(f"{path}: {problem}. Restore it from a backup, or {_AFRESH}")
    try:
        sampler.load_state_dict(state)
    except SamplerStateError as error:
        raise SamplerStateError(f"{path}: {error} Restore it from a backup, or {_AFRESH}") from None
    return True


_AFRESH = "delete it to start the curriculum afresh."
