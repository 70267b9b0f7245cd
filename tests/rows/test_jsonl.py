"""``write_jsonl``, the file OpenRLHF and RL2 read their prompts from: whole or not written."""

from __future__ import annotations

import errno
import json
from pathlib import Path

import pytest

from gem_core.errors import InvalidArgument
from gem_core.rows import write_jsonl


def test_rows_are_json_lines_and_the_count_is_returned(tmp_path):
    out = tmp_path / "a" / "train.jsonl"
    assert write_jsonl([{"label": "x"}, {"label": "y"}], out) == 2
    assert [json.loads(line) for line in out.read_text().splitlines()] == [{"label": "x"}, {"label": "y"}]


def test_a_disk_that_fills_midway_keeps_the_previous_dataset_whole(tmp_path, monkeypatch):
    out = tmp_path / "train.jsonl"
    write_jsonl([{"label": "old"}], out)
    real_write_text = Path.write_text

    def half_then_full(self, text, *args, **kwargs):
        real_write_text(self, text[: len(text) // 2], *args, **kwargs)
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(Path, "write_text", half_then_full)
    with pytest.raises(OSError, match="No space left"):
        write_jsonl([{"label": "new"}] * 10, out)
    monkeypatch.undo()
    assert out.read_text() == '{"label": "old"}\n' and list(tmp_path.iterdir()) == [out]


@pytest.mark.parametrize("bad", [object(), float("nan"), float("inf")])
def test_a_row_that_is_not_json_writes_nothing_and_is_named(tmp_path, bad):
    """NaN and Infinity were written as bare words, which are not JSON (Arrow and datasets refuse the file); an object
    raised the json module's TypeError, naming no row."""
    out = tmp_path / "train.jsonl"
    with pytest.raises(InvalidArgument, match=r"row 2 .*not JSON"):
        write_jsonl([{"ok": 1}, {"bad": bad}], out)
    assert list(tmp_path.iterdir()) == []
