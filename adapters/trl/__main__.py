"""Prompt datasets for TRL's ``GRPOTrainer`` that pin each prompt to one env, seed and kwargs.

    python -m gem_adapters.trl --env game:Wordle-v0 --n 1000 --out train.jsonl

The rows are :func:`gem_adapters.trl.make_dataset`'s, as JSON lines (``load_dataset("json", data_files=...)``),
or parquet when ``--out`` ends in ``.parquet``. The package's ``__init__`` never imports this module.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence

from gem_adapters.trl.make_dataset import prompt_dataset
from gem_core.cli.dataset import run_dataset_cli
from gem_core.rows import EpisodeRow


def write_prompts(rows: list[EpisodeRow], args: argparse.Namespace) -> str:
    dataset = prompt_dataset(rows)
    if args.out.endswith(".parquet"):
        dataset.to_parquet(args.out)
    else:
        dataset.to_json(args.out)
    return f"{len(dataset)} prompts"


def main(argv: Sequence[str] | None = None) -> None:
    run_dataset_cli("python -m gem_adapters.trl", __doc__.split("\n\n")[0], write_prompts, argv)


if __name__ == "__main__":
    main()
