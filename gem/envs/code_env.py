"""``gem.envs.code_env:CodeEnv``: GEM's programming-problem entry point, taking GEM's argument names for
the core's :class:`gem_core.envs.code.env.CodeEnv` (programs run in the core's sandbox).

``dataset=`` (an in-memory ``datasets.Dataset`` or ``DatasetDict``, as GEM's tests pass) is written once
to a private JSONL file that the core reads like any local copy: the core loads rows from files or the
hub, and a file keeps the rows shareable with worker processes.
"""

from __future__ import annotations

import atexit
import shutil
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from gem_core.envs.code.env import CodeEnv as CoreCodeEnv
from gem_core.errors import GemError, InvalidArgument, InvalidArgumentType

__all__ = ["CodeEnv"]

_SANDBOX_TYPES = {"none": None, "bwrap": "bwrap"}
_files: dict[str, str] = {}
_folder: list[str] = []


class DatasetSplitError(GemError, ValueError):
    """Raised when ``dataset=`` is a ``DatasetDict`` with several splits and ``split`` names none of them."""


def _local_copy(dataset: Any, split: str | None) -> str:
    """A JSONL file holding ``dataset``'s rows (one per dataset fingerprint, deleted at exit); a list of rows
    (dicts) is read as ``datasets.Dataset.from_list(rows)``, the shape a user has before making a Dataset.

    Raises:
        InvalidArgumentType: ``dataset`` is not a ``datasets.Dataset``/``DatasetDict`` or a list of dict rows.
        DatasetSplitError: ``dataset`` has several splits and ``split`` names none of them.
    """
    from datasets import Dataset, DatasetDict

    if isinstance(dataset, (list, tuple)) and dataset and all(isinstance(row, Mapping) for row in dataset):
        dataset = Dataset.from_list([dict(row) for row in dataset])
    elif not isinstance(dataset, (Dataset, DatasetDict)):
        raise InvalidArgumentType(
            f"dataset={dataset!r:.60} is not rows: pass a datasets.Dataset or DatasetDict, a non-empty list of dict "
            "rows (read as datasets.Dataset.from_list(rows)), or data_files='rows.jsonl'."
        )
    if isinstance(dataset, DatasetDict):
        splits = list(dataset.keys())
        if split in splits:
            dataset = dataset[split]
        elif len(splits) == 1:
            dataset = dataset[splits[0]]
        else:
            raise DatasetSplitError(f"CodeEnv(dataset=...) has splits {splits}; pass split= naming one of them.")
    key = getattr(dataset, "_fingerprint", None) or str(id(dataset))
    if key not in _files:
        if not _folder:
            _folder.append(tempfile.mkdtemp(prefix="gem-code-dataset-"))
            atexit.register(shutil.rmtree, _folder[0], True)
        path = str(Path(_folder[0]) / f"{len(_files)}.jsonl")
        dataset.to_json(path, lines=True)
        _files[key] = path
    return _files[key]


class CodeEnv(CoreCodeEnv):
    """Problems from ``dataset_name`` (a hub id; or ``data_files=`` for a local copy; or ``dataset=`` rows in
    memory) with their tests in ``test_key``. ``max_workers`` and ``verbose`` are accepted and unused (the
    core's sandbox pool sizes itself); other keyword arguments are the core env's (``timeout``, ...).

    Args:
        dataset_name: The hub dataset (empty: none, with ``data_files=`` or ``dataset=``).
        split: The split to read; with a several-split ``dataset=``, the one to take.
        dataset: Rows in memory (a ``datasets.Dataset``, ``DatasetDict`` or list of dict rows), used instead of ``dataset_name``.
        question_key: The column holding the problem statement.
        test_key: The column holding the problem's tests.
        max_workers: Accepted for GEM's signature; unused.
        verbose: Accepted for GEM's signature; unused.
        sandbox_type: ``"none"`` (the core's default sandbox mode: ``$GEM_SANDBOX``, else bwrap) or ``"bwrap"``.

    Raises:
        InvalidArgument: ``sandbox_type`` is not ``"none"`` or ``"bwrap"``.
        DatasetSplitError: ``dataset`` has several splits and ``split`` names none of them.
        InvalidArgumentType: ``dataset`` is not a ``Dataset``/``DatasetDict`` or a list of dict rows.
    """

    def __init__(
        self,
        dataset_name: str | None = "",
        split: str | None = "train",
        dataset: Any = None,
        question_key: str = "problem",
        test_key: str = "tests",
        max_workers: int | None = None,
        verbose: bool = False,
        sandbox_type: str = "none",
        **kwargs: Any,
    ):
        if sandbox_type not in _SANDBOX_TYPES:
            raise InvalidArgument(f"CodeEnv(sandbox_type={sandbox_type!r}): expected one of {sorted(_SANDBOX_TYPES)}.")
        if _SANDBOX_TYPES[sandbox_type]:
            kwargs.setdefault("sandbox_mode", _SANDBOX_TYPES[sandbox_type])
        if dataset is not None:
            kwargs["data_files"] = _local_copy(dataset, split)
        super().__init__(dataset_name or None, split=split or "train", question_field=question_key, tests_field=test_key, **kwargs)
