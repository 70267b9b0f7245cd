"""An agent program run as a subprocess against one task: one episode of an :class:`AgentEndpoint`.

The program is any command (mini-swe-agent, a script using the OpenAI client) that reads the standard
variables: ``OPENAI_BASE_URL`` (also ``OPENAI_API_BASE`` for older clients) points at the endpoint and
``OPENAI_API_KEY`` is the episode's key, so every call it makes is recorded in its own episode. It runs
in a fresh temporary working directory, removed once the run is graded (or in the one given, which is
left as it is), under two limits:

- ``time_limit``: past it the agent is killed with every process it started (below) and the episode is
  truncated (a hung agent); they are killed too if the trainer dies first, however it dies, and the run's
  temporary folders removed (:mod:`~gem_core.agent.orphan_guard`);
- ``max_turns``: the call after the last allowed one is refused (409), the agent is killed and the episode
  is truncated; ``max_response_tokens`` likewise once a branch's response is full (each call samples at most
  what is left).

An agent that exits on its own, early or not, ends the episode (terminated, its exit code in
:attr:`AgentRun.exit_code`), and what it left running is killed with it. Of its output the run keeps the
last 8 KiB of each stream (:attr:`AgentRun.stdout_tail`, :attr:`AgentRun.stderr_tail`).

What "every process it started" holds depends on the machine. Where bubblewrap can make a PID namespace (as
root, or with unprivileged user namespaces; tried once per process), the agent runs in one of its own, under a
``bwrap`` process that is its process group's leader: whatever it starts, in a session of its own (setsid) or
not, its parent gone or not, ends with the namespace's init, which ends with the group. Inside it sees its own
processes only (a ``/proc`` of its own; pids are the namespace's), its files as they are (``/`` is bound whole),
and no program gains privileges (bubblewrap sets no_new_privs: ``sudo`` and setuid programs cannot), and an
agent killed by signal N exits with status 128+N. Elsewhere the agent runs in a session of its own, and at its
end the run kills that process group and every process descended from the agent or from a member of its group
(through ``/proc``): a process that left the group (setsid) and whose parent ended before the agent's end is
out of reach.

The reward comes from ``grader(run)`` once the process is gone (e.g. a task's tests run in
:attr:`AgentRun.workdir`); without a grader, from the number the agent wrote to ``$GEM_REWARD_FILE``: at most
100 bytes of a regular file, read through no link and without waiting (the agent owns the file and its folder,
and may have made it a FIFO or a link to ``/dev/zero``). Anything else is 0.0, and ``info["reward_file"]``
says why (none written, not a regular file, not a finite number).

The task reaches the agent as JSON, when it serializes: always as the file ``$GEM_TASK_FILE``, and as
``$GEM_TASK`` where a variable can hold it (Linux holds 128 KiB in one; here at most 120 KiB once encoded). A
task that needs its working directory filled first (a repository to fix) gives ``setup(task, workdir)``, run
before the program starts; the :class:`TaskSetup` it returns carries the task's text for the agent (the UTF-8
file ``$GEM_TASK_PROMPT_FILE``, and ``$GEM_TASK_PROMPT`` where a variable can hold it, as for the task) and
whatever the grader needs (:attr:`AgentRun.setup`).
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import functools
import json
import math
import numbers
import os
import re
import select
import shutil
import stat
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gem_core.agent.episode import AgentEpisode
from gem_core.agent.orphan_guard import OrphanGuard, end_process_tree, remove_path
from gem_core.errors import GemError, InvalidArgument, InvalidArgumentType, refuse_unknown_keywords
from gem_core.rollout.options import check_episode_options
from gem_core.rollout.trajectory import TokenTrajectory

__all__ = ["AgentCommand", "AgentProgram", "AgentRun", "Grader", "TaskSetup", "TaskSetupFn"]

AgentCommand = Sequence[str] | Callable[[Any], Sequence[str]]
"""The command to run for a task: a fixed argument list, or a function of the task that returns one."""
Grader = Callable[["AgentRun"], float]
"""The reward of a finished run (called after the process is gone; ``run.workdir`` holds what the agent left).
It may add the task's verdict to ``run.info`` (e.g. ``{"success": True}``), which ends up in the trajectory's last info.
"""


@dataclass
class TaskSetup:
    """What :attr:`AgentProgram.setup` made of a task: its text for the agent and its grader's data.

    Raises:
        InvalidArgumentType: ``prompt`` is not a str or None (it failed only once handed to the agent, unnamed).
    """

    prompt: str | None = None
    """The task as the agent reads it (``$GEM_TASK_PROMPT``, ``$GEM_TASK_PROMPT_FILE``); None: none given."""
    data: Any = None
    """Anything the grader needs (the pristine tree, the tests); the setup and the grader agree on it."""

    def __post_init__(self) -> None:
        _check_prompt(self.prompt, "TaskSetup")


def _check_prompt(prompt: Any, owner: str) -> None:
    if prompt is not None and not isinstance(prompt, str):
        raise InvalidArgumentType(f"{owner} prompt={prompt!r:.80} must be the task's text for the agent (a str), or None.")


def _arguments(argv: Any, what: str, fix: str = "give") -> list[str]:
    """``argv`` as the program's arguments, each a str or a path (what ``subprocess`` takes); ``what`` names it.

    Raises:
        InvalidArgument: ``argv`` is a string (its characters are not its arguments), not a list, or holds
            something else (None, a number).
    """
    if isinstance(argv, (str, bytes)) or not isinstance(argv, Sequence) or not all(isinstance(a, (str, os.PathLike)) for a in argv):
        raise InvalidArgument(f"{what}, not the program and its arguments; {fix} a list of arguments (str or paths), e.g. "
                              "['python', 'agent.py'] (or shlex.split of a command line).")
    return [os.fspath(a) if isinstance(a, os.PathLike) else a for a in argv]


TaskSetupFn = Callable[[Any, Path], TaskSetup | None]
"""Fills a fresh working directory for a task before the program starts (e.g. copies a repository into it)."""

_TAIL_BYTES = 8192
_ORPHAN_GUARD = OrphanGuard()  # one guard process for every run of this process
_SURROGATE = re.compile("[\ud800-\udfff]")  # no UTF-8 for these: a str that holds one was cut mid-pair
_POLL_SECONDS = 0.05
_REWARD_BYTES = 100  # of $GEM_REWARD_FILE: a number, and room for whitespace
_VARIABLE_BYTES = 120 * 1024  # Linux holds 128 KiB in one variable (MAX_ARG_STRLEN, with its name): some room left
# bwrap's arguments for a PID namespace of the agent's own, its files as they are (the run adds its io folder).
_PID_NAMESPACE = ("--dev-bind", "/", "/", "--unshare-pid", "--proc", "/proc", "--die-with-parent")
_PROBE_LOCK = threading.Lock()


@dataclass
class AgentRun:
    """One finished agent episode."""

    key: str
    task: Any
    workdir: Path
    """Where the program ran; a temporary one made by :meth:`AgentProgram.run` is gone once it returns
    (the grader reads it before that)."""
    episode: AgentEpisode
    exit_code: int | None
    """The program's exit status; None when it was killed at a limit."""
    ended: str
    """Why the episode ended (the agent exited, the time limit, the turn limit)."""
    truncated: bool
    seconds: float
    stdout_tail: str = ""
    stderr_tail: str = ""
    reward: float = 0.0
    setup: TaskSetup = field(default_factory=TaskSetup)
    """What the program's ``setup`` returned for this task (empty without one)."""
    info: dict[str, Any] = field(default_factory=dict)
    """The grader's verdict beside the reward (e.g. ``success``); without a grader, ``reward_file`` says why the agent's
    file gave no reward, if it gave none. Merged into the trajectory's last info."""
    trajectories: list[TokenTrajectory] = field(default_factory=list)
    """One per branch (see :class:`~gem_core.agent.episode.AgentEpisode`); the reward is on the last call's branch."""


