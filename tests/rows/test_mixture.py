"""Weighted env mixtures (gem_core.rows.mixture, episode_rows with {env_id: weight}): a seeded, interleaved
stream of tasks whose proportions match the weights, and bad weights that name the key and the fix."""

from __future__ import annotations

import math
from collections import Counter

import pytest

from gem_core.registry import UnknownEnvError
from gem_core.rows import EpisodeLabel, LabelError, MixtureError, episode_rows, parse_env_options
from gem_core.rows.mixture import env_weights, parse_env_option

GUESS, WORDLE, HANGMAN = "game:GuessTheNumber-v0", "game:Wordle-v0", "game:Hangman-v0"


def test_a_weighted_mixture_has_the_requested_proportions_within_sampling_error():
    weights = {GUESS: 5, WORDLE: 3, HANGMAN: 2}
    n = 20_000
    counts = Counter(row.label.env_id for row in episode_rows(weights, n, with_messages=False))
    assert sum(counts.values()) == n
    for env_id, weight in weights.items():
        p = weight / sum(weights.values())
        # A binomial count lies within 4 standard deviations of n*p but for a 6e-5 chance.
        assert abs(counts[env_id] - n * p) <= 4 * math.sqrt(n * p * (1 - p)), (env_id, counts)


def test_a_mixture_is_an_interleaved_stream_not_blocks_and_is_the_same_for_the_same_seed_start():
    weights = {GUESS: 1, WORDLE: 1}
    first = [r.label for r in episode_rows(weights, 200, seed_start=7, with_messages=False)]
    again = [r.label for r in episode_rows(weights, 200, seed_start=7, with_messages=False)]
    other = [r.label for r in episode_rows(weights, 200, seed_start=8, with_messages=False)]
    assert first == again
    assert [label.env_id for label in first] != [label.env_id for label in other]
    ids = [label.env_id for label in first]
    switches = sum(a != b for a, b in zip(ids, ids[1:]))
    assert switches > 50  # blocks would switch once; independent fair draws switch ~100 times in 200
    assert any(env_id == WORDLE for env_id in ids[:20]) and any(env_id == GUESS for env_id in ids[:20])


def test_weights_whose_sum_overflows_draw_like_the_same_ratio_in_small_numbers():
    """Each weight is finite, so each passes; only their sum is inf. Weights are relative: 1e308 and 1e308 are 1 and 1."""
    huge = [r.label for r in episode_rows(parse_env_options([f"{GUESS}:1e308", f"{HANGMAN}:1e308"]), 200, with_messages=False)]
    assert huge == [r.label for r in episode_rows({GUESS: 1, HANGMAN: 1}, 200, with_messages=False)]
    skewed = Counter(r.label.env_id for r in episode_rows({GUESS: 1.5e308, WORDLE: 1.5e308, HANGMAN: 1e306}, 2000, with_messages=False))
    assert skewed[HANGMAN] < 40 < min(skewed[GUESS], skewed[WORDLE])  # about 7 in 2000


def test_each_env_ids_seeds_count_up_from_seed_start_within_the_rows_range():
    rows = list(episode_rows({GUESS: 2, WORDLE: 1}, 50, seed_start=1000, with_messages=False))
    assert [row.index for row in rows] == list(range(50))
    for env_id in (GUESS, WORDLE):
        seeds = [row.label.seed for row in rows if row.label.env_id == env_id]
        assert seeds == list(range(1000, 1000 + len(seeds)))
    assert all(1000 <= row.label.seed < 1050 for row in rows)


def test_mixture_rows_carry_each_env_ids_first_observation_and_the_env_kwargs():
    rows = list(episode_rows({GUESS: 1, "game:GuessTheNumber-v0-easy": 1}, 6, env_kwargs={"max_turns": 2}, system_prompt="hi"))
    import gem_core

    for row in rows:
        env = gem_core.make(row.label.env_id, max_turns=2)
        observation, _ = env.reset(seed=row.label.seed)
        assert row.messages == [{"role": "system", "content": "hi"}, {"role": "user", "content": observation}]
        assert row.label == EpisodeLabel(row.label.env_id, row.label.seed, {"max_turns": 2})


