"""An RL2 dataset (``rollout.train.path`` / ``train_data.path``) whose rows are GEM episodes.

    python -m gem_adapters.rl2 --env game:GuessTheNumber-v0 --n 1024 --out train.jsonl

The rows are :func:`gem_adapters.rl2.make_dataset`'s, as JSON lines. The package's ``__init__`` never imports this module.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence

from gem_adapters.rl2.api import dataset_row
from gem_core.cli.dataset import run_dataset_cli
from gem_core.rows import EpisodeRow, write_jsonl


def write_rows(rows: list[EpisodeRow], args: argparse.Namespace) -> str:
    return f"{write_jsonl([dataset_row(row.label) for row in rows], args.out)} rows"


def main(argv: Sequence[str] | None = None) -> None:
    run_dataset_cli("python -m gem_adapters.rl2", __doc__.split("\n\n")[0], write_rows, argv, with_messages=False)


if __name__ == "__main__":
    main()
