"""How a worker is walled off: the bubblewrap command line, what the sandbox may see, and which modes work.

bwrap mode shows the snippet a read-only interpreter and the system directories, nothing else of the
host: not the home directory, not the working directory, not a source checkout of GEM, and not GEM's own
installed package (``gem_core``, ``gem_adapters``): its package data holds the env datasets, with the
expected outputs of the code tests, so a snippet that could read them could score without solving
(issue 14). Those directories are covered by empty, read-only, size-capped tmpfs mounts where they lie
inside the interpreter's tree.

A shell env's working directory (``SandboxConfig.work_dir``) is the one host directory a sandbox may
write to: bound read-write at ``SandboxConfig.work_mount``, under the same walls otherwise.

bubblewrap's own arguments (which name host paths) reach it through a pipe (``--args FD``), not its
command line, so ``/proc/1/cmdline`` inside shows none of them; the seccomp program arrives the same
way (``--seccomp FD``, see :mod:`.syscall_filter`).
"""

from __future__ import annotations

import functools
import importlib.util
import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

from gem_core.errors import InvalidArgument
from gem_core.settings import home_dir
from gem_core.tools.sandbox.config import MIB, MODES, SandboxConfig, SandboxUnavailableError, interpreter_path, mode_from_environment
from gem_core.tools.sandbox.socket_memory import check_available
from gem_core.tools.sandbox.syscall_filter import compiled_filter

__all__ = ["ENV", "BwrapLaunch", "bwrap_launch", "python_dirs", "hidden_dirs", "site_dirs", "resolve_mode", "available_modes"]

SYSTEM_DIRS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc")

ENV = {
    "PATH": "/usr/local/bin:/usr/bin:/bin",
    "HOME": "/tmp",
    "LANG": "C.UTF-8",
    "PYTHONDONTWRITEBYTECODE": "1",
    "PYTHONHASHSEED": "0",
    "OPENBLAS_NUM_THREADS": "1",
    "OMP_NUM_THREADS": "1",
    "MKL_NUM_THREADS": "1",
}
"""The whole environment of a snippet (nothing of the host's is passed on)."""


def bwrap_binary() -> str | None:
    return shutil.which("bwrap")


def _is_within(path: Path, parent: Path) -> bool:
    try:
        path.relative_to(parent)
        return True
    except ValueError:
        return False


def _package_dir(name: str) -> Path | None:
    spec = importlib.util.find_spec(name)
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations))).resolve()


def _working_dir() -> Path | None:
    """This process's working directory; None once it was deleted (nothing is left there to hide)."""
    try:
        return Path.cwd()
    except FileNotFoundError:
        return None


def hidden_dirs() -> list[Path]:
    """What the sandbox must not show: the home directory, the working directory (the user's project),
    GEM's source checkout when it runs from one, and GEM's installed packages with their data."""
    dirs = [path.resolve() for path in (home_dir(), _working_dir()) if path is not None]
    checkout = Path(__file__).resolve().parents[3]
    if (checkout / "pyproject.toml").exists():
        dirs.append(checkout)
    for package in ("gem_core", "gem_adapters"):
        found = _package_dir(package)
        if found is not None:
            dirs.append(found)
    return dirs


def _is_current_interpreter(python: str) -> bool:
    """The path names this process's interpreter. The last parts are compared unresolved
    (:func:`interpreter_path`): two virtualenvs of one base interpreter link to the same binary but have
    different prefixes and packages."""
    return interpreter_path(python) == interpreter_path(sys.executable)


def python_dirs(python: str) -> list[str]:
    """Directories the interpreter needs (its prefixes), except ones that would expose the home directory.

    A prefix may contain a hidden directory (a virtualenv with the project inside, the project with the
    virtualenv inside it, GEM installed in site-packages): :func:`bwrap_launch` covers it with an empty tmpfs.
    """
    candidates = {sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix}
    if not _is_current_interpreter(python):
        real = Path(os.path.realpath(python))
        # The virtualenv the path names (its bin/python is a link into the base interpreter) and the base.
        candidates = {str(Path(python).absolute().parent.parent), str(real.parent.parent)}
    home = home_dir()
    home = None if home is None else home.resolve()
    dirs = []
    for candidate in sorted(candidates):
        path = Path(candidate).resolve()
        if str(path) in ("/", "/usr") or (home is not None and _is_within(home, path)):
            continue  # an ancestor of the home directory would expose it
        dirs.append(str(path))
    return dirs