def test_a_plain_list_keeps_its_blocks_of_n_rows_per_id():
    rows = list(episode_rows([GUESS, WORDLE], 3, with_messages=False))
    assert [(r.label.env_id, r.label.seed) for r in rows] == [(GUESS, 0), (GUESS, 1), (GUESS, 2), (WORDLE, 0), (WORDLE, 1), (WORDLE, 2)]


@pytest.mark.parametrize(
    ("weights", "message"),
    [
        ({GUESS: 1, WORDLE: -1}, f"weight of '{WORDLE}' is -1: weights must be finite numbers above zero"),
        ({GUESS: 0}, f"weight of '{GUESS}' is 0"),
        ({GUESS: "two"}, f"weight of '{GUESS}' is 'two', not a number"),
        ({GUESS: True}, "not a number"),
        ({GUESS: float("nan")}, "finite numbers above zero"),
        ({GUESS: float("inf")}, "finite numbers above zero"),
        ({}, "mixture is empty"),
        ({3: 1.0}, "Mixture key 3 is not an env id"),
    ],
)
def test_a_bad_weight_fails_before_any_row_naming_the_key_and_the_fix(weights, message):
    with pytest.raises(MixtureError, match=message.replace("(", r"\(")) as caught:
        next(episode_rows(weights, 3, with_messages=False))
    assert isinstance(caught.value, ValueError)


def test_an_unknown_id_in_a_mixture_fails_as_a_label_error_naming_the_closest_id():
    with pytest.raises(LabelError, match="Did you mean 'game:Wordle-v0'"):
        next(episode_rows({GUESS: 1, "game:Wordel-v0": 2}, 3, with_messages=False))
    with pytest.raises(UnknownEnvError):
        env_weights({"game:Wordel-v0": 1})


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (GUESS, (GUESS, None)),
        (f"{GUESS}:2.5", (GUESS, 2.5)),
        (f"{WORDLE}:1", (WORDLE, 1.0)),
        (f"remote:http://127.0.0.1:8000/{WORDLE}:3", (f"remote:http://127.0.0.1:8000/{WORDLE}", 3.0)),
        (f"remote:http://127.0.0.1:8000/{WORDLE}", (f"remote:http://127.0.0.1:8000/{WORDLE}", None)),
    ],
)
def test_the_env_option_reads_a_weight_only_after_the_last_colon(text, expected):
    assert parse_env_option(text) == expected


@pytest.mark.parametrize(
    ("text", "error", "message"),
    [
        (f"{GUESS}:0", MixtureError, f"--env {GUESS}:0: Mixture weight of '{GUESS}' is 0.0"),
        (f"{GUESS}:-2", MixtureError, "finite numbers above zero"),
        (f"{GUESS}:lots", MixtureError, f"the weight 'lots' of '{GUESS}' is not a number; write --env {GUESS}:2"),
        ("game:Wordel-v0:2", UnknownEnvError, "Did you mean 'game:Wordle-v0'"),
        ("  ", MixtureError, "--env is empty"),
    ],
)
def test_a_bad_env_option_names_the_option_and_the_fix(text, error, message):
    with pytest.raises(error, match=message):
        parse_env_option(text)


def test_bare_env_options_keep_todays_list_and_any_weight_makes_a_mixture_where_bare_weighs_one():
    assert parse_env_options([GUESS]) == GUESS
    assert parse_env_options([GUESS, WORDLE]) == [GUESS, WORDLE]
    assert parse_env_options([f"{GUESS}:3", WORDLE]) == {GUESS: 3.0, WORDLE: 1.0}
    with pytest.raises(MixtureError, match="given twice"):
        parse_env_options([f"{GUESS}:3", GUESS])
    with pytest.raises(MixtureError, match="at least one --env"):
        parse_env_options([])


@pytest.mark.parametrize(("values", "message"), [
    ("game:GuessTheNumber-v0", r"a list of --env values.*got one str"),
    ([None], r"--env value 1 is None, not text"),
    (["game:GuessTheNumber-v0", 3], r"--env value 2 is 3, not text"),
])
def test_env_options_that_are_not_a_list_of_texts_are_refused_naming_the_value(values, message):
    """A string for the list iterated its characters ("No env registered as 'g'"); a None entry raised AttributeError."""
    with pytest.raises(MixtureError, match=message):
        parse_env_options(values)
