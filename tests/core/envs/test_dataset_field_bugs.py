"""Local data files given to a dataset env: a ``{split: files}`` mapping without the asked split used to serve
another split's rows, and a file ``datasets`` cannot read raised its raw StopIteration / DatasetGenerationError."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("datasets")

import gem_core
from gem_core.envs.dataset import DatasetUnavailableError, clear_cache
from gem_core.errors import InvalidArgument

ROW = '{"problem": "1+1?", "answer": "2"}\n'


@pytest.fixture(autouse=True)
def _fresh_cache():
    clear_cache()
    yield
    clear_cache()


def test_a_split_mapping_without_the_asked_split_is_refused(tmp_path: Path) -> None:
    """Before the fix, data_files={"train": file} with split="test" silently served the train rows (an eval run on
    training data): the one-split fallback meant for a plain file list also applied to an explicit mapping."""
    path = tmp_path / "train.jsonl"
    path.write_text(ROW)
    with pytest.raises(InvalidArgument, match="'test'.*'train'"):
        gem_core.make("math:Sample", data_files={"train": str(path)}, split="test")


def test_a_split_mapping_with_the_asked_split_and_a_plain_file_with_any_split_still_load(tmp_path: Path) -> None:
    """The fallback stays for a plain file (all its rows are one split, whatever ``split`` says)."""
    path = tmp_path / "rows.jsonl"
    path.write_text(ROW)
    env = gem_core.make("math:Sample", data_files={"test": str(path)}, split="test")
    assert len(env.unwrapped.rows) == 1
    env = gem_core.make("math:Sample", data_files=str(path), split="test")
    assert len(env.unwrapped.rows) == 1


def test_an_empty_data_file_is_a_gem_error_naming_the_file(tmp_path: Path) -> None:
    """Before the fix, gem_core.make raised datasets' raw StopIteration, with no message at all."""
    path = tmp_path / "empty.jsonl"
    path.write_text("")
    with pytest.raises(DatasetUnavailableError, match="empty.jsonl.*empty file has no rows"):
        gem_core.make("math:Sample", data_files=str(path))


def test_an_invalid_jsonl_line_is_a_gem_error_naming_the_file(tmp_path: Path) -> None:
    """Before the fix, gem_core.make raised datasets' raw DatasetGenerationError ("An error occurred while generating
    the dataset"), naming neither the file nor the fix."""
    path = tmp_path / "bad.jsonl"
    path.write_text(ROW + "{not json\n")
    with pytest.raises(DatasetUnavailableError, match="bad.jsonl"):
        gem_core.make("math:Sample", data_files=str(path))
