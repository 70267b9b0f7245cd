"""A terminal: the agent runs shell commands in a sandbox to finish a small task, then submits.

Each episode gets a fresh working directory (:class:`~gem_core.tools.sandbox.shell.WorkDir`) holding
the task's files. Every action is one shell command, run by ``bash -c`` in a bubblewrap sandbox of its
own (:func:`~gem_core.tools.sandbox.shell.run_shell`) where that directory is the working directory
(``/workspace``) and the only writable place besides a private ``/tmp``: files written by one command are
there for the next, and the directory is deleted at the next :meth:`reset` and at :meth:`close`. Each
command runs under the sandbox's limits (wall time, CPU, memory, processes, file size, output, and
the work directory's size); the observation is its exit code and its (shortened) stdout and stderr.

Actions are one command in a fenced block, ```` ```bash ... ``` ```` (on one line too: ```` ```bash ls``` ````;
```` ```sh ```` and ```` ```shell ```` work too, a longer tag such as ```` ```shellscript ```` does not).
The command ``submit`` ends the episode: the task's checker script runs in the same kind of sandbox on
a copy of the directory, and its exit status gives the reward (1.0 for status 0, else 0.0). The copy
holds the directory's files and directories, no link (a link to a file inside the tree arrives as that
file): a link planted for the checker to follow out of the tree, to where it keeps its expected values,
leads nowhere (:mod:`.checker_view`). Running out of turns
truncates the episode with reward 0. An action without a command block is a format error (the turn
counts). A command that fills the work directory past its cap ends the episode with reward 0.

Tasks ship as data (``data/<name>/``): ``task.json`` (``{"instructions": ...}``), ``files/`` (copied into
the working directory), ``check.sh`` (the checker, never visible to the agent: GEM's package data is
hidden from the sandbox) and ``solution.sh`` (one command that solves it, for tests and demos). A checker
that runs the agent's code (``fix_test``, ``make_script``) runs it as a child of a Python process that is
not dumpable (the child cannot read or rewrite its memory through ``/proc``), reads its program from
stdin (out of the child's reach) and decides the verdict itself from what the child reports: plain values
of exact types, so an early ``os._exit(0)`` or an object that claims to equal anything fails.

The working directory is walked, copied and deleted without recursion: a tree of any depth is deleted
at :meth:`reset` and :meth:`close` (even one past ``PATH_MAX``; :class:`~gem_core.tools.sandbox.shell.WorkDir`
does the deleting and the handing of files to the commands' uid), and :meth:`get_state` copies paths up to
:data:`MAX_SNAPSHOT_PATH` characters and refuses a longer one with a ``ValueError`` that says so.

Without bubblewrap the env refuses to start (:class:`~gem_core.tools.sandbox.SandboxUnavailableError`)
unless ``sandbox="process"`` or ``GEM_SANDBOX=process`` asks for the unisolated mode.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import re
import stat
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gem_core.env import Env, StepResult
from gem_core.envs.terminal.checker_view import checker_files
from gem_core.errors import InvalidArgument, ResetNeeded
from gem_core.tools.sandbox import SandboxConfig, SandboxResult, resolve_mode
from gem_core.tools.sandbox.config import MIB
from gem_core.tools.sandbox.pool import check_memory_mb
from gem_core.tools.sandbox.shell import WorkDir, run_shell
from gem_core.vector.calls import check_amount, check_count

__all__ = ["TerminalTask", "TerminalEnv", "load_tasks", "extract_command", "SUBMIT"]

DATA_DIR = Path(__file__).with_name("data")
SUBMIT = "submit"
"""The command that ends the episode and runs the checker."""
#: The longest path (relative to the working directory) a snapshot keeps: :meth:`TerminalEnv.set_state`
#: recreates paths below a new working directory, and the whole must stay under ``PATH_MAX`` (4096).
MAX_SNAPSHOT_PATH = 3072
#: The tag must end the word: ```shell was read as ``sh`` and a command starting "ell".
_COMMAND_BLOCK = re.compile(r"```(?:bash|shell|sh)(?![\w-])[ \t]*\n?(.*?)```", re.DOTALL)
ACTION_HINT = (
    "Answer with one shell command in a ```bash ... ``` block (one line works too: ```bash ls```). "
    f"When the task is done, send ```bash {SUBMIT}``` to have it checked."
)


@dataclass(frozen=True)
class TerminalTask:
    """One shipped task: what to do, the files to start from, how it is checked, and a solution."""

    name: str
    instructions: str
    files: dict[str, bytes]
    check: str
    solution: str


@functools.lru_cache(maxsize=4)
def load_tasks(data_dir: str | Path = DATA_DIR) -> tuple[TerminalTask, ...]:
    """Every task under ``data_dir`` (one directory each), sorted by name; read once per process.

    Raises:
        InvalidArgument: if ``data_dir`` cannot be listed or holds no task, or a task folder lacks a file of
            the layout, cannot read one, or its ``task.json`` is not an object with ``instructions``.
    """
    try:
        directories = sorted(Path(data_dir).iterdir())
    except OSError as error:
        raise InvalidArgument(f"Cannot list the terminal tasks' folder {data_dir}: {error.strerror}.") from None
    tasks = [_load_task(directory) for directory in directories if (directory / "task.json").is_file()]
    if not tasks:
        raise InvalidArgument(f"No terminal task under {data_dir} (expected <name>/task.json, files/, check.sh).")
    return tuple(tasks)


def _load_task(directory: Path) -> TerminalTask:
    """One task folder; a user's ``data_dir`` may hold a broken one, so each failure names the folder and file."""
    layout = "a task folder holds task.json ({\"instructions\": ...}), files/, check.sh and solution.sh"

    def read(name: str) -> str:
        try:
            return (directory / name).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as error:
            raise InvalidArgument(f"Terminal task {directory}: cannot read {name} as UTF-8 text ({error}); {layout}.") from None

    try:
        meta = json.loads(read("task.json"))
    except json.JSONDecodeError as error:
        raise InvalidArgument(f"Terminal task {directory}: task.json is not JSON ({error}); {layout}.") from None
    if not isinstance(meta, dict) or "instructions" not in meta:
        raise InvalidArgument(f"Terminal task {directory}: task.json has no 'instructions' key; {layout}.")
    root = directory / "files"
    try:
        files = {
            path.relative_to(root).as_posix(): path.read_bytes()
            for path in sorted(root.rglob("*")) if path.is_file()
        } if root.is_dir() else {}
    except OSError as error:
        raise InvalidArgument(f"Terminal task {directory}: cannot read files/ ({error}).") from None
    return TerminalTask(
        name=directory.name, instructions=str(meta["instructions"]), files=files,
        check=read("check.sh"), solution=read("solution.sh"),
    )