class _OutputTails:
    """The last ``_TAIL_BYTES`` of the program's stdout and stderr, read from their pipes as they come: all a run keeps
    of them. Written to files whole, an agent that printed without end filled the disk (2.7 GB in 5 s, against the
    600 s time limit); through a pipe it can write no faster than this reads. Waited on with ``poll``, not ``select``,
    which refuses descriptors past 1023 (hundreds of runs in one trainer reach them)."""

    def __init__(self, process: subprocess.Popen):
        pipes = [process.stdout, process.stderr]
        self._open = {pipe.fileno(): pipe for pipe in pipes if pipe is not None}
        self._tails = {fd: bytearray() for fd in self._open}  # stdout's, then stderr's
        self._poll = select.poll()
        for fd in self._open:
            self._poll.register(fd, select.POLLIN)

    def drain(self, timeout: float) -> None:
        """Read what the pipes hold, waiting up to ``timeout`` seconds for some."""
        if not self._open:
            time.sleep(timeout)
            return
        for fd, _ in self._poll.poll(timeout * 1000):
            chunk = os.read(fd, 1 << 16)
            if not chunk:  # every writer is gone
                self._poll.unregister(fd)
                self._open.pop(fd).close()
                continue
            tail = self._tails[fd]
            tail += chunk
            del tail[:-_TAIL_BYTES]

    def finish(self, within: float = 1.0) -> tuple[str, str]:
        """Read to the end (for at most ``within`` seconds: a process that left the group may hold a pipe open),
        close the pipes, and return the tails as text ``(stdout, stderr)``."""
        deadline = time.monotonic() + within
        while self._open and time.monotonic() < deadline:
            self.drain(max(0.0, deadline - time.monotonic()))
        for pipe in self._open.values():
            pipe.close()
        self._open.clear()
        stdout, stderr = (bytes(tail).decode("utf-8", "replace") for tail in self._tails.values())
        return stdout, stderr


