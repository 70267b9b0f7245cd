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
    from collections.abc import Callable, Sequence
    from types import FrameType

    from gem_core.cli.command import build_parser

__all__ = ["build_parser", "main"]


def main(argv: "Sequence[str] | None" = None) -> int:
    """Run ``gem`` with ``argv`` (default: ``sys.argv[1:]``); returns the exit code instead of exiting.

    A Ctrl-C at any moment, GEM's first imports included, ends it with exit code 130 and one line on stderr.
    """
    try:
        run = _load_commands()
        return run(argv)
    except KeyboardInterrupt:  # while GEM loads, or between a command's own handlers; those print their own line
        print("\ngem: interrupted", file=sys.stderr)
        return 130


def _load_commands() -> "Callable[[Sequence[str] | None], int]":
    """Import ``gem``'s commands (most of a second: gymnasium, numpy, every command's module) and return its main.

    A Ctrl-C during these imports does not always arrive as a KeyboardInterrupt: C code that imports a module
    (numpy's ``PyCapsule_Import("datetime")``) turns the interrupt into an ImportError, and numpy wraps that in
    an ImportError of its own, a page of advice on a broken install. So while they run, SIGINT's handler also
    records that the signal came, and any failure (or a success: some C code drops the error) after it is the
    Ctrl-C the user pressed, raised again as one.

    Raises:
        KeyboardInterrupt: a Ctrl-C came while the commands loaded, whatever the imports made of it.
    """
    import signal

    interrupts: list[int] = []

    def record_and_interrupt(signum: int, frame: "FrameType | None") -> None:
        interrupts.append(signum)
        signal.default_int_handler(signum, frame)  # raises KeyboardInterrupt, as Python's own handler does

    def quiet_ctrl_c(unraisable: "sys.UnraisableHookArgs") -> None:
        # The KeyboardInterrupt raised where Python cannot deliver it (a finalizer, importlib's module-lock callback)
        # is printed as "Exception ignored in ..." with a traceback: it is the recorded Ctrl-C, raised again below.
        if not (interrupts and issubclass(unraisable.exc_type, KeyboardInterrupt)):
            previous_hook(unraisable)

    previous_hook, sys.unraisablehook = sys.unraisablehook, quiet_ctrl_c
    installed = False
    # Only over Python's own handler (a host that calls main may have its own, which stays) and only in the
    # main thread (signal.signal raises ValueError in any other; there no SIGINT handler runs anyway).
    if signal.getsignal(signal.SIGINT) is signal.default_int_handler:
        try:
            signal.signal(signal.SIGINT, record_and_interrupt)
            installed = True
        except ValueError:
            pass
    try:
        from gem_core.cli.command import main as run
    except Exception as error:
        if not interrupts:
            raise
        raise KeyboardInterrupt from error
    finally:
        if installed and signal.getsignal(signal.SIGINT) is record_and_interrupt:  # not one an import set since
            signal.signal(signal.SIGINT, signal.default_int_handler)
        if sys.unraisablehook is quiet_ctrl_c:
            sys.unraisablehook = previous_hook
    if interrupts:
        raise KeyboardInterrupt
    return run


def __getattr__(name: str):
    if name == "build_parser":
        from gem_core.cli.command import build_parser

        return build_parser
    raise AttributeError(f"module 'gem_core.cli' has no attribute {name!r}")
