"""The ``gem`` command and the command-line pieces other entry points share.

- :mod:`~gem_core.cli.command`: ``gem`` itself (``list``, ``play``; ``replay``, ``serve``, ``check`` and
  ``eval`` are registered from their own modules), :func:`main` (the console script), :func:`build_parser`.
- :mod:`~gem_core.cli.replay`: ``gem replay`` (the engine is :mod:`gem_core.rollout.replay`).
- :mod:`~gem_core.cli.dataset`: every adapter's dataset command (``python -m gem_adapters.<fw>``), written once.
- :mod:`~gem_core.cli.options`: options several commands read alike (``--env-kwargs``).

Argument parsing lives here, beside the CLI, so the episode engine and the dataset rows import no argparse.
"""

from gem_core.cli.command import build_parser, main

__all__ = ["build_parser", "main"]
