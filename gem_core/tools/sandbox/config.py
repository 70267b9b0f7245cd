"""What the sandbox is asked to do and what it answers: settings, results, the modes, and the one place
that reads the sandbox's environment variables."""

from __future__ import annotations

import os
import shutil
import sys
from dataclasses import dataclass, field
from typing import Any

from gem_core.errors import GemError, InvalidArgument
from gem_core.settings import environment_value

__all__ = [
    "MODES",
    "SandboxConfig",
    "SandboxResult",
    "SandboxUnavailableError",
    "interpreter_path",
    "FunctionCall",
    "mode_from_environment",
    "pool_size_from_environment",
    "BACKENDS",
    "resolve_backend",
    "ray_resource_from_environment",
]

MODES = ("bwrap", "process")
"""Isolation modes, strongest first."""

MIB = 1024 * 1024


class SandboxUnavailableError(GemError, RuntimeError):
    """The requested isolation mode cannot run on this machine; the message says how to fix it."""


def interpreter_path(python: str) -> str:
    """``python`` as a path that names the same interpreter inside the sandbox: absolute, its directory resolved.

    Started as ``../venv/bin/python``, an interpreter's ``sys.executable`` is ``CWD/../venv/bin/python``, and
    the sandbox hides the working directory, so that path named nothing inside. The last part is kept as it
    is: a virtualenv's ``bin/python`` is a link, and the interpreter finds its virtualenv by the link's path.
    A bare name (``python3``) is looked up on ``PATH``.
    """
    if os.sep not in python:
        python = shutil.which(python) or python
    python = os.path.abspath(python)
    return os.path.join(os.path.realpath(os.path.dirname(python)), os.path.basename(python))


def mode_from_environment() -> str | None:
    """``$GEM_SANDBOX``: the mode a user picked for every sandbox of this process (None if unset).

    The only place that reads it; :func:`gem_core.tools.sandbox.resolve_mode` calls it when no mode is given.
    """
    return environment_value("GEM_SANDBOX")


BACKENDS = ("local", "ray")
"""Where snippets run: ``"local"`` (this machine's pools) or ``"ray"`` (actors on labelled Ray nodes,
:mod:`gem_core.tools.sandbox.ray_pool`).
"""


def resolve_backend(backend: str | None = None) -> str:
    """``backend``, else ``$GEM_SANDBOX_BACKEND``, else ``"local"``; the only place that reads the variable.

    Raises:
        ValueError: an unknown backend (the message names the variable and the choices).
    """
    chosen = backend or environment_value("GEM_SANDBOX_BACKEND") or "local"
    if chosen not in BACKENDS:
        source = "sandbox_backend" if backend else "GEM_SANDBOX_BACKEND"
        raise InvalidArgument(f"{source}={chosen!r} is not a sandbox backend; choose one of {BACKENDS}.")
    return chosen


def ray_resource_from_environment(default: str = "gem_sandbox") -> str:
    """``$GEM_SANDBOX_RAY_RESOURCE``: the custom resource that marks the Ray nodes sandboxes run on."""
    return environment_value("GEM_SANDBOX_RAY_RESOURCE") or default


def pool_size_from_environment(default: int = 4) -> int:
    """``$GEM_SANDBOX_POOL``: warm workers kept per pool (``default`` if unset).

    Raises:
        InvalidArgument: if ``$GEM_SANDBOX_POOL`` is not a whole number from 0 (a negative one is a typo, not
            a request for none: it is refused, not clamped).
    """
    value = environment_value("GEM_SANDBOX_POOL")
    if value is None:
        return default
    try:
        size = int(value)
    except ValueError:
        size = -1
    if size < 0:
        raise InvalidArgument(f"GEM_SANDBOX_POOL must be a whole number of workers (0 or more), got {value!r}.")
    return size


@dataclass(frozen=True)
class FunctionCall:
    """Call ``fn_name`` (a top-level function, or a method of ``Solution`` as in LeetCode) after the
    snippet ran, with ``args`` (a list: positional arguments; anything else: the one argument).

    The return value comes back JSON-encoded in :attr:`SandboxResult.returned`, through the worker's
    supervisor, not through the snippet's stdout.
    """

    fn_name: str
    args: Any = field(default_factory=list)


