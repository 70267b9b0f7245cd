"""The JSON episode label every adapter's dataset carries (env id, seed, env kwargs)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from gem_core.rows.label import EpisodeLabel, LabelError, parse_label
from gem_core.rows.rows import MAX_SEED


def test_label_round_trips_through_json():
    label = EpisodeLabel("game:Wordle-v0", 7, {"max_turns": 3})
    assert parse_label(label.to_json()) == label
    assert parse_label({"env_id": "game:Wordle-v0", "seed": 7, "env_kwargs": {"max_turns": 3}}) == label


@pytest.mark.parametrize(
    "label, message",
    [
        ("not json", "is not JSON"),
        ("[1, 2]", "must be a JSON object"),
        ('{"seed": 1}', "'env_id'"),
        ('{"env_id": "game:GuessTheNumber-v0", "seed": "1"}', "seed must be an integer"),
        ('{"env_id": "game:GuessTheNumber-v0", "seed": true}', "seed must be an integer"),
        ('{"env_id": "game:GuessTheNumber-v0", "seed": 1, "env_kwargs": [1]}', "env_kwargs must be a JSON object"),
        ('{"env_id": "game:Wordel-v0", "seed": 1}', "Did you mean 'game:Wordle-v0'"),
    ],
)
def test_malformed_labels_say_what_is_wrong(label, message):
    with pytest.raises(LabelError, match=message):
        parse_label(label)


def test_the_adapters_fix_ends_the_message():
    with pytest.raises(LabelError, match="run make_dataset_xyz"):
        parse_label('{"seed": 1}', fix_hint="run make_dataset_xyz")


GUESS = "game:GuessTheNumber-v0"


@pytest.mark.parametrize(
    "label, message",
    [
        ({"env_id": GUESS, "seed": -1}, r"seed must be an integer from 0 to 9223372036854775807 .*, got -1\."),
        ({"env_id": GUESS, "seed": 2**63}, "seed must be an integer from 0 to"),
        ({"env_id": GUESS, "seed": 10**5000}, "got a value holding a number over 4300 digits"),
        (f'{{"env_id": "{GUESS}", "seed": {"1" * 5000}}}', "is not JSON .*4300 digits"),
        ("[" * 100_000, "is not JSON .*nested too deeply"),
        ({"env_id": GUESS, "seed": 1, "env_kwargs": '{"n": ' + "1" * 5000 + "}"}, "env_kwargs .* is not JSON .*4300 digits"),
        ({"env_id": GUESS, "seed": 1, "env_kwargs": "[" * 100_000}, "env_kwargs .* is not JSON .*nested too deeply"),
        ({"env_id": 5, "seed": 0}, "env_id must be a registered env id such as 'game:Wordle-v0', got 5"),
        ({"env_id": ["x"], "seed": 0}, "env_id must be a registered env id"),
    ],
    ids=["negative seed", "seed past 64 bits", "5000-digit int seed", "5000-digit seed", "deep label", "5000-digit env_kwargs", "deep env_kwargs",
         "int env_id", "list env_id"],
)
def test_a_label_that_no_env_could_play_is_a_label_error_with_the_fix(label, message):
    """Such a label otherwise fails later, as gymnasium's seed error at reset or a bare ValueError or RecursionError."""
    with pytest.raises(LabelError, match=message) as caught:
        parse_label(label, fix_hint="run make_dataset_xyz")
    assert str(caught.value).endswith("run make_dataset_xyz")


def test_the_seed_range_ends_at_the_64_bit_dataset_column():
    assert parse_label({"env_id": GUESS, "seed": MAX_SEED}).seed == MAX_SEED == 2**63 - 1
    assert parse_label({"env_id": GUESS, "seed": 0}).seed == 0


@pytest.mark.parametrize(
    "extra, unknown, closest",
    [
        ({"env_kwarg": {"max_turns": 1}}, "env_kwarg", "env_kwargs"),
        ({"kwargs": {"max_turns": 1}}, "kwargs", "env_kwargs"),
        ({"Seed": 5}, "Seed", "seed"),
        ({"ENV_ID": GUESS}, "ENV_ID", "env_id"),
    ],
)
@pytest.mark.parametrize("as_text", [False, True], ids=["mapping", "json text"])
def test_a_misspelt_label_key_is_refused_naming_the_closest_key(extra, unknown, closest, as_text):
    """Dropped silently, the key's value is lost: the episode plays with the env's default kwargs or another seed."""
    label = {"env_id": GUESS, "seed": 1, **extra}
    with pytest.raises(LabelError, match=rf"unknown key '{unknown}' \(did you mean '{closest}'\?\)") as caught:
        parse_label(json.dumps(label) if as_text else label, fix_hint="run make_dataset_xyz")
    assert str(caught.value).endswith("run make_dataset_xyz")


