"""An OpenRLHF prompt dataset whose rows are GEM episodes, from the core's :func:`~gem_core.rows.episode_rows`.

    python -m gem_adapters.openrlhf --env game:GuessTheNumber-v0 --n 1024 --out train.jsonl

The rows are :func:`gem_adapters.openrlhf.make_dataset`'s, as JSON lines. The package's ``__init__`` never imports this module.
"""

from __future__ import annotations

from collections.abc import Sequence

from gem_adapters.openrlhf.make_dataset import dataset_row
from gem_core.cli.dataset import jsonl_writer, run_dataset_cli


def main(argv: Sequence[str] | None = None) -> None:
    run_dataset_cli("python -m gem_adapters.openrlhf", __doc__.split("\n\n")[0], jsonl_writer(dataset_row), argv, with_messages=False)


if __name__ == "__main__":
    main()
