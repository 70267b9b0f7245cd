"""``python -m gem_adapters.trl``: the dataset command's formats."""

from __future__ import annotations

import pytest

from gem_adapters.trl.__main__ import main


def test_a_vision_env_to_json_lines_is_one_line_naming_parquet_and_writes_nothing(tmp_path, capsys):
    """pandas' JSON encoder cannot write the images column: the command ended in a 30-line OverflowError traceback."""
    pytest.importorskip("PIL")
    out = tmp_path / "v.jsonl"
    with pytest.raises(SystemExit) as exit_:
        main(["--env", "vision:ChartQA-v0", "--n", "1", "--out", str(out)])
    assert exit_.value.code == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and err.startswith("python -m gem_adapters.trl: error: --out") and ".parquet" in err
    assert not out.exists() and list(tmp_path.iterdir()) == []


def test_a_vision_env_to_parquet_keeps_its_images(tmp_path, capsys):
    pytest.importorskip("PIL")
    from datasets import load_dataset

    out = tmp_path / "v.parquet"
    main(["--env", "vision:ChartQA-v0", "--n", "1", "--out", str(out)])
    assert capsys.readouterr().out.startswith("wrote 1 prompts to")
    (row,) = load_dataset("parquet", data_files=str(out), split="train")
    assert len(row["images"]) == 1 and row["images"][0].size[0] > 0
