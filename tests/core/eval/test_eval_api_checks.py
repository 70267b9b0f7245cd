"""gem_core.eval.evaluate() from Python refuses a bad argument before any episode, naming it, as the CLI
does: backend options out of bounds, a base_url that is not http(s)://, a negative seed, a setting of the
wrong type, two ways to name one model, and an out_dir that already holds a run."""

from __future__ import annotations


import pytest
from scripted_backend import OneStepBackend

from gem_core.eval import EvalConfig, evaluate, make_backend
from gem_core.eval.cli import main

EASY = "game:GuessTheNumber-v0-easy"
DEAD_URL = "http://127.0.0.1:9/v1"  # port 9 (discard): nothing listens, so a request would fail


# -- 1. backend options and base_url -------------------------------------------------------------------


@pytest.mark.parametrize(
    "options, named",
    [
        ({"timeout": -1}, r"backend_options\['timeout'\]: -1 is outside"),
        ({"timeout": "5"}, r"backend_options\['timeout'\]: '5' is not a number"),
        ({"max_retries": -1}, r"backend_options\['max_retries'\]: -1 is outside 0\.\.100"),
        ({"max_in_flight": 0}, r"backend_options\['max_in_flight'\]: 0 is outside"),
    ],
)
def test_backend_options_out_of_bounds_are_refused_before_any_episode(tmp_path, options, named):
    out = tmp_path / "run"
    with pytest.raises(ValueError, match=named):
        evaluate(["game:GuessTheNumber-v0"], model="m", base_url=DEAD_URL, backend_options=options, episodes=2,
                 progress=False, out_dir=str(out))
    assert not out.exists()


@pytest.mark.parametrize(
    "options, error, named",
    [
        ({"max_in_flight": None}, ValueError, r"^backend_options\['max_in_flight'\]: missing \(None\)"),
        ({"api_key": 5}, TypeError, r"^backend_options\['api_key'\]: 5 is not a text"),
        ({"extra_body": "top_k=20"}, TypeError, r"^backend_options\['extra_body'\]: 'top_k=20' is not a dict"),
    ],
)
def test_backend_options_of_the_wrong_type_are_refused_before_any_episode(tmp_path, options, error, named):
    from gem_core.errors import GemError

    out = tmp_path / "run"
    with pytest.raises(error, match=named) as caught:
        evaluate(["game:GuessTheNumber-v0"], model="m", base_url=DEAD_URL, backend_options=options, episodes=2,
                 progress=False, out_dir=str(out))
    assert isinstance(caught.value, GemError) and not out.exists()
    with pytest.raises(error, match=named.replace(r"backend_options\['", "").replace(r"'\]", "")):
        make_backend("m", base_url=DEAD_URL, **options)


@pytest.mark.parametrize("url", ["ftp://x", "127.0.0.1:8000/v1", "http://", "", "file:///etc/passwd"])
def test_a_base_url_that_is_not_http_is_refused_naming_base_url(tmp_path, url):
    out = tmp_path / "run"
    with pytest.raises(ValueError, match=r"^base_url must be an http:// or https:// URL"):
        evaluate(["game:GuessTheNumber-v0"], model="m", base_url=url, episodes=2, progress=False, out_dir=str(out))
    assert not out.exists()
    with pytest.raises(ValueError, match=r"^base_url must be an http:// or https:// URL"):
        make_backend("m", base_url=url)


def test_make_backend_names_a_bad_option_by_its_own_name():
    with pytest.raises(ValueError, match=r"^timeout: -1 is outside"):
        make_backend("m", base_url=DEAD_URL, timeout=-1)


# -- 2. negative seeds --------------------------------------------------------------------------------


def test_a_negative_seed_is_refused_before_any_episode():
    backend = OneStepBackend()
    with pytest.raises(ValueError, match=r"^seed: -5 is outside 0\.\.9,223,372,036,854,775,807\.$"):
        evaluate([EASY], backend=backend, seed=-5, episodes=2, progress=False)
    assert backend.episodes == 0


def test_gem_eval_refuses_a_negative_seed_in_one_line(tmp_path, capsys):
    out = tmp_path / "run"
    code = main(["--model", "m", "--base-url", DEAD_URL, "--env", EASY, "--seed", "-5", "--no-progress", "--no-plots",
                 "--out", str(out)])
    err = capsys.readouterr().err
    assert code == 2 and err == "gem eval: --seed: -5 is outside 0..9,223,372,036,854,775,807.\n", err
    assert not out.exists()


# -- 3. one way to name a model -----------------------------------------------------------------------