@functools.cache
def site_dirs(python: str) -> tuple[str, ...]:
    """The interpreter's site-packages, put on ``sys.path`` by the worker itself: it starts with ``-S``,
    so no ``.pth`` hook (an editable install's costs ~10 ms and would point into the checkout) runs."""
    if not _is_current_interpreter(python):
        query = "import sysconfig; print(sysconfig.get_paths()['purelib']); print(sysconfig.get_paths()['platlib'])"
        try:
            out = subprocess.run([python, "-I", "-c", query], capture_output=True, text=True, timeout=30).stdout
        except (OSError, subprocess.TimeoutExpired):
            return ()
        paths = out.split()
    else:
        paths = [sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]]
    return tuple(dict.fromkeys(paths))


class BwrapLaunch:
    """A bwrap command whose arguments and seccomp program wait in pipes: pass :attr:`fds` to the child
    and call :meth:`close` once it started.

    Args:
        bwrap: the bwrap executable.
        arguments: bwrap's arguments (passed through a pipe, so no limit on their length applies).
        seccomp_program: the compiled seccomp filter to load, or None for none.
    """

    def __init__(self, bwrap: str, arguments: list[str], seccomp_program: bytes | None):
        self.fds: list[int] = []
        if seccomp_program is not None:
            arguments = [*arguments, "--seccomp", str(self._pipe_with(seccomp_program))]
        args_fd = self._pipe_with(b"".join(a.encode() + b"\0" for a in arguments))
        self.command = [bwrap, "--args", str(args_fd)]

    def _pipe_with(self, data: bytes) -> int:
        if len(data) > 60_000:  # a pipe holds 64 KiB before a writer blocks
            raise InvalidArgument("bwrap arguments too long for a pipe")
        read, write = os.pipe()
        try:
            os.write(write, data)
        finally:
            os.close(write)
        self.fds.append(read)
        return read

    def close(self) -> None:
        """Close the file descriptors passed to bwrap; safe to call twice."""
        for fd in self.fds:
            os.close(fd)
        self.fds = []


