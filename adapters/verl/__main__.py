"""Write the parquet file verl's ``RLHFDataset`` reads, one row per GEM episode (env id + seed).

    python -m gem_adapters.verl --env game:Wordle-v0 --n 1000 --out train.parquet
    python -m gem_adapters.verl --env game:Wordle-v0 --n 64 --seed-start 1000000 --out val.parquet

The columns are :mod:`gem_adapters.verl.make_dataset`'s. The package's ``__init__`` never imports this module.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence

from gem_adapters.verl.make_dataset import DEFAULT_AGENT_NAME, verl_rows, write_dataset
from gem_core.cli.dataset import run_dataset_cli
from gem_core.rows import EpisodeRow


def write_rows(rows: list[EpisodeRow], args: argparse.Namespace) -> str:
    write_dataset(verl_rows(rows, args.agent_name), args.out)
    return f"{len(rows)} rows of {', '.join(args.env)}"


def main(argv: Sequence[str] | None = None) -> None:
    run_dataset_cli(
        "python -m gem_adapters.verl", __doc__.split("\n\n")[0], write_rows, argv,
        add_arguments=lambda parser: parser.add_argument("--agent-name", default=DEFAULT_AGENT_NAME, help="name of the agent loop config entry"),
    )


if __name__ == "__main__":
    main()
