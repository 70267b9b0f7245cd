"""Write the parquet file verl's ``RLHFDataset`` reads, one row per GEM episode (env id + seed).

    python -m gem_adapters.verl --env game:Wordle-v0 --n 1000 --out train.parquet
    python -m gem_adapters.verl --env game:Wordle-v0 --n 64 --seed-start 1000000 --out val.parquet

The columns are :mod:`gem_adapters.verl.make_dataset`'s. The package's ``__init__`` never imports this module.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from gem_adapters.verl.make_dataset import DEFAULT_AGENT_NAME, verl_rows, write_dataset
from gem_core.cli.dataset import run_dataset_cli
from gem_core.errors import InvalidArgument
from gem_core.rows import EpisodeRow

PROG = "python -m gem_adapters.verl"


def write_rows(rows: list[EpisodeRow], args: argparse.Namespace) -> str:
    write_dataset(verl_rows(rows, args.agent_name), args.out)
    return f"{len(rows)} rows of {', '.join(args.env)}"


def _agent_name(value: str) -> str:
    """``--agent-name``: the ``name`` of an agent-loop entry, so not blank (verl could run no row of the file).

    Raises:
        argparse.ArgumentTypeError: a blank name (the parser makes it a one-line usage error, exit 2).
    """
    if not value.strip():
        raise argparse.ArgumentTypeError(f"must name an entry of verl's agent loop YAML ({DEFAULT_AGENT_NAME!r} in GEM's), got {value!r}")
    return value


def main(argv: Sequence[str] | None = None) -> None:
    """The command: a bad option, or rows verl's adapter cannot train (a vision env), exit 2 with one line, nothing written."""
    try:
        run_dataset_cli(
            PROG, __doc__.split("\n\n")[0], write_rows, argv,
            add_arguments=lambda parser: parser.add_argument("--agent-name", type=_agent_name, default=DEFAULT_AGENT_NAME,
                                                             help="name of the agent loop config entry"),
        )
    except InvalidArgument as exc:  # from verl_rows, after the rows were built: a usage error like the parser's own
        print(f"{PROG}: error: {exc}", file=sys.stderr)
        raise SystemExit(2) from None


if __name__ == "__main__":
    main()