def _reward_from_file(folder: Path) -> tuple[float, str | None]:
    """The number the agent wrote to ``$GEM_REWARD_FILE`` (``reward`` in ``folder``) and None, or 0.0 and why there is
    none. The agent owns the file and its folder: a FIFO there held the trainer's thread for good, and a link to
    /dev/zero was read until memory ran out. So: a regular file, reached through no link, opened without waiting,
    and at most ``_REWARD_BYTES`` of it."""
    flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
    try:
        directory = os.open(folder, flags | os.O_DIRECTORY)
        try:
            fd = os.open("reward", flags, dir_fd=directory)
        finally:
            os.close(directory)
    except FileNotFoundError:
        return 0.0, "the agent wrote none"
    except OSError as error:
        return 0.0, "a symbolic link, not followed" if error.errno == errno.ELOOP else f"unreadable: {error.strerror}"
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return 0.0, "not a regular file (a FIFO, a device or a folder)"
        data = os.read(fd, _REWARD_BYTES + 1)
    except OSError as error:
        return 0.0, f"unreadable: {error.strerror}"
    finally:
        os.close(fd)
    if len(data) > _REWARD_BYTES:
        return 0.0, f"over {_REWARD_BYTES} bytes: not one number"
    try:
        value = float(data)
    except ValueError:
        return 0.0, f"{data.decode(errors='replace')[:40]!r} is not a number"
    return (value, None) if math.isfinite(value) else (0.0, f"{value} is not a finite number")


