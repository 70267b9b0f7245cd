"""The JSON episode label every adapter's dataset carries (env id, seed, env kwargs)."""

from __future__ import annotations

import pytest

from gem_core.rows.label import EpisodeLabel, LabelError, parse_label


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