@dataclass(frozen=True)
class SandboxResult:
    """What one snippet did.

    Attributes:
        stdout: its standard output (decoded as UTF-8, cut at the output cap).
        stderr: its standard error (likewise).
        exit_code: the exit status; a negative number ``-N`` when signal ``N`` killed it; ``None`` when
            the host stopped it (timeout, output, memory or disk cap).
        timed_out: the wall-clock timeout expired and the host killed the sandbox.
        limit: which limit stopped the run: ``"time"``, ``"cpu"``, ``"memory"``, ``"output"``,
            ``"processes"``, ``"file_size"``, ``"open_files"``, ``"disk"``; ``None`` if none did.
        mode: the isolation mode that ran it (``"bwrap"`` or ``"process"``).
        duration: wall-clock seconds from handing the snippet to the worker to its end.
        returned: for a :class:`FunctionCall`, the JSON text of the value the function returned
            (None if it was not called or did not return).
        node: the Ray node id that ran it (``sandbox_backend="ray"``); None when it ran locally.
    """

    stdout: str
    stderr: str
    exit_code: int | None
    timed_out: bool
    limit: str | None
    mode: str
    duration: float
    returned: str | None = None
    node: str | None = None

    @property
    def ok(self) -> bool:
        """The snippet ran to completion with exit status 0 and hit no limit."""
        return self.exit_code == 0 and not self.timed_out and self.limit is None


@dataclass(frozen=True)
class SandboxConfig:
    """Limits and settings of the sandbox that do not change per call."""

    #: Most processes (and threads) the snippet may have at once, itself included. Run as root, each call's own;
    #: unprivileged, the calls share one uid and this is counted on top of what it has when the snippet starts
    #: (concurrent calls share the headroom: see docs/guides/security.md).
    max_processes: int = 32
    #: Largest file the snippet may write, in MiB.
    max_file_mb: int = 16
    #: Most open file descriptors.
    max_open_files: int = 64
    #: Size of the private ``/tmp`` (and ``/dev/shm``) in MiB (bwrap mode).
    tmp_mb: int = 64
    #: Most files and directories in the private ``/tmp`` and ``/dev/shm`` together (bwrap mode): every
    #: inode costs host kernel memory that the size cap does not count.
    max_tmp_files: int = 10_000
    #: Bytes of stdout plus stderr read back before the run is stopped with ``limit="output"``.
    max_output_bytes: int = 1 * MIB
    #: Largest JSON return value of a :class:`FunctionCall` accepted back, in bytes.
    max_returned_bytes: int = 1 * MIB
    #: Seconds between two samples of the sandbox's memory and ``/tmp`` use by the host (the caps are
    #: enforced by sampling: a burst faster than this may overshoot before it is killed).
    sample_interval: float = 0.01
    #: Modules each worker imports before it is ready (skipped if not installed), so snippets using them
    #: do not pay the import.
    preload: tuple[str, ...] = ("numpy",)
    #: Workers kept started and waiting (``process`` mode, or bwrap with ``zygote=False``), or with the
    #: zygote, calls it keeps forked and waiting for a snippet; 0 starts a fresh sandbox for every snippet.
    pool_size: int = 4
    #: bwrap mode with ``pool_size > 0``: one zygote sandbox forks every call (see
    #: :mod:`gem_core.tools.sandbox.zygote`) instead of a sandbox started per call.
    zygote: bool = True
    #: The Python interpreter to run snippets with (default: the current one, with its packages).
    python: str = sys.executable
    #: A host directory the snippet may change, bound read-write at :attr:`work_mount` and made its
    #: working directory (a shell env's files that last between calls, see :mod:`.shell`); None: only
    #: the private ``/tmp`` is writable. Calls with one never go through the zygote (a sandbox each).
    #: Run as root, the call runs as the directory's owner, which must not be root.
    work_dir: str | None = None
    #: Where :attr:`work_dir` appears inside the sandbox (bwrap mode).
    work_mount: str = "/workspace"
    #: Most MiB the files under :attr:`work_dir` may take together, and most files and directories:
    #: sampled by the host like memory (past either the call is killed with ``limit="disk"``).
    max_work_mb: int = 64
    max_work_files: int = 10_000

    def __post_init__(self) -> None:
        object.__setattr__(self, "python", interpreter_path(self.python))