def test_make_backend_refuses_a_policy_and_a_base_url_together():
    with pytest.raises(ValueError, match=r"^make_backend: policy=/tokenizer= .* and base_url= .*give one of them"):
        make_backend("m", policy=object(), tokenizer=object(), base_url=DEAD_URL)


def test_make_backend_refuses_a_tokenizer_without_a_policy():
    with pytest.raises(ValueError, match=r"^make_backend: tokenizer= goes with policy="):
        make_backend("m", tokenizer=object())


def test_evaluate_refuses_a_backend_and_another_way_to_name_the_model():
    backend = OneStepBackend()
    with pytest.raises(ValueError, match=r"^evaluate: backend= is the model; drop base_url="):
        evaluate([EASY], backend=backend, base_url=DEAD_URL, episodes=1, progress=False)
    assert backend.episodes == 0


# -- 5. a setting of the wrong type -------------------------------------------------------------------


@pytest.mark.parametrize(
    "setting, expected",
    [
        ({"episodes": "3"}, "episodes: '3' is not a whole number."),
        ({"samples": None}, "samples: missing (None)."),
        ({"max_turns": "2"}, "max_turns: '2' is not a whole number."),
        ({"concurrency": 2.5}, "concurrency: 2.5 is not a whole number."),
        ({"episodes": 0}, "episodes: 0 is outside 1..1,000,000."),
    ],
)
def test_a_setting_of_the_wrong_type_is_refused_naming_it(setting, expected):
    with pytest.raises(ValueError) as caught:
        evaluate(["game:Wordle-v0"], backend=OneStepBackend(), progress=False, **setting)
    assert str(caught.value) == expected
    with pytest.raises(ValueError) as caught:
        EvalConfig(env_ids=["game:Wordle-v0"], **setting)
    assert str(caught.value) == expected


# -- 6. a misspelt keyword, an argument of the wrong kind ------------------------------------------------


def test_a_misspelt_setting_is_refused_naming_it_and_the_settings():
    from gem_core.errors import InvalidArgumentType

    backend = OneStepBackend()
    with pytest.raises(InvalidArgumentType, match=r"^evaluate got an unexpected keyword 'episode' \(did you mean 'episodes'\?\); .*out_dir"):
        evaluate([EASY], backend=backend, episode=3, progress=False)
    assert backend.episodes == 0


def test_a_misspelt_backend_option_is_refused_naming_it_and_the_options():
    from gem_core.errors import InvalidArgumentType

    with pytest.raises(InvalidArgumentType, match=r"^backend_options\['timeot'\] is not an option .*did you mean 'timeout'.*max_retries"):
        evaluate([EASY], model="m", base_url=DEAD_URL, backend_options={"timeot": 1}, episodes=1, progress=False)


@pytest.mark.parametrize(
    "arguments, named",
    [
        ({"env_ids": None}, r"^env_ids: None is not a list of env ids"),
        ({"env_ids": [EASY], "out_dir": 5}, r"^out_dir: 5 is not a folder path"),
        ({"env_ids": [EASY], "plots": "no"}, r"^plots: 'no' is not True or False"),
        ({"env_ids": [["game:Wordle-v0"]]}, r"^env_ids\[0\]: \['game:Wordle-v0'\] is not an env id"),
        ({"env_ids": [EASY, {"id": EASY}]}, r"^env_ids\[1\]: \{'id': .* is not an env id"),
        ({"env_ids": [1]}, r"^env_ids\[0\]: 1 is not an env id"),
    ],
)
def test_an_argument_of_the_wrong_kind_is_refused_naming_it(arguments, named):
    from gem_core.errors import InvalidArgumentType

    env_ids = arguments.pop("env_ids")
    backend = OneStepBackend()
    with pytest.raises(InvalidArgumentType, match=named):
        evaluate(env_ids, backend=backend, episodes=1, progress=False, **arguments)
    assert backend.episodes == 0
    with pytest.raises(InvalidArgumentType, match=named):
        EvalConfig(env_ids=env_ids, **arguments)


def test_an_empty_out_dir_is_refused_instead_of_writing_into_the_current_folder(tmp_path, monkeypatch):
    from gem_core.errors import InvalidArgument

    monkeypatch.chdir(tmp_path)
    backend = OneStepBackend()
    with pytest.raises(InvalidArgument, match=r"^out_dir: '' is no folder"):
        evaluate([EASY], backend=backend, episodes=1, progress=False, out_dir="")
    assert backend.episodes == 0 and list(tmp_path.iterdir()) == []
    with pytest.raises(InvalidArgument, match=r"^out_dir: '' is no folder"):
        EvalConfig(env_ids=[EASY], out_dir="")
