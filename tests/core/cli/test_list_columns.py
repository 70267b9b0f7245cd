"""`gem list` says beside each id where its data comes from (shipped, hub) and which pip extra it needs, from
the registry's specs (a new user met both only when making the env: a hub download that fails offline after
~25 s of retries, or an ImportError)."""

from __future__ import annotations

from pathlib import Path

import pytest

import gem_core
from gem_core.cli import env_table, main

PYPROJECT = Path(__file__).resolve().parents[3] / "pyproject.toml"


def _rows(capsys) -> tuple[dict[str, str], str]:
    captured = capsys.readouterr()
    return {line.split()[0]: line for line in captured.out.splitlines()}, captured.err


def test_a_hub_env_is_listed_with_its_dataset_and_extra(capsys):
    assert main(["list", "math:GSM8K"]) == 0
    rows, err = _rows(capsys)
    assert "hub data: openai/gsm8k" in rows["math:GSM8K"] and "needs extra math" in rows["math:GSM8K"]
    assert ":Sample" in err and "HF_HUB_OFFLINE=1" in err  # what to do offline, on stderr


def test_shipped_data_and_no_data_are_told_apart(capsys):
    assert main(["list", "math:Sample"]) == 0
    rows, err = _rows(capsys)
    assert "shipped data" in rows["math:Sample"] and "hub data" not in rows["math:Sample"] and err == ""
    assert main(["list", "game:Wordle-v0"]) == 0
    rows, _ = _rows(capsys)
    assert rows["game:Wordle-v0"].split()[1:] == ["-", "-"]


def test_ids_prints_the_ids_alone(capsys):
    assert main(["list", "--ids", "game:Wordle*"]) == 0
    assert capsys.readouterr().out.split() == ["game:Wordle-v0", "game:Wordle-v0-easy", "game:Wordle-v0-hard", "game:Wordle-v0-random"]


def test_an_extra_that_is_not_installed_says_how_to_install_it(monkeypatch, capsys):
    monkeypatch.setitem(env_table.EXTRA_MODULES, "rg", ("gem_test_no_such_module",))
    assert main(["list", "rg:aiw"]) == 0
    rows, _ = _rows(capsys)
    assert 'needs extra rg (not installed: pip install -e ".[rg]")' in rows["rg:aiw"]


def test_every_declared_extra_is_a_pyproject_extra_with_modules_to_check():
    tomllib = pytest.importorskip("tomllib")  # Python 3.11+
    extras = set(tomllib.loads(PYPROJECT.read_text())["project"]["optional-dependencies"])
    declared = {extra for env_id in gem_core.list_envs() for extra in gem_core.spec(env_id).extras}
    assert declared and declared <= extras
    assert declared <= set(env_table.EXTRA_MODULES)


def test_every_env_with_data_declares_an_extra():
    """A dataset-backed env needs `datasets` at least: an id listed with data but no extra would mislead."""
    for env_id in gem_core.list_envs():
        env_spec = gem_core.spec(env_id)
        if env_table.data_source(env_spec) != "-":
            assert env_spec.extras, env_id