@dataclass
class AgentProgram:
    """How to run an agent program for one task (see the module docstring).

    Raises:
        InvalidArgument: a field breaks its rule; the message names it and what to give.
        InvalidArgumentType: ``grader`` or ``setup`` is not callable, or a keyword is not a field (naming the closest).
    """

    command: AgentCommand
    """The program and its arguments, or a function of the task returning them."""
    time_limit: float = 600.0
    """Seconds the program may run; then its process group is killed and the episode truncated."""
    max_turns: int | None = None
    """Calls the program may make; the next one is refused and the episode truncated (None: no limit)."""
    max_response_tokens: int | None = None
    """Response ids (sampled and template) a branch may hold; each call samples at most what is left, and a
    call with nothing left is refused and the episode truncated, as for ``max_turns`` (None: no limit)."""
    grader: Grader | None = None
    """The run's reward, after the program is gone (None: the number in ``$GEM_REWARD_FILE``, else 0.0)."""
    env: dict[str, str] = field(default_factory=dict)
    """Extra environment variables for the program (the endpoint's variables win)."""
    setup: TaskSetupFn | None = None
    """Fills the working directory for a task before the program starts and returns its :class:`TaskSetup`
    (None: the program starts in an empty directory, with no ``$GEM_TASK_PROMPT``)."""

    def __new__(cls, *args: Any, **kwargs: Any) -> AgentProgram:
        refuse_unknown_keywords(cls, kwargs)
        return super().__new__(cls)

    def __post_init__(self) -> None:
        """Check the fields here, not at each run: a run of many tasks raised one TypeError per task (a grader that is
        not a function, once each agent had run), or took a command string for its characters (``"python agent.py"``
        ran ``['p', 'y', ...]``).

        Raises:
            InvalidArgument: a field breaks its rule; the message names it and what to give.
            InvalidArgumentType: ``grader`` or ``setup`` is not callable.
        """
        for name, what in (("grader", "of the finished run returning its reward"), ("setup", "of the task and the working directory")):
            if getattr(self, name) is not None and not callable(getattr(self, name)):
                raise InvalidArgumentType(f"AgentProgram {name}={getattr(self, name)!r} must be a function {what}, or None.")
        if isinstance(self.command, (str, bytes)) or not (callable(self.command) or isinstance(self.command, Sequence)):
            raise InvalidArgument(
                f"AgentProgram command={self.command!r} must be the program and its arguments as a list, e.g. "
                "['python', 'agent.py'] (or shlex.split of a command line), or a function of the task returning one."
            )
        if not callable(self.command):
            _arguments(self.command, f"AgentProgram command={self.command!r:.200}")
        if isinstance(self.time_limit, bool) or not isinstance(self.time_limit, numbers.Real) or not 0 < self.time_limit < math.inf:
            raise InvalidArgument(f"AgentProgram time_limit={self.time_limit!r} must be a positive number of seconds.")
        check_episode_options("AgentProgram", max_turns=self.max_turns, max_response_tokens=self.max_response_tokens)
        for name, value in (self.env.items() if isinstance(self.env, Mapping) else [(None, self.env)]):
            if not isinstance(name, str) or not name or "=" in name or not isinstance(value, str):
                raise InvalidArgument(
                    f"AgentProgram env: {name!r}: {value!r} is not an environment variable; env must map names (no '=', "
                    "not empty) to str values, e.g. {'DEBUG': '1'}."
                )

    def run(
        self, endpoint: Any, task: Any = None, *, workdir: str | Path | None = None,
        on_exit: Callable[[AgentEpisode], None] | None = None
    ) -> AgentRun:
        """Run the program for ``task`` against ``endpoint`` (a started :class:`AgentEndpoint`) and grade it.

        Args:
            endpoint: the endpoint whose policy answers the program's calls.
            task: handed to ``command`` (when callable) and to the grader; also in ``$GEM_TASK`` as JSON
                when it serializes.
            workdir: the program's working directory, never removed (None: a fresh temporary one, removed
                once the grader has read it, also when the program, its setup or the grader failed).
            on_exit: called with the closed episode once the program is gone, before grading (a batching
                policy is told there that this episode asks for nothing more, so a slow grader holds no round).

        Raises:
            GemError: if the program's command is empty, or cannot be started (not found, not executable, its
                arguments and environment over the system's limit); if the episode ended during the setup (its batch
                was cancelled: the program is not started); if the grader returned anything but a finite number
                (None, a bool, text: ``"0.7"`` is not taken as 0.7), naming the grader.
            InvalidArgument: if a callable ``command`` returned anything but a list of arguments (str or paths).
            InvalidArgumentType: if ``setup`` returned anything but a :class:`TaskSetup` (with a str or None prompt)
                or None.
            UsageError: ``endpoint`` is not serving (never started, or stopped): raised before the setup runs.
            KeyboardInterrupt: as it came; the program's process group is killed and its episode closed first.
        """
        if callable(self.command):
            made = self.command(task)
            argv = _arguments(made, f"AgentProgram command returned {made!r:.200} for task {task!r:.80}", "return")
        else:
            argv = _arguments(self.command, f"AgentProgram command={self.command!r:.200}")
        if not argv:
            raise GemError("AgentProgram command is empty; give the program and its arguments, e.g. ['python', 'agent.py']")
        if workdir is not None:
            return self._run_in(Path(workdir), argv, endpoint, task, on_exit)
        with _temporary_folder("gem-agent-") as temporary:
            return self._run_in(temporary, argv, endpoint, task, on_exit)

    def _run_in(
        self, workdir: Path, argv: list[str], endpoint: Any, task: Any, on_exit: Callable[[AgentEpisode], None] | None
    ) -> AgentRun:
        with _temporary_folder("gem-agent-io-") as io:
            # Opened before the setup: an endpoint that is not serving is refused before a slow setup runs, and a batch
            # cancelled during the setup ends the episode, so the program is never started (to run to its time limit).
            episode = endpoint.open_episode(max_turns=self.max_turns, max_response_tokens=self.max_response_tokens)
            try:
                setup = self._task_setup(task, workdir)
                if episode.ended is not None:
                    raise GemError(f"the episode of task {task!r:.80} ended during its setup ({episode.ended}); its program was not started")
                environment = {**os.environ, **self.env, "OPENAI_BASE_URL": endpoint.base_url, "OPENAI_API_BASE": endpoint.base_url,
                               "OPENAI_API_KEY": episode.key, "GEM_EPISODE_KEY": episode.key, "GEM_REWARD_FILE": str(io / "reward")}
                if setup.prompt is not None:
                    _hand_over(setup.prompt, io / "prompt", "GEM_TASK_PROMPT", environment)
                try:
                    _hand_over(json.dumps(task), io / "task.json", "GEM_TASK", environment)
                except (TypeError, ValueError):
                    pass
                started = time.monotonic()
                process = _start(argv, workdir, environment, io)
                output = _OutputTails(process)
                try:
                    exit_code, ended, truncated = self._wait(process, episode, started, output)
                except BaseException:  # Ctrl-C: the agent's session is its own, so the signal never reached it
                    _kill(process)
                    raise
                finally:
                    stdout_tail, stderr_tail = output.finish()
            except BaseException as exc:  # the program never ran, or was cut off: no call may come for its episode
                if episode.key in endpoint.episodes:
                    endpoint.close_episode(episode.key, f"the run failed: {type(exc).__name__}", truncated=True)
                raise
            seconds = time.monotonic() - started
            endpoint.close_episode(episode.key, ended, truncated=truncated)
            if on_exit is not None:
                on_exit(episode)
            run = AgentRun(
                key=episode.key, task=task, workdir=workdir, episode=episode, exit_code=exit_code,
                ended=episode.ended or ended, truncated=episode.truncated, seconds=seconds,
                stdout_tail=stdout_tail, stderr_tail=stderr_tail, setup=setup,
            )
            if self.grader is not None:
                run.reward = self._grade(run)
            else:
                run.reward, why = _reward_from_file(io)
                if why is not None:
                    run.info["reward_file"] = why
        run.trajectories = episode.trajectories(run.reward)
        return run

    def _task_setup(self, task: Any, workdir: Path) -> TaskSetup:
        """What ``setup`` made of ``task``: a :class:`TaskSetup`, or an empty one for None (anything else failed late,
        as an AttributeError or TypeError naming neither the setup nor its prompt)."""
        made = self.setup(task, workdir) if self.setup is not None else None
        if made is None:
            return TaskSetup()
        if not isinstance(made, TaskSetup):
            raise InvalidArgumentType(f"AgentProgram setup {_name(self.setup)} returned {made!r:.80} for task {task!r:.80}; "
                                      "return a TaskSetup(prompt=..., data=...), or None.")
        _check_prompt(made.prompt, f"AgentProgram setup {_name(self.setup)} returned a TaskSetup whose")
        return made

    def _grade(self, run: AgentRun) -> float:
        """The grader's reward for ``run``: a real number, finite (float() took None or "yes" as a raw error, and the
        text "0.7" as a reward)."""
        value = self.grader(run) if self.grader is not None else None
        if isinstance(value, bool) or not isinstance(value, numbers.Real) or not math.isfinite(value):
            raise GemError(f"AgentProgram grader {_name(self.grader)} returned {value!r:.80} for episode {run.key!r}; a grader "
                           "returns the reward as a finite number (an int or a float).")
        return float(value)

    async def arun(self, endpoint: Any, task: Any = None, *, workdir: str | Path | None = None) -> AgentRun:
        """:meth:`run` off the event loop, so many agents run at once (on the loop's default executor, which
        bounds how many; :func:`~gem_core.agent.episodes.run_agent_episodes` gives every run a thread)."""
        return await asyncio.to_thread(self.run, endpoint, task, workdir=workdir)

    def _wait(self, process: subprocess.Popen, episode: AgentEpisode, started: float, output: _OutputTails) -> tuple[int | None, str, bool]:
        """(exit code, why the episode ended, truncated), killing the process group at a limit, and once the agent
        exits: what it left running (a server, a shell) ends with its episode."""
        while True:
            if os.waitid(os.P_PID, process.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None:
                _kill(process)  # not reaped till then: the group's id cannot have gone to another process
                return process.returncode, f"the agent exited with status {process.returncode}", False
            if episode.ended is not None:  # the turn limit (the endpoint refused a call)
                _kill(process)
                return None, episode.ended, True
            if time.monotonic() - started > self.time_limit:
                _kill(process)
                return None, f"time limit of {self.time_limit:g} s reached", True
            output.drain(_POLL_SECONDS)


@contextlib.contextmanager
def _temporary_folder(prefix: str) -> Iterator[Path]:
    """A fresh folder for a run, removed after it however it ended, and by the orphan guard if this process dies
    first: nobody else knows of it, so a run that leaves it behind leaves it forever. The agent may have replaced it
    by a link or a file: the removal follows no link and raises nothing, and the run's result never waits on it."""
    path = tempfile.mkdtemp(prefix=prefix)
    _ORPHAN_GUARD.watch_path(path)
    try:
        yield Path(path)
    finally:
        remove_path(path)
        _ORPHAN_GUARD.release_path(path)


def _name(function: Any) -> str:
    return getattr(function, "__qualname__", None) or repr(function)


def _hand_over(text: str, path: Path, name: str, environment: dict[str, str]) -> None:
    """Hand ``text`` over to the agent: always as the UTF-8 file ``${name}_FILE``, and as ``$name`` where a variable can
    hold it: at most ``_VARIABLE_BYTES`` once encoded (Linux's limit is bytes: 50,000 CJK characters are 150 KB, and
    a task over it made the run unstartable), no NUL, encodable in the locale's file system encoding.

    Task text comes from datasets: a lone surrogate (a string cut mid-pair) is written as U+FFFD, as a JSON reader
    would give it."""
    text = _SURROGATE.sub("\ufffd", text)
    path.write_text(text, encoding="utf-8")
    environment[f"{name}_FILE"] = str(path)
    environment.pop(name, None)  # not this process's own, if it has one
    try:
        encoded = os.fsencode(text)
    except UnicodeEncodeError:
        return
    if len(encoded) <= _VARIABLE_BYTES and b"\x00" not in encoded:
        environment[name] = text


def _pid_namespace_bwrap() -> str | None:
    """bubblewrap's path, where it can run a program in a PID namespace of its own here, else None. Tried once per
    process (under a lock: a batch's runs all start at once), with the arguments a run gives it: a container may
    forbid the namespaces or a fresh ``/proc``."""
    with _PROBE_LOCK:
        return _try_pid_namespace()


@functools.cache
def _try_pid_namespace() -> str | None:
    bwrap = shutil.which("bwrap")
    if bwrap is None:
        return None
    folder = tempfile.gettempdir()
    try:
        tried = subprocess.run([bwrap, *_PID_NAMESPACE, "--bind", folder, folder, "--", sys.executable, "-S", "-c", ""],
                               stdin=subprocess.DEVNULL, capture_output=True, timeout=60)
    except (OSError, subprocess.SubprocessError):
        return None
    return bwrap if tried.returncode == 0 else None


def _executable(program: str, workdir: Path, environment: dict[str, str]) -> bool:
    """Whether ``program`` is a file that can be executed, looked for as the kernel would from ``workdir`` (on the
    environment's ``PATH`` unless it names a folder)."""
    candidates = [program] if os.path.dirname(program) else [os.path.join(d, program) for d in os.get_exec_path(environment)]
    return any(os.path.isfile(path) and os.access(path, os.X_OK) for path in (os.path.join(workdir, c) for c in candidates))


def _start(argv: list[str], workdir: Path, environment: dict[str, str], io: Path) -> subprocess.Popen:
    """Start the program in a session of its own (in a PID namespace of its own where there can be one, see the module
    docstring), so that a limit kills the agent and every process it started, and tell the orphan guard, which kills
    them if this process dies first; its output goes to pipes (:class:`_OutputTails`). In the namespace its io folder
    is a mount point, which the agent cannot rename or remove (short of unmounting it, as root).

    Raises:
        GemError: the program cannot be started (not found, not executable, a bad working directory, its arguments
            and environment over the system's limit).
    """
    command = argv
    bwrap = _pid_namespace_bwrap()
    if bwrap is not None:
        # bubblewrap tells a program it cannot run only by its own exit status 1: checked here, as exec would
        if not _executable(argv[0], workdir, environment):
            raise GemError(f"AgentProgram could not start {argv!r}: {argv[0]!r} is not an executable file here. Give a "
                           "command that exists here (an absolute path, or a program on PATH).")
        command = [bwrap, *_PID_NAMESPACE, "--bind", str(io), str(io), "--", *argv]
    try:
        process = subprocess.Popen(command, cwd=workdir, env=environment, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                   stderr=subprocess.PIPE, start_new_session=True)
    except OSError as exc:
        if exc.errno == errno.E2BIG:
            raise GemError(
                f"AgentProgram could not start {argv[0][:200]!r}: its arguments and environment are over the system's limit "
                f"({exc.strerror}: Linux holds 128 KiB in one argument or variable, {os.sysconf('SC_ARG_MAX')} bytes in "
                "all). Pass what is large in a file (the task and its text are in $GEM_TASK_FILE and $GEM_TASK_PROMPT_FILE)."
            ) from None
        raise GemError(f"AgentProgram could not start {argv!r}: {exc}. Give a command that exists here (an absolute "
                       "path, or a program on PATH).") from None
    except ValueError as exc:  # a NUL in an argument or in one of AgentProgram.env's values
        raise GemError(f"AgentProgram could not start {argv!r}: {exc}. Give arguments and env values without NUL characters.") from None
    _ORPHAN_GUARD.watch(process.pid)
    return process


def _kill(process: subprocess.Popen) -> None:
    end_process_tree(process.pid)  # not reaped till then: its pid and group id cannot have gone to another process
    _ORPHAN_GUARD.release(process.pid)
    process.wait()
