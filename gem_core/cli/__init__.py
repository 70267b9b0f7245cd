"""The ``gem`` command and the command-line pieces other entry points share.

- :mod:`~gem_core.cli.command`: ``gem`` itself (``list``, ``play``; ``replay``, ``serve``, ``check`` and
  ``eval`` are registered from their own modules), :func:`build_parser`.
- :mod:`~gem_core.cli.replay`: ``gem replay`` (the engine is :mod:`gem_core.rollout.replay`).
- :mod:`~gem_core.cli.dataset`: every adapter's dataset command (``python -m gem_adapters.<fw>``), written once.
- :mod:`~gem_core.cli.options`: options several commands read alike (``--env-kwargs``).

Argument parsing lives here, beside the CLI, so the episode engine and the dataset rows import no argparse.

:func:`main` is the console script, so this module imports nothing at its top: what Python runs before
``main`` cannot catch a Ctrl-C, and GEM's own modules (gymnasium, numpy, every command's) take most of a second.
"""

import sys

TYPE_CHECKING = False  # typing's constant, without loading typing (type checkers read the name alone)
if TYPE_CHECKING:
    from collections.abc import Sequence

    from gem_core.cli.command import build_parser

__all__ = ["build_parser", "main"]


def main(argv: "Sequence[str] | None" = None) -> int:
    """Run ``gem`` with ``argv`` (default: ``sys.argv[1:]``); returns the exit code instead of exiting.

    A Ctrl-C at any moment, GEM's first imports included, ends it with exit code 130 and one line on stderr.
    """
    try:
        from gem_core.cli.command import main as run

        return run(argv)
    except KeyboardInterrupt:  # while GEM loads, or between a command's own handlers; those print their own line
        print("\ngem: interrupted", file=sys.stderr)
        return 130


def __getattr__(name: str):
    if name == "build_parser":
        from gem_core.cli.command import build_parser

        return build_parser
    raise AttributeError(f"module 'gem_core.cli' has no attribute {name!r}")