def extract_command(action: str) -> str | None:
    """The command of the last ```` ```bash ``` ```` (or ``sh``, ``shell``) block in ``action``, stripped; None if
    there is none (or it is empty, or holds a NUL byte, which no command line can carry, or ``action`` is not a str)."""
    if not isinstance(action, str):
        return None
    blocks = _COMMAND_BLOCK.findall(action)
    if not blocks:
        return None
    command = blocks[-1].strip()
    return command if command and "\x00" not in command else None


class TerminalEnv(Env):
    """Shell tasks in a sandbox; see the module docstring.

    Args:
        tasks: names of the shipped tasks to draw from (default: all); each reset draws one from
            :attr:`np_random`. ``reset(options={"task": name})`` picks one instead.
        max_turns: commands per episode, ``submit`` included.
        command_timeout: wall-clock seconds per command (the checker gets the same).
        memory_mb: memory per command (all its processes together).
        max_output_chars: characters of stdout and of stderr shown per observation (head and tail kept).
        max_work_mb: most MiB the working directory may hold (past it the command is stopped and the
            episode ends).
        sandbox: ``"bwrap"`` or ``"process"``; None reads ``$GEM_SANDBOX`` (default bwrap).
        data_dir: a directory of tasks in the shipped layout (default: the shipped tasks).

    Raises:
        InvalidArgument: if a limit is not a number in range (``command_timeout`` finite seconds above 0; the others
            whole numbers, ``max_output_chars`` from 100, ``memory_mb`` from the sandbox's 16, the rest from 1), ``tasks`` is not a list of known tasks,
            or ``data_dir`` is not a folder of tasks in the shipped layout (:func:`load_tasks`).
    """

    max_return = 1.0

    #: The task list is fixed by the constructor; the working directory is a host directory, so a
    #: snapshot carries a copy of its files instead (see :meth:`get_state`).
    state_excludes = frozenset({"tasks", "work_dir", "_work_owner"})

    def __init__(
        self,
        tasks: list[str] | tuple[str, ...] | None = None,
        max_turns: int = 20,
        command_timeout: float = 10.0,
        memory_mb: int = 512,
        max_output_chars: int = 4000,
        max_work_mb: int = 64,
        sandbox: str | None = None,
        data_dir: str | None = None,
    ):
        shipped = load_tasks(data_dir or DATA_DIR)
        if tasks is not None:
            if not isinstance(tasks, (list, tuple)):
                raise InvalidArgument(f"tasks={tasks!r:.80} must be a list of task names, e.g. tasks=[{shipped[0].name!r}].")
            by_name = {task.name: task for task in shipped}
            unknown = sorted(set(tasks) - set(by_name))
            if unknown or not tasks:
                raise InvalidArgument(f"tasks={list(tasks)!r}: unknown or empty; choose from {sorted(by_name)}.")
            shipped = tuple(by_name[name] for name in tasks)
        if check_count("max_output_chars", max_output_chars) < 100:
            raise InvalidArgument(f"max_output_chars={max_output_chars} must be at least 100.")
        self.tasks = shipped
        self.max_turns, self.command_timeout = check_count("max_turns", max_turns), check_amount("command_timeout", command_timeout, "seconds")
        # the sandbox's own rule: a limit below its floor would otherwise fail every command, mid-training
        self.memory_mb, self.max_output_chars = check_memory_mb("memory_mb", memory_mb), max_output_chars
        check_count("max_work_mb", max_work_mb)
        self.sandbox = resolve_mode(sandbox)  # refuses to run without bubblewrap unless process mode is chosen
        self.sandbox_config = SandboxConfig(max_work_mb=max_work_mb)
        #: A command and the checker each take at most their timeout, plus a sandbox's start-up.
        self.max_step_seconds = self.command_timeout + 5.0
        self.task: TerminalTask | None = None
        self.turn = 0
        self.work_dir: WorkDir | None = None
        self._work_owner: int | None = None

    # ------------------------------------------------------------------ episode

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
        super().reset(seed=seed)
        index = int(self.np_random.integers(len(self.tasks)))
        if options and "task" in options:
            names = [task.name for task in self.tasks]
            if options["task"] not in names:
                raise InvalidArgument(f"options['task']={options['task']!r} is not one of {names}.")
            index = names.index(options["task"])
        self.task, self.turn = self.tasks[index], 0
        self._new_work_dir({name: (0o644, data) for name, data in self.task.files.items()})
        listing = ", ".join(sorted(self.task.files)) or "(empty)"
        observation = (
            f"You are in a shell, in the directory /workspace (files: {listing}). Task: {self.task.instructions}\n"
            f"{ACTION_HINT} You have {self.max_turns} commands; each may run {self.command_timeout:g} s. "
            "There is no network; files you write in /workspace stay until the episode ends."
        )
        return observation, {"task": self.task.name}

    def step(self, action: str) -> StepResult:
        if self.task is None or self.work_dir is None:
            raise ResetNeeded("Call reset() before step().")
        self.turn += 1
        out_of_turns = self.turn >= self.max_turns
        command = extract_command(action)
        if command is None:
            return self.invalid_action(
                f"No command found. {ACTION_HINT} Commands left: {self.max_turns - self.turn}.", truncated=out_of_turns
            )
        if command == SUBMIT:
            return self._submit()
        result = self._run(command)
        observation = self._describe(result)
        if result.limit == "disk":
            return observation + "\nThe working directory is full: the episode ends.", 0.0, True, False, {"success": False, "limit": "disk"}
        info = {"exit_code": result.exit_code, "limit": result.limit}
        if out_of_turns:
            return observation + "\nOut of commands: the task was not submitted.", 0.0, False, True, {**info, "success": False}
        return observation + f"\n(commands left: {self.max_turns - self.turn})", 0.0, False, False, info

    def _submit(self) -> StepResult:
        """Run the checker on a copy of the working directory that holds no link (:mod:`.checker_view`)."""
        task, work_dir = self._episode()
        try:
            cap = self.sandbox_config.max_work_mb * MIB
            files = checker_files(_read_tree(work_dir.path, cap), cap)
        except (OSError, ValueError) as error:  # a path too long to copy, files past the cap, a file the host cannot read
            return f"Submitted: the working directory cannot be checked ({error}).", 0.0, True, False, {"success": False}
        checked = _work_dir_with(files)
        try:
            result = run_shell(
                task.check, checked, timeout=self.command_timeout, memory_mb=self.memory_mb,
                mode=self.sandbox, config=self.sandbox_config,
            )
        finally:
            checked.close()
        passed = result.ok
        verdict = "passed" if passed else "failed"
        return (
            f"Submitted: the checker {verdict}.",
            1.0 if passed else 0.0,
            True,
            False,
            {"success": passed, "checker_exit_code": result.exit_code, "checker_limit": result.limit},
        )

    def _episode(self) -> tuple[TerminalTask, WorkDir]:
        """This episode's task and working directory; :class:`ResetNeeded` before the first ``reset()``."""
        if self.task is None or self.work_dir is None:
            raise ResetNeeded("Call reset() before step().")
        return self.task, self.work_dir

    def _run(self, command: str) -> SandboxResult:
        return run_shell(
            command, self._episode()[1], timeout=self.command_timeout, memory_mb=self.memory_mb,
            mode=self.sandbox, config=self.sandbox_config,
        )

    def _describe(self, result: SandboxResult) -> str:
        if result.limit is not None:
            stopped = {"time": f"it ran longer than {self.command_timeout:g} s"}.get(result.limit, f"it hit the {result.limit} limit")
            head = f"The command was stopped: {stopped}."
        else:
            head = f"Exit code: {result.exit_code}"
        parts = [head]
        for name, text in (("stdout", result.stdout), ("stderr", result.stderr)):
            if text:
                parts.append(f"{name}:\n{self._shorten(text)}")
        return "\n".join(parts)

    def _shorten(self, text: str) -> str:
        if len(text) <= self.max_output_chars:
            return text.rstrip("\n")
        keep = self.max_output_chars // 2
        return f"{text[:keep]}\n... [{len(text) - 2 * keep} characters cut] ...\n{text[-keep:]}".rstrip("\n")

    def sample_random_action(self) -> str:
        """A harmless, well-formed command about the task's files (never ``submit``)."""
        names = sorted(self.task.files) if self.task is not None and self.task.files else ["missing.txt"]
        name = names[int(self.np_random.integers(len(names)))]
        commands = [
            "ls", "pwd", f"cat {name}", f"wc -l {name}", f"head -n 3 {name}", f"sort {name} | head -n 5",
            "echo note >> notes.log && cat notes.log", f"cp {name} copy.txt && ls", "ls -R | head -n 20",
        ]
        return f"```bash\n{commands[int(self.np_random.integers(len(commands)))]}\n```"

    def render(self) -> str:
        name = self.task.name if self.task else "-"
        return f"Terminal task {name}, command {self.turn}/{self.max_turns}, directory {self.work_dir}"

    # ------------------------------------------------------------------ working directory

    def _new_work_dir(self, files: Mapping[str, tuple[int, bytes | str | None]]) -> None:
        """Replace this env's working directory by a fresh one holding ``files``
        (path -> (mode, bytes for a file, None for a directory, str: a symbolic link's target))."""
        self._close_work_dir()
        self.work_dir, self._work_owner = _work_dir_with(files), id(self)

    def _close_work_dir(self) -> None:
        # A spawned copy shares its original's directory until set_state gives it its own: only the env
        # that created a directory deletes it.
        work, owned = self.work_dir, self._work_owner == id(self)
        self.work_dir, self._work_owner = None, None
        if work is not None and owned and not work.closed:
            work.close()

    def _snapshot_files(self) -> dict[str, tuple[int, bytes | str | None]] | None:
        """The working directory's files, directories and symbolic links (never followed); no command
        runs while it is read, so nothing changes underneath."""
        if self.work_dir is None or self.work_dir.closed:
            return None
        return _read_tree(self.work_dir.path, self.sandbox_config.max_work_mb * MIB)

    def get_state(self) -> dict[str, Any]:
        """The episode so far, with a copy of the working directory's files (modes and links kept;
        owners, timestamps, FIFOs and sockets are not).

        Raises:
            ValueError: a path in the working directory is longer than :data:`MAX_SNAPSHOT_PATH` characters
                (a copy could not recreate it), or its files hold more than ``max_work_mb`` counted at their
                size (sparse files too); the episode itself goes on.
        """
        state = super().get_state()
        state["work_files"] = self._snapshot_files()
        return state

    def set_state(self, state: dict[str, Any]) -> None:
        """Continue from :meth:`get_state`: in a new working directory holding the snapshot's files."""
        super().set_state(state)
        files = state.get("work_files")
        if files is None:
            self._close_work_dir()
        else:
            self._new_work_dir(files)

    def close(self) -> None:
        """Delete the working directory."""
        self._close_work_dir()
        super().close()


