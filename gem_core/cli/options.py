"""Command-line options that several commands read the same way (``gem replay``, every ``make_dataset``,
the examples' ``--env-kwargs``; ``gem play --seed``; ``gem eval --out`` and the examples' output folders), and
the one-line usage error the examples' parsers share, and the end of output a closed pipe brings (``gem list | head``)."""

from __future__ import annotations

import errno
import json
import os
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

from gem_core.errors import InvalidArgument

__all__ = ["OneLineErrors", "env_kwargs_option", "folder_problem", "run_until_pipe_closes", "seed_option"]

#: Python's own exit status when its stdout is a closed pipe (the docs' SIGPIPE note uses it too).
BROKEN_PIPE_EXIT = 1

#: What a write to an open stdout fails with when the output cannot take it: a full disk or quota (``> /dev/full``),
#: a file past its size limit, a terminal that hung up. An OSError that names a file is another file's.
_OUTPUT_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EIO})


def run_until_pipe_closes(
    command: Callable[[], int], prog: str = "gem", *, closed_pipe_exit: int = BROKEN_PIPE_EXIT,
    unwritable_exit: int = BROKEN_PIPE_EXIT,
) -> int:
    """``command()``'s exit code; a reader that closes stdout early (``gem list | head``) ends it quietly
    (``closed_pipe_exit``), and an output that cannot be written (``gem list > /dev/full``) ends it with one line
    on stderr (``unwritable_exit``). Both are 1 unless a command whose codes mean more says otherwise
    (``gem replay``: 1 is "a reward changed").

    Python ignores SIGPIPE, so a write to a closed pipe raises BrokenPipeError, here or in the flush at
    interpreter exit. As the Python docs' note on SIGPIPE advises, the output is flushed here and, if the
    pipe is closed, stdout is pointed at devnull so the flush at exit has nowhere to fail: no traceback, no
    "Exception ignored" line, exit status 1. A full disk is the same story with ENOSPC, except that the
    user must be told: nothing was written.
    """
    try:
        try:
            return command()
        finally:  # also after argparse's SystemExit (--help): a short output fails only when flushed
            sys.stdout.flush()
    except BrokenPipeError:
        _discard_stdout()
        return closed_pipe_exit
    except OSError as error:
        if error.errno not in _OUTPUT_ERRNOS or error.filename is not None:
            raise
        _discard_stdout()
        print(f"{prog}: cannot write output: {error.strerror or error}", file=sys.stderr)
        return unwritable_exit


def _discard_stdout() -> None:
    """Point stdout at devnull, so what is still buffered has somewhere to go at interpreter exit."""
    try:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    except (OSError, ValueError):  # stdout without a file descriptor (a test's capture): nothing to redirect
        pass


class OneLineErrors:
    """Mix into an ``argparse.ArgumentParser`` (or transformers' ``HfArgumentParser``) subclass: a usage error
    is one line naming the option and the fix, not the whole usage printed above it; the ``require_*``
    checks the examples make before they write or launch anything end the same way."""

    if TYPE_CHECKING:  # the ArgumentParser this is mixed into provides them
        prog: str

        def exit(self, status: int = 0, message: str | None = None) -> NoReturn: ...

    def error(self, message: str) -> NoReturn:
        """Print ``message`` as one line with a pointer to ``--help`` and exit with status 2 (argparse's hook)."""
        self.exit(2, f"{self.prog}: error: {message} (--help lists the options)\n")

    def require_counts(self, counts: Mapping[str, int]) -> None:
        """Each ``{flag: value}`` counts something, so is at least 1."""
        for flag, value in counts.items():
            if value < 1:
                self.error(f"{flag} must be at least 1, got {value}")

    def require_env(self, env_id: str, flag: str = "--env") -> None:
        """``env_id`` is registered (the error names the closest ids)."""
        from gem_core.registry import UnknownEnvError, spec

        try:
            spec(env_id)
        except (UnknownEnvError, ValueError) as error:
            self.error(f"{flag}: {error}")

    def require_folder(self, flag: str, path: str | os.PathLike[str]) -> None:
        """``path`` is, or can become, a folder (:func:`folder_problem`)."""
        if problem := folder_problem(path):
            self.error(f"{flag} {problem}: give a folder path (new or existing)")


def folder_problem(path: str | os.PathLike[str]) -> str | None:
    """Why ``path`` cannot be (or become) a folder for a command's output: it, or a folder above it, is a
    file, or the nearest folder that exists is one this user may not write in (None: it can). Checked before
    any work, so the option is refused at once, not after a run."""
    path = Path(path)
    for part in (path, *path.parents):
        try:
            if not part.exists():
                continue
        except PermissionError:  # a folder above it may not be entered: the nearest one that may says so
            continue
        if not part.is_dir():
            return f"{path} is a file, not a folder" if part == path else f"{path}: {part} is a file, not a folder"
        if not os.access(part, os.W_OK | os.X_OK):
            return f"{path}: cannot write in {part}"
        return None
    return None


def seed_option(text: str) -> int:
    """An episode seed from the command line (an argparse ``type``): a whole number from 0 to
    :data:`gem_core.env.MAX_SEED`, which is what an env's ``reset(seed=)`` takes (past it, the command failed
    only once the env started); argparse names the option in the one-line error.

    Raises:
        argparse.ArgumentTypeError: ``text`` is not such a number (argparse turns it into a usage error, exit 2).
    """
    import argparse

    from gem_core.env import MAX_SEED

    try:
        seed = int(text)
    except ValueError:
        seed = None
    if seed is None or not 0 <= seed <= MAX_SEED:
        raise argparse.ArgumentTypeError(f"must be a whole number from 0 to {MAX_SEED}, got {text!r}")
    return seed


def env_kwargs_option(text: str, option: str = "--env-kwargs") -> dict[str, Any]:
    """The env kwargs a command line option holds as JSON; ValueError naming ``option`` and an example if
    ``text`` is not a JSON object (every command that takes env kwargs reads them the same way).

    Raises:
        InvalidArgument: if ``text`` is not JSON, not a JSON object, or gives a key twice (the message names ``option``
            and an example).
    """
    from gem_core.rows.label import LabelError, refuse_repeated_keys

    example = f"e.g. {option} '{{\"max_turns\": 8}}'"
    try:
        env_kwargs = json.loads(text, object_pairs_hook=refuse_repeated_keys)
    except LabelError as exc:  # the last of a repeated key would win in silence
        raise InvalidArgument(f"{option} {exc}, {example}") from None
    except json.JSONDecodeError as exc:
        raise InvalidArgument(f"{option} is not JSON ({exc}): it must be a JSON object, {example}") from None
    except (ValueError, RecursionError) as exc:  # a number past Python's 4300-digit int limit, or nesting past the stack
        reason = "nested too deeply" if isinstance(exc, RecursionError) else str(exc).partition(":")[0]
        raise InvalidArgument(f"{option} is not JSON ({reason}): it must be a JSON object, {example}") from None
    if not isinstance(env_kwargs, dict):
        raise InvalidArgument(f"{option} must be a JSON object, got {text!r}; {example}")
    return env_kwargs
