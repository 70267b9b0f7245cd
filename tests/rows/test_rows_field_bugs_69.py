"""Field bugs of the dataset label (gem_core.rows.label): repeated keys, NaN and infinities, env_kwargs whose error
message could not be written, and a malformed remote: id reported without the dataset's fix."""

from __future__ import annotations

import json

import pytest

from gem_core.rows import EnvKwargsError, EpisodeLabel, LabelError, make_label_env, parse_label

ENV = "game:GuessTheNumber-v0"


@pytest.mark.parametrize(
    "text",
    [
        '{"env_id": "game:GuessTheNumber-v0", "seed": 1, "seed": 2}',
        '{"env_id": "game:GuessTheNumber-v0", "seed": 1, "env_kwargs": {"max_turns": 3, "max_turns": 9}}',
        '{"env_id": "game:GuessTheNumber-v0", "seed": 1, "env_kwargs": "{\\"max_turns\\": 3, \\"max_turns\\": 9}"}',
    ],
)
def test_a_label_repeating_a_key_is_refused_naming_the_key(text):
    """A label (or its env_kwargs, as an object or as JSON text) that gave a key twice was read with the last value:
    ``{"seed": 1, "seed": 2}`` silently played seed 2, another episode than the row's author may have meant."""
    key = "seed" if text.count('"seed"') == 2 else "max_turns"
    with pytest.raises(LabelError, match=rf"'{key}'.*twice.*HINT") as caught:
        parse_label(text, fix_hint="HINT")
    assert str(caught.value).count("\n") == 0


@pytest.mark.parametrize("env_kwargs", [{1: 2, "max_turns": 3}, {(1, 2): 3}])
def test_env_kwargs_keys_that_are_not_strings_are_a_label_error(env_kwargs):
    """A mapping label whose env_kwargs had a non-str key was accepted; make_label_env then failed with a raw TypeError
    ('<' not supported between 'str' and 'int') from the json.dumps(sort_keys=True) of its own error message."""
    with pytest.raises(LabelError, match="env_kwargs.*keys must be strings.*HINT"):
        parse_label({"env_id": ENV, "seed": 0, "env_kwargs": env_kwargs}, fix_hint="HINT")


@pytest.mark.parametrize("env_kwargs", [{1: 2, "max_turns": 3}, {"max_number": 10**5000}])
def test_the_env_kwargs_error_of_make_label_env_is_written_for_any_kwargs(env_kwargs):
    """make_label_env's message builder raised a raw TypeError (mixed key types) or ValueError (an int over 4300 digits)
    from json.dumps, hiding the EnvKwargsError that says which kwargs do not fit."""
    with pytest.raises(EnvKwargsError, match="do not fit game:GuessTheNumber-v0"):
        make_label_env(EpisodeLabel(ENV, 0, env_kwargs))


@pytest.mark.parametrize("constant", ["NaN", "Infinity", "-Infinity"])
def test_nan_and_infinities_in_env_kwargs_are_refused_naming_the_key(constant):
    """``{"x": NaN}`` in env_kwargs was accepted and EpisodeLabel.to_json wrote a bare NaN, which is not JSON: a strict
    reader (another language, a JSON column) refused the dataset GEM had written."""
    text = f'{{"env_id": "{ENV}", "seed": 0, "env_kwargs": {{"max_turns": 3, "x": [1, {constant}]}}}}'
    with pytest.raises(LabelError, match=r"env_kwargs.*'x'.*HINT"):
        parse_label(text, fix_hint="HINT")
    with pytest.raises(LabelError, match=r"env_kwargs.*'y'"):
        parse_label({"env_id": ENV, "seed": 0, "env_kwargs": {"y": {"z": float(constant.lower().replace("infinity", "inf"))}}})


def test_to_json_writes_standard_json_only():
    """to_json wrote NaN/Infinity for a label built in code; it now refuses them (a GemError) instead of writing non-JSON."""
    assert json.loads(EpisodeLabel(ENV, 0, {"max_turns": 3}).to_json())["env_kwargs"] == {"max_turns": 3}
    with pytest.raises(LabelError, match="'x'"):
        EpisodeLabel(ENV, 0, {"x": float("nan")}).to_json()


def test_a_malformed_remote_env_id_is_a_label_error_with_the_fix():
    """A label naming ``remote:ftp://...`` raised the registry's InvalidArgument, not the LabelError parse_label documents:
    an adapter catching LabelError let it through, and the message had no fix hint."""
    with pytest.raises(LabelError, match=r"malformed.*Fix the env_id in the dataset\. HINT"):
        parse_label('{"env_id": "remote:ftp://h:1/game:Wordle-v0", "seed": 0}', fix_hint="HINT")