def _arguments(config: SandboxConfig, privileged: bool, zygote: bool) -> list[str]:
    """The bwrap arguments that isolate one worker.

    Unprivileged, bwrap builds a user namespace and the snippet keeps the caller's uid, mapped: process
    limits then count the sandbox's processes only. As root it skips the user namespace (so the
    worker can run the snippet as a fresh uid that root's exemption from process limits does not cover).
    A zygote keeps CAP_SYS_ADMIN and CAP_NET_ADMIN to give each call its own mount, PID, IPC and network
    namespaces; the calls drop them (and load the seccomp filter) before any snippet code runs.
    """
    namespaces = ["--unshare-net", "--unshare-pid", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try"]
    if privileged:
        namespaces += ["--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID"]
    else:
        namespaces += ["--unshare-user"]
    if zygote:
        namespaces += ["--cap-add", "CAP_SYS_ADMIN", "--cap-add", "CAP_NET_ADMIN"]
    arguments = [*namespaces, "--die-with-parent", "--new-session", "--hostname", "sandbox"]
    for directory in SYSTEM_DIRS:
        arguments += ["--ro-bind-try", directory, directory]
    size = str(config.tmp_mb * MIB)
    arguments += ["--proc", "/proc", "--dev", "/dev"]
    arguments += ["--size", size, "--perms", "1777", "--tmpfs", "/tmp"]
    arguments += ["--size", size, "--perms", "1777", "--tmpfs", "/dev/shm"]
    arguments += ["--remount-ro", "/dev"]
    # The interpreter's directories are bound after the private /tmp: an interpreter that lives under
    # /tmp (a virtualenv in a checkout there) must stay visible, not be covered by the empty tmpfs.
    made: set[str] = set()
    interpreter_dirs = python_dirs(config.python)
    for directory in interpreter_dirs:
        # bwrap makes missing parents private (0700): make them traversable for the dropped uid.
        for parent in reversed(Path(directory).parents[:-1]):
            if str(parent) not in made and not str(parent).startswith(SYSTEM_DIRS):
                arguments += ["--perms", "0755", "--dir", str(parent)]
                made.add(str(parent))
        arguments += ["--ro-bind", directory, directory]
    for hidden in sorted(set(hidden_dirs())):
        if any(_is_within(hidden, Path(d)) and hidden != Path(d) for d in interpreter_dirs) and hidden.is_dir():
            # Inside the interpreter's tree: shown as an empty, read-only directory.
            arguments += ["--size", "4096", "--perms", "0555", "--tmpfs", str(hidden), "--remount-ro", str(hidden)]
    working_directory = "/tmp"
    if config.work_dir is not None:
        mount = Path(config.work_mount)
        if not mount.is_absolute() or mount == Path("/") or any(
            _is_within(Path(d), mount) or _is_within(mount, Path(d)) for d in (*interpreter_dirs, *SYSTEM_DIRS, "/tmp", "/proc", "/dev")
        ):
            raise InvalidArgument(
                f"SandboxConfig.work_mount={config.work_mount!r} would cover or sit inside a directory the sandbox "
                "needs; pick an absolute path of its own, such as '/workspace'."
            )
        # Bound last, so nothing bound after it can cover it; read-write, nosuid and nodev (bwrap's default).
        arguments += ["--bind", str(Path(config.work_dir).resolve()), str(mount)]
        working_directory = str(mount)
    # Last, once every mount point exists: bubblewrap's root is a tmpfs without a size cap, writable by
    # the snippet when run unprivileged (the uid owns it) and shared by every call of a zygote.
    arguments += ["--remount-ro", "/"]
    arguments += ["--chdir", working_directory, "--clearenv"]
    for key, value in ENV.items():
        arguments += ["--setenv", key, value]
    return arguments


def bwrap_launch(config: SandboxConfig, privileged: bool, zygote: bool = False) -> BwrapLaunch:
    """The bwrap prefix of a worker's command (append the program and its arguments to ``.command``).

    A zygote's sandbox gets no seccomp filter from bwrap: each call loads it itself, after its setup.

    Raises:
        SandboxUnavailableError: if bubblewrap is not installed.
    """
    bwrap = bwrap_binary()
    if bwrap is None:
        raise SandboxUnavailableError("the `bwrap` executable (bubblewrap) is not installed")
    return BwrapLaunch(bwrap, _arguments(config, privileged, zygote), None if zygote else compiled_filter())


def _probe(mode: str, config: SandboxConfig) -> str | None:
    """Why ``mode`` cannot run here, or None if it can."""
    if mode == "process":
        return None
    if bwrap_binary() is None:
        return "the `bwrap` executable (bubblewrap) is not installed"
    try:
        compiled_filter()
    except (ImportError, OSError, RuntimeError) as error:
        return (
            f"its seccomp filter cannot be compiled ({error}); install the `pyseccomp` package and the "
            "system's libseccomp (Debian/Ubuntu: `apt-get install -y libseccomp2`)"
        )
    try:
        check_available()
    except OSError as error:
        return (
            f"the kernel cannot report the memory of the sandbox's sockets ({error}); it needs sock_diag for "
            "Unix and netlink sockets (CONFIG_UNIX_DIAG, CONFIG_NETLINK_DIAG, built in or as the unix_diag and "
            "netlink_diag modules: `modprobe unix_diag netlink_diag`)"
        )
    launch = bwrap_launch(config, os.geteuid() == 0)
    try:
        done = subprocess.run(
            [*launch.command, config.python, "-I", "-S", "-c", "pass"],
            capture_output=True, timeout=30, stdin=subprocess.DEVNULL, pass_fds=launch.fds,
        )
    except (OSError, subprocess.TimeoutExpired) as error:
        return f"running bwrap failed: {error}"
    finally:
        launch.close()
    if done.returncode != 0:
        return f"bwrap exited with status {done.returncode}: {done.stderr.decode(errors='replace').strip()[-500:]}"
    return None


@functools.cache
def probe_cached(mode: str, python: str) -> str | None:
    return _probe(mode, SandboxConfig(python=python))


def available_modes(python: str = sys.executable) -> list[str]:
    """The isolation modes that work on this machine, strongest first."""
    return [mode for mode in MODES if probe_cached(mode, python) is None]


def resolve_mode(mode: str | None = None, python: str = sys.executable) -> str:
    """The mode to run in: ``mode``, else ``$GEM_SANDBOX``, else ``"bwrap"``; checked to work here.

    Raises:
        InvalidArgument: for an unknown mode (naming ``$GEM_SANDBOX`` when it came from there).
        SandboxUnavailableError: if the mode cannot run on this machine. Nothing falls back silently
            to a weaker mode: the caller must ask for it.
    """
    chosen = mode or mode_from_environment() or "bwrap"
    if chosen not in MODES:  # a typo in the environment is fixed there: the message says where it came from
        source = "" if mode else " (from $GEM_SANDBOX)"
        raise InvalidArgument(f"Unknown sandbox mode {chosen!r}{source}: expected one of {', '.join(MODES)}.")
    reason = probe_cached(chosen, python)
    if reason is not None:
        raise SandboxUnavailableError(
            f"The {chosen!r} Python sandbox is unavailable: {reason}. Install bubblewrap "
            "(Debian/Ubuntu: `apt-get install -y bubblewrap`) and make sure unprivileged user namespaces are "
            "enabled, or accept weaker isolation (no network, file-system or process isolation) explicitly with "
            "mode='process' or the environment variable GEM_SANDBOX=process."
        )
    return chosen
