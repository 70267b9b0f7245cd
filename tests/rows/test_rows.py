"""gem_core.rows: dataset rows (one episode each) and sessions started from a row's label, the pieces every adapter shares."""

from __future__ import annotations

import pytest

import gem_core
from gem_core.rows import EpisodeLabel, LabelError, episode_rows
from gem_core.rollout.session import EpisodeSession


def test_rows_carry_consecutive_seeds_and_the_first_observation_of_each():
    rows = list(episode_rows("game:GuessTheNumber-v0", 3, seed_start=5, system_prompt="be brief"))
    assert [row.label.seed for row in rows] == [5, 6, 7]
    assert [row.index for row in rows] == [0, 1, 2]
    env = gem_core.make("game:GuessTheNumber-v0")
    for row in rows:
        observation, _ = env.reset(seed=row.label.seed)
        assert row.messages == [{"role": "system", "content": "be brief"}, {"role": "user", "content": observation}]
        assert row.label == EpisodeLabel("game:GuessTheNumber-v0", row.label.seed, {})


def test_a_mixture_numbers_rows_across_env_ids_and_can_skip_the_observation():
    rows = list(episode_rows(["game:GuessTheNumber-v0", "game:Wordle-v0"], 2, with_messages=False))
    assert [(r.label.env_id, r.label.seed, r.index) for r in rows] == [
        ("game:GuessTheNumber-v0", 0, 0),
        ("game:GuessTheNumber-v0", 1, 1),
        ("game:Wordle-v0", 0, 2),
        ("game:Wordle-v0", 1, 3),
    ]
    assert all(r.messages is None for r in rows)


def test_an_unknown_id_anywhere_in_a_mixture_fails_before_any_row():
    rows = episode_rows(["game:GuessTheNumber-v0", "game:Wordel-v0"], 2)
    with pytest.raises(LabelError, match="game:Wordle-v0"):
        next(rows)


@pytest.mark.parametrize("n", [0, -1, 1.5, True])
def test_n_must_be_a_positive_integer(n):
    with pytest.raises(ValueError, match="positive integer"):
        list(episode_rows("game:GuessTheNumber-v0", n))


@pytest.mark.parametrize("env_ids", ["game:GuessTheNumber-v0", {"game:Wordle-v0": 1, "game:GuessTheNumber-v0": 1}])
@pytest.mark.parametrize("with_messages", [True, False])
def test_env_kwargs_the_env_refuses_fail_before_any_row_even_without_messages(env_ids, with_messages):
    """Rows that hold only the label (OpenRLHF, RL2) are checked too: the env is built once per id and closed."""
    from gem_core.rows import EnvKwargsError

    rows = episode_rows(env_ids, 3, env_kwargs={"max_number": -3}, with_messages=with_messages)
    with pytest.raises(EnvKwargsError, match=r"^env_kwargs \{\"max_number\": -3\} do not fit game:(GuessTheNumber|Wordle)-v0 \(") as caught:
        next(rows)
    assert isinstance(caught.value, LabelError)


@pytest.mark.parametrize("seed_start", [-1, 1.5, True])
def test_seed_start_must_be_a_non_negative_integer(seed_start):
    with pytest.raises(ValueError, match=r"seed_start must be 0 or more \(gymnasium seeds are non-negative\)"):
        next(episode_rows("game:GuessTheNumber-v0", 2, seed_start=seed_start, with_messages=False))


async def test_a_session_from_a_label_plays_the_episode_the_label_names(tiny_tokenizer):
    label = '{"env_id": "game:GuessTheNumber-v0", "seed": 3, "env_kwargs": {"max_turns": 2}}'
    session = EpisodeSession.from_label(label, tiny_tokenizer, max_turns=5)
    prompt_ids = await session.start()
    assert session.seed == 3 and session.env_id == "game:GuessTheNumber-v0"
    assert session.env.unwrapped.max_turns == 2
    reference = gem_core.make("game:GuessTheNumber-v0", max_turns=2)
    first_observation, _ = reference.reset(seed=3)
    assert tiny_tokenizer.decode(prompt_ids).count(first_observation) == 1
    # An explicit seed still wins over the label's.
    await session.start(seed=4)
    assert session.seed == 4


def test_a_bad_label_fails_with_the_adapters_fix(tiny_tokenizer):
    with pytest.raises(LabelError, match="rebuild with make_dataset"):
        EpisodeSession.from_label('{"seed": 1}', tiny_tokenizer, fix_hint="rebuild with make_dataset")


def test_numpy_counts_work_and_seeds_past_64_bits_or_a_non_text_system_prompt_are_refused():
    """A dataset column holds 64-bit seeds (verl's parquet raised OverflowError at write time), and a system
    prompt that is not text failed in Arrow with a raw ArrowInvalid."""
    import numpy as np

    rows = list(episode_rows("game:GuessTheNumber-v0", np.int64(2), seed_start=np.int64(3), with_messages=False))
    assert [row.label.seed for row in rows] == [3, 4] and all(type(row.label.seed) is int for row in rows)
    with pytest.raises(ValueError, match=r"seed_start \+ n - 1 at most 9223372036854775807"):
        list(episode_rows("game:GuessTheNumber-v0", 2, seed_start=2**63 - 1, with_messages=False))
    list(episode_rows("game:GuessTheNumber-v0", 1, seed_start=2**63 - 1, with_messages=False))  # the last seed fits
    with pytest.raises(ValueError, match=r"make_dataset: system_prompt=5 must be a str, or None"):
        list(episode_rows("game:GuessTheNumber-v0", 1, system_prompt=5))


def test_env_kwargs_stored_as_json_text_are_read_and_bad_text_is_a_label_error():
    """verl's parquet rows store env_kwargs as JSON text; a damaged row is the dataset's mistake, named as such."""
    from gem_core.rows import parse_label

    label = parse_label({"env_id": "game:GuessTheNumber-v0", "seed": 1, "env_kwargs": '{"max_number": 5}'})
    assert label.env_kwargs == {"max_number": 5}
    with pytest.raises(LabelError, match=r"env_kwargs '\{bad' is not JSON"):
        parse_label({"env_id": "game:GuessTheNumber-v0", "seed": 1, "env_kwargs": "{bad"})


def test_an_env_id_given_twice_or_no_ids_at_all_are_refused_naming_the_fix():
    """[E, E] used to yield the same seeds twice (duplicate episodes); None failed with "'NoneType' object is not iterable"."""
    with pytest.raises(ValueError, match=r"game:GuessTheNumber-v0 given more than once would repeat the same episodes"):
        list(episode_rows(["game:GuessTheNumber-v0", "game:GuessTheNumber-v0"], 2, with_messages=False))
    with pytest.raises(ValueError, match=r"env_ids is an env id, a list of env ids or a mixture"):
        list(episode_rows(None, 2, with_messages=False))


@pytest.mark.parametrize("env_kwargs", [[1], "max_turns=3", 5])
def test_env_kwargs_that_are_not_a_mapping_are_refused_naming_them(env_kwargs):
    """[1] failed in dict() with "cannot convert dictionary update sequence", naming neither env_kwargs nor the fix."""
    from gem_core.rows import EnvKwargsError

    with pytest.raises(EnvKwargsError) as err:
        list(episode_rows("game:GuessTheNumber-v0", 2, env_kwargs=env_kwargs, with_messages=False))
    assert str(err.value).startswith(f"env_kwargs must be a mapping of the env's constructor keywords (e.g. {{'max_turns': 3}}), got {env_kwargs!r}")
