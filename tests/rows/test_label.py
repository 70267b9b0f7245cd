"""The JSON episode label every adapter's dataset carries (env id, seed, env kwargs)."""

from __future__ import annotations

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