def test_a_misspelt_seed_key_is_named_rather_than_reported_missing():
    with pytest.raises(LabelError, match=r"unknown key 'Seed' \(did you mean 'seed'\?\)"):
        parse_label({"env_id": GUESS, "Seed": 1})


def test_an_unknown_label_key_with_no_close_one_lists_the_keys_a_label_holds():
    with pytest.raises(LabelError, match=r"unknown keys 'level', 'zzz': a label holds 'env_id', 'seed' and optionally 'env_kwargs'"):
        parse_label({"env_id": GUESS, "seed": 1, "zzz": 1, "level": 2})


def test_a_label_with_many_unknown_keys_names_five_and_counts_the_rest():
    label = {"env_id": GUESS, "seed": 1, **{f"x{i:04}": i for i in range(1000)}}
    with pytest.raises(LabelError, match=r"unknown keys 'x0000', 'x0001', 'x0002', 'x0003', 'x0004', 995 more: ") as caught:
        parse_label(label)
    assert len(str(caught.value)) < 1000


def test_keys_a_dataset_row_carries_beside_the_label_stay_legal():
    """verl's extra_info holds the row's index, and parquet stores extra_info as a struct of every row's keys, so in a
    dataset mixing GEM rows with another agent loop's rows a GEM row reads the other rows' keys as None."""
    row = {"env_id": GUESS, "seed": 1, "env_kwargs": '{"max_turns": 2}', "index": 4, "split": None, "answer": None}
    assert parse_label(row) == EpisodeLabel(GUESS, 1, {"max_turns": 2})
    assert parse_label({"env_id": GUESS, "seed": 1, "env_kwargs": None}).env_kwargs == {}


@pytest.mark.parametrize(
    "env_kwargs, message",
    [
        ([], r"env_kwargs must be a JSON object .*, got \[\]\."),
        ([1], r"env_kwargs must be a JSON object .*, got \[1\]\."),
        (0, r"env_kwargs must be a JSON object .*, got 0\."),
        (False, r"env_kwargs must be a JSON object .*, got False\."),
        (1.5, r"env_kwargs must be a JSON object .*, got 1\.5\."),
        ("[]", r"env_kwargs must be a JSON object .*, got \[\]\."),
        ("null", r"env_kwargs must be a JSON object .*, got None\."),
        ("", r"env_kwargs '' is not JSON"),
    ],
    ids=["empty list", "list", "zero", "false", "float", "list text", "null text", "empty text"],
)
def test_env_kwargs_that_are_not_an_object_are_refused_however_falsy(env_kwargs, message):
    """An empty list, 0, false or "" once passed as {} while [1] was refused: the row asked for something else."""
    with pytest.raises(LabelError, match=message) as caught:
        parse_label({"env_id": GUESS, "seed": 1, "env_kwargs": env_kwargs}, fix_hint="run make_dataset_xyz")
    assert str(caught.value).endswith("run make_dataset_xyz")


@pytest.mark.parametrize("seed", [np.int64(3), np.int32(3), np.uint32(3), np.uint8(3)], ids=repr)
def test_a_numpy_integer_seed_is_read_as_a_python_int(seed):
    """What numpy or pandas code that builds rows hands over; the label's JSON needs a Python int."""
    label = parse_label({"env_id": GUESS, "seed": seed})
    assert label.seed == 3 and type(label.seed) is int
    assert json.loads(label.to_json())["seed"] == 3


@pytest.mark.parametrize("seed", [np.int64(-1), np.uint64(2**63), np.bool_(True), np.float32(3.5)], ids=repr)
def test_a_numpy_seed_outside_the_range_or_not_an_integer_is_refused(seed):
    with pytest.raises(LabelError, match="seed must be an integer from 0 to"):
        parse_label({"env_id": GUESS, "seed": seed})


def test_a_label_shared_with_the_framework_passes_over_the_rows_own_keys_but_not_a_near_miss():
    """verl's extra_info is the label and the row's own dict (verl's datasets keep split, question, answer there):
    with other_keys those keys are passed over, while a misspelt GEM key is still refused; a label of GEM's own is strict."""
    row = {"env_id": "game:GuessTheNumber-v0", "seed": 3, "split": "train", "question": "q?", "answer": "42"}
    assert parse_label(row, other_keys=True).seed == 3
    with pytest.raises(LabelError, match="'split'"):
        parse_label(row)
    with pytest.raises(LabelError, match=r"'Seed' \(did you mean 'seed'\?\)"):
        parse_label({**row, "Seed": 4}, other_keys=True)
    with pytest.raises(LabelError, match=r"'env_kwarg' \(did you mean 'env_kwargs'\?\)"):
        parse_label({**row, "env_kwarg": {"max_turns": 1}}, other_keys=True)
