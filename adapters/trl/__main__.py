"""Prompt datasets for TRL's ``GRPOTrainer`` that pin each prompt to one env, seed and kwargs.

    python -m gem_adapters.trl --env game:Wordle-v0 --n 1000 --out train.jsonl

The rows are :func:`gem_adapters.trl.make_dataset`'s, as JSON lines (``load_dataset("json", data_files=...)``),
or parquet when ``--out`` ends in ``.parquet`` (which a vision env's rows, with their images, need). The package's
``__init__`` never imports this module.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from gem_adapters.trl.make_dataset import prompt_dataset
from gem_core.cli.dataset import run_dataset_cli
from gem_core.rows import EpisodeRow

PROG = "python -m gem_adapters.trl"


def write_prompts(rows: list[EpisodeRow], args: argparse.Namespace) -> str:
    dataset = prompt_dataset(rows)
    if Path(args.out).suffix.lower() == ".parquet":  # train.PARQUET too: JSON lines there fail load_dataset("parquet")
        dataset.to_parquet(args.out)
    elif "images" in dataset.column_names:  # pandas' JSON encoder fails on the images (an OverflowError, 30 lines deep)
        print(f"{PROG}: error: --out: a vision env's rows hold images, which JSON lines cannot; give --out a path ending "
              "in .parquet (load it with load_dataset('parquet', data_files=...))", file=sys.stderr)
        raise SystemExit(2)
    else:
        dataset.to_json(args.out)
    return f"{len(dataset)} prompts"


def main(argv: Sequence[str] | None = None) -> None:
    run_dataset_cli(PROG, __doc__.split("\n\n")[0], write_prompts, argv)


if __name__ == "__main__":
    main()