def _work_dir_with(files: Mapping[str, tuple[int, bytes | str | None]]) -> WorkDir:
    """A fresh working directory holding ``files`` (path -> (mode, bytes for a file, None for a
    directory, str: a symbolic link's target)), owned by its own uid when the host is root."""
    work = WorkDir()
    try:
        for relative, (mode, content) in sorted(files.items()):
            path = os.path.join(work.path, relative)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            if content is None:
                os.makedirs(path, exist_ok=True)
                os.chmod(path, mode)
            elif isinstance(content, str):
                os.symlink(content, path)
            else:
                with open(path, "wb") as file:
                    file.write(content)
                os.chmod(path, mode)
        work.chown_tree()
    except BaseException:
        work.close()
        raise
    return work


def _read_tree(root: str, max_bytes: int) -> dict[str, tuple[int, bytes | str | None]]:
    """What lies under ``root``: relative path -> (mode, content), walked with a list of directories to
    visit rather than recursion, so a tree of any depth is read (or refused, see below) without
    exhausting the interpreter's stack. What a command made unreadable to its owner (``chmod 000``) is
    read with the owner's permission added for the walk, then set back. Files are read up to ``max_bytes``
    together (the working directory's cap), counted at their size: a sparse file holds no block, so the
    sampled cap can miss it, and read whole (then written out whole for the checker) it cost the host its size.

    Raises:
        ValueError: a path longer than :data:`MAX_SNAPSHOT_PATH` characters, or files of more than
            ``max_bytes`` together.
    """
    found: dict[str, tuple[int, bytes | str | None]] = {}
    left = max_bytes  # bytes the files read may still hold
    opened: list[tuple[str, int]] = []  # directories given u+rx for the walk, with their modes
    pending = [""]
    try:
        while pending:
            relative = pending.pop()
            directory = os.path.join(root, relative)
            mode = stat.S_IMODE(os.lstat(directory).st_mode)
            if os.geteuid() != 0 and mode & 0o500 != 0o500:
                os.chmod(directory, mode | 0o500)
                opened.append((directory, mode))
            for name in sorted(os.listdir(directory)):
                path, key = os.path.join(directory, name), os.path.join(relative, name)
                if len(key) > MAX_SNAPSHOT_PATH:
                    raise InvalidArgument(
                        f"The working directory holds a path of {len(key)}+ characters ({key[:80]}...), too long to "
                        f"snapshot: get_state() keeps paths up to {MAX_SNAPSHOT_PATH} characters, which a copy can "
                        "recreate. The episode can go on (and reset() deletes the tree); take no snapshot of it."
                    )
                info = os.lstat(path)
                mode = stat.S_IMODE(info.st_mode)
                if stat.S_ISLNK(info.st_mode):
                    found[key] = (mode, os.readlink(path))
                elif stat.S_ISDIR(info.st_mode):
                    found[key] = (mode, None)
                    pending.append(key)
                elif stat.S_ISREG(info.st_mode):
                    if info.st_size > left:
                        raise _too_large(max_bytes)
                    with _owner_may(path, 0o400):
                        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
                    with os.fdopen(fd, "rb") as file:
                        data = file.read(left + 1)
                    left -= len(data)
                    if left < 0:
                        raise _too_large(max_bytes)
                    found[key] = (mode, data)
                # anything else (a FIFO, a socket) is not kept
    finally:
        for directory, mode in reversed(opened):  # deepest first: its parents are still passable
            os.chmod(directory, mode)
    return found


def _too_large(max_bytes: int) -> InvalidArgument:
    return InvalidArgument(
        f"The working directory's files hold more than its cap of {max_bytes / MIB:g} MiB (counted at their size: a "
        "sparse file counts whole), too large to copy for the checker or a snapshot."
    )


@contextlib.contextmanager
def _owner_may(path: str, bits: int) -> Iterator[None]:
    """Run the block with ``bits`` added to ``path``'s mode if the host lacks them (not root), then
    restore the mode."""
    mode = stat.S_IMODE(os.lstat(path).st_mode)
    if os.geteuid() == 0 or mode & bits == bits:
        yield
        return
    os.chmod(path, mode | bits)
    try:
        yield
    finally:
        os.chmod(path, mode)
