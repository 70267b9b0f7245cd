"""A trajectory line of millions of small JSON containers is refused before it is parsed.

An 8 MiB line of ``[]`` items parsed into 2.8 million lists: 189 MiB of memory (about 3 GiB at the reader's
128 MiB line limit), from a file that is hostile or corrupt. The limit counts containers, so brackets inside
texts (code, JSON shown to a model, ``\\boxed{}``) cost nothing and are never refused.
"""

from __future__ import annotations

import json
import re

import pytest

from gem_core.errors import MalformedFile
from gem_core.rollout.trajectory_io import TRAJECTORY_FORMAT, read_records, read_trajectories

#: Past the reader's container limit (a million per line): the test file stays a few megabytes.
MANY = 1_100_000


def _record(**fields):
    record = {"format": TRAJECTORY_FORMAT, "env_kwargs": {}, "prompt_ids": [1], "response_ids": [2], "loss_mask": [1], "logprobs": [0.0],
              "turn_spans": [[0, 1]], "rewards": [1.0], "terminated": True, "truncated": False, "env_id": "game:GuessTheNumber-v0",
              "seed": 0, "observations": ["start"], "actions": ["a"]}
    return {**record, **fields}


@pytest.mark.parametrize("item", ["[]", "{}"], ids=["lists", "objects"])
def test_a_line_of_millions_of_empty_containers_is_refused_naming_its_line_and_the_limit(tmp_path, item):
    path = tmp_path / "episodes.jsonl"
    path.write_text(json.dumps(_record()) + "\n" + '{"prompt_ids": [' + ",".join([item] * MANY) + "]}\n")
    pattern = re.escape(f"{path}:2") + r".*\b1000000\b"
    with pytest.raises(MalformedFile, match=pattern):
        list(read_records(path))
    with pytest.raises(MalformedFile, match=pattern):
        read_trajectories(path)


def test_a_smaller_container_limit_can_be_asked_of_read_records(tmp_path):
    path = tmp_path / "episodes.jsonl"
    path.write_text('{"a": [[], [], [], [], [], [], []]}\n')  # 8 containers in 35 bytes: denser than one per 6 bytes
    assert len(list(read_records(path, max_containers=20))) == 1
    with pytest.raises(MalformedFile, match=re.escape(f"{path}:1") + r".*\b5\b"):
        list(read_records(path, max_containers=5))


def test_a_record_the_writer_wrote_reads_back_however_many_arrays_its_infos_hold(tmp_path):
    """An env's info holding a 2-D numpy array per turn is written as nested lists, one per row: 1.1 million of
    them at 8 bytes each were refused by the count alone, so the library wrote a file it could not read back.
    Only lines denser than one container per 6 bytes (``[]`` items: 3) weigh more parsed than texts do."""
    from gem_core.rollout.trajectory_io import trajectory_from_record, write_trajectories

    rows = [[0, 0]] * MANY
    path = tmp_path / "episodes.jsonl"
    write_trajectories(path, [trajectory_from_record(_record(infos=[{"topk": rows}]))])
    (trajectory,) = read_trajectories(path)
    assert trajectory.infos[0]["topk"] == rows


def test_a_line_that_is_not_utf8_is_refused_naming_its_line(tmp_path):
    """``json.loads`` of bytes also reads UTF-16, where a character such as U+0122 holds a quote byte that flipped
    the count's in-or-out-of-text parity: 3 million arrays were taken as text and parsed (228 MiB). The writer writes
    UTF-8 only."""
    path = tmp_path / "episodes.jsonl"
    path.write_bytes(('{"a": "\u0122", "b": [' + ",".join(["[]"] * MANY) + "]}").encode("utf-16-le"))
    with pytest.raises(MalformedFile, match=re.escape(f"{path}:1")):  # read as UTF-8 (its NULs are): not JSON
        list(read_records(path))
    path.write_bytes(json.dumps(_record()).encode("utf-16"))
    with pytest.raises(MalformedFile, match=re.escape(f"{path}:1") + ".*UTF-8"):
        read_trajectories(path)


def test_brackets_inside_texts_are_not_containers(tmp_path):
    """Escaped quotes and backslashes inside a text must not end it early: the brackets after them are text too."""
    observation = 'code: "\\"' + "[{" * MANY + '\\\\"' + "]}" * 10
    path = tmp_path / "episodes.jsonl"
    path.write_text(json.dumps(_record(observations=[observation], actions=["\\boxed{" * 10 + '"]'])) + "\n")
    (trajectory,) = read_trajectories(path)
    assert trajectory.observations == [observation]


def test_a_line_that_opens_a_text_and_never_closes_it_is_refused(tmp_path):
    """Millions of escaped quotes after an unclosed one: a naive string pattern backtracks quadratically here."""
    path = tmp_path / "episodes.jsonl"
    path.write_text("[" * MANY + '"' + '\\"' * MANY + "\n")
    with pytest.raises(MalformedFile, match=re.escape(f"{path}:1")):
        list(read_records(path))


def test_a_text_that_ends_in_an_escaped_backslash_ends_there(tmp_path):
    """``"x\\\\"`` is the text ``x\\``: its quote closes it, so the arrays after it count (taken as an escaped quote,
    the text would run on and hide them)."""
    path = tmp_path / "episodes.jsonl"
    path.write_text(json.dumps({"a": "x\\", "b": [[]] * 6}) + "\n")
    with pytest.raises(MalformedFile, match=re.escape(f"{path}:1 holds 8 JSON arrays and objects")):
        list(read_records(path, max_containers=5))
