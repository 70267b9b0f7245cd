"""gem_adapters.openrlhf.make_dataset: the rows (the core's episode rows in OpenRLHF's columns), and the CLI,
``python -m gem_adapters.openrlhf`` (no OpenRLHF needed)."""

from __future__ import annotations

import json

import pytest

from gem_adapters.openrlhf.__main__ import main
from gem_adapters.openrlhf.make_dataset import make_dataset
from gem_core.rows.label import LabelError, parse_label


def test_rows_name_each_env_with_consecutive_seeds(tmp_path, capsys):
    out = tmp_path / "train.jsonl"
    main(["--env", "game:GuessTheNumber-v0", "--env", "game:Wordle-v0", "--n", "3", "--out", str(out), "--seed-start", "10"])
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    labels = [parse_label(row["label"]) for row in rows]
    assert [(lab.env_id, lab.seed) for lab in labels] == [
        ("game:GuessTheNumber-v0", 10), ("game:GuessTheNumber-v0", 11), ("game:GuessTheNumber-v0", 12),
        ("game:Wordle-v0", 10), ("game:Wordle-v0", 11), ("game:Wordle-v0", 12),
    ]
    assert all(set(row) == {"prompt", "label"} for row in rows)
    assert "wrote 6 rows" in capsys.readouterr().out


def test_the_function_gives_the_rows_the_cli_writes(tmp_path):
    out = tmp_path / "train.jsonl"
    main(["--env", "game:GuessTheNumber-v0", "--n", "2", "--out", str(out), "--env-kwargs", '{"max_turns": 3}'])
    import gem_adapters.openrlhf

    assert gem_adapters.openrlhf.make_dataset is make_dataset, "one shape: gem_adapters.<fw>.make_dataset(...) is the function"
    rows = make_dataset("game:GuessTheNumber-v0", 2, env_kwargs={"max_turns": 3})
    assert [json.loads(line) for line in out.read_text().splitlines()] == rows
    assert parse_label(rows[0]["label"]).env_kwargs == {"max_turns": 3}


def test_unknown_env_fails_before_writing(tmp_path, capsys):
    out = tmp_path / "train.jsonl"
    with pytest.raises(SystemExit) as ended:  # a usage error: exit 2, one line
        main(["--env", "game:NoSuchGame-v0", "--n", "2", "--out", str(out)])
    assert ended.value.code == 2 and "Did you mean" in capsys.readouterr().err
    assert not out.exists()
    with pytest.raises(LabelError, match="Did you mean"):
        make_dataset(["game:GuessTheNumber-v0", "game:NoSuchGame-v0"], 2)
