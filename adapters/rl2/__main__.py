"""An RL2 dataset (``rollout.train.path`` / ``train_data.path``) whose rows are GEM episodes.

    python -m gem_adapters.rl2 --env game:GuessTheNumber-v0 --n 1024 --out train.jsonl

The rows are :func:`gem_adapters.rl2.make_dataset`'s, as JSON lines. The package's ``__init__`` never imports this module.
"""

from __future__ import annotations

from collections.abc import Sequence

from gem_adapters.rl2.api import dataset_row
from gem_core.cli.dataset import jsonl_writer, run_dataset_cli


def main(argv: Sequence[str] | None = None) -> None:
    run_dataset_cli("python -m gem_adapters.rl2", __doc__.split("\n\n")[0], jsonl_writer(lambda row: dataset_row(row.label)), argv, with_messages=False)


if __name__ == "__main__":
    main()
