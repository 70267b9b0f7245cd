"""Software-engineering tasks: fix a real bug in a real Python package, graded by the package's own tests.

Each episode starts from one task of the pack (:mod:`.pack`): the package's source at a pinned
version with one injected bug, copied into a fresh working directory. The first observation is the
issue a user wrote about the bug and the repository's layout. Each turn is one tool call in the policy
model's native format (``call_format``, Qwen/Hermes ``<tool_call>{...}</tool_call>`` by default):

- ``bash(command)``: a shell command in the sandbox (no network, the repository as the working
  directory ``/workspace``, the sandbox's limits; the interpreter that has pytest first on ``PATH``);
- ``view(path, start?, end?)``: a file's numbered lines, or a folder's entries;
- ``replace(path, old, new)``: replace the one occurrence of ``old`` in a file (none or several: an error);
- ``run_tests(tests?)``: the package's tests (or the given test files/ids) with pytest, in the sandbox;
- ``submit()``: end the episode and grade it.

The episode is graded on ``submit`` and when the turns run out (truncated): the task's fail-to-pass
and pass-to-pass tests, run by :mod:`.grading` from a pristine copy of the tree holding only the
agent's library source, in a fresh sandbox process. The reward (``reward="fraction"``, the default) is
the fraction of the fail-to-pass tests that pass, or 0.0 if any pass-to-pass test fails: the untouched
tree scores 0, the gold patch 1, a partial fix in between, and a fix that breaks other behaviour 0.
With ``reward="binary"`` it is 1.0 only when every listed test passes. A call that is not a
tool call costs the format penalty and a turn.

Like :class:`~gem_core.envs.terminal.terminal_env.TerminalEnv`, whose working directory, snapshots and
forks it shares, it refuses to start without bubblewrap unless ``sandbox="process"`` asks for the
unisolated mode. It also refuses to start before ``gem swe build`` built its tasks, naming the command.
"""

from __future__ import annotations

import atexit
import functools
import importlib.util
import inspect
import json
import os
import shlex
import shutil
import stat
import sys
import tempfile
from pathlib import Path
from typing import Any

from gem_core.env import StepResult
from gem_core.envs.swe.build import build_pack, check_home_hidden
from gem_core.envs.swe.grading import grade_tree
from gem_core.envs.swe.pack import SAMPLE_SPEC_FILE, SPEC_FILE, SweError, SweTask, built_tasks_dir, default_home, load_pack
from gem_core.envs.terminal.terminal_env import TerminalEnv
from gem_core.errors import DependencyNotInstalled, InvalidArgument, ResetNeeded
from gem_core.tools.calls import CALL_FORMATS, format_instruction, parse_native_calls
from gem_core.tools.sandbox import SandboxConfig, SandboxResult, resolve_mode
from gem_core.tools.sandbox.shell import WorkDir, run_shell
from gem_core.vector.calls import check_amount, check_count

__all__ = ["SweEnv", "TOOLS", "REWARDS"]

TOOLS: dict[str, tuple[str, str]] = {
    "bash": ("command", "run a shell command in the repository (no network); python and pytest are on PATH"),
    "view": ("path, start?, end?", "show a file's numbered lines (optionally lines start..end), or a folder's entries"),
    "replace": ("path, old, new", "replace the one occurrence of the exact text old by new in a file"),
    "run_tests": ("tests?", "run the package's tests with pytest, or only the given test files or ids (a list)"),
    "submit": ("", "finish: your fix is graded by the package's tests"),
}
"""Tool name -> (arguments, what it does), shown in the first observation."""
REWARDS = ("fraction", "binary")
"""The values ``SweEnv(reward=)`` accepts: ``fraction`` of the fail-to-pass tests that pass, or ``binary`` (all of them)."""
#: Characters of a file :func:`view` reads at most (larger files: ask for a line range).
_MAX_VIEW_BYTES = 2 << 20
_LISTING_LINES = 200


@functools.lru_cache(maxsize=2)
def _sample_home(spec: str) -> str:
    """The shipped sample pack, built once per process (no network: its package is GEM's own) into a
    temporary folder removed at exit."""
    home = tempfile.mkdtemp(prefix="gem-swe-sample-", dir=_hidden_temp_dir())
    atexit.register(shutil.rmtree, home, True)
    build_pack(home, spec=spec, verify=False, report=lambda line: None)
    return home


def _hidden_temp_dir() -> str:
    """The system temp folder, unless the sandbox shows it (nox and tox point TMPDIR inside the virtualenv,
    whose prefix every snippet sees): then /tmp, which each sandbox replaces with its own."""
    for folder in (tempfile.gettempdir(), "/tmp"):
        try:
            check_home_hidden(Path(folder))
        except SweError:
            continue
        return folder
    raise SweError(f"No temporary folder the sandbox hides for the SWE sample pack (TMPDIR={tempfile.gettempdir()}): set TMPDIR to one outside the Python installation.")


@functools.lru_cache(maxsize=64)
def _tree_files(root: str) -> dict[str, tuple[int, bytes | None]]:
    """A built task tree as the working directory's files (path -> (mode, bytes, None for a folder)); read
    once per process, since every reset of the task starts from it."""
    files: dict[str, tuple[int, bytes | None]] = {}
    for path in sorted(Path(root).rglob("*")):
        relative = path.relative_to(root).as_posix()
        if path.is_symlink():
            continue
        files[relative] = (0o755, None) if path.is_dir() else (0o644, path.read_bytes())
    return files


class SweEnv(TerminalEnv):
    """Fix the bug an issue describes; see the module docstring.

    Args:
        tasks: ids of the pack's tasks to draw from (default: all, or all of ``package``); each reset draws
            one from :attr:`np_random`; ``reset(options={"task": id})`` picks one.
        package: only this package's tasks.
        max_turns: tool calls per episode, ``submit`` included (None: each task's spec).
        command_timeout: seconds per shell command (None: each task's spec); tests get the spec's test timeout.
        reward: ``"fraction"`` (share of the fail-to-pass tests that pass, 0.0 if a pass-to-pass test fails) or
            ``"binary"`` (1.0 only if every listed test passes).
        call_format: the tool-call syntax the agent writes (:data:`gem_core.tools.calls.CALL_FORMATS`).
        home: where ``gem swe build`` put the tasks (None: ``$GEM_SWE_HOME`` or ``~/.cache/gem/swe``).
        spec: a pack spec file (default: the shipped pack).
        sample: use the shipped one-task sample pack instead (GEM's own tiny package, built on first use
            without the network): for tests and demos.
        memory_mb: as for the terminal env.
        max_output_chars: as for the terminal env.
        max_work_mb: as for the terminal env.
        sandbox: as for the terminal env.

    Raises:
        InvalidArgument: a limit is not a number in range (``command_timeout`` finite seconds above 0, or None;
            ``max_turns`` a whole number from 2, or None; ``max_output_chars`` a whole number from 100;
            ``memory_mb`` and ``max_work_mb`` whole numbers from 1), or ``tasks`` is not a list of task ids or
            ``package`` not a name.
        SweError: ``reward`` or ``call_format`` is not one of the choices, or ``tasks``/``package`` name
            nothing in the pack.
        PackNotBuiltError: the tasks are not built in ``home``; the message gives the command.
        DependencyNotInstalled: pytest is not installed in this interpreter (the grader runs it).
    """

    max_return = 1.0
    state_excludes = frozenset({"pack", "home", "tasks_dir"})
    # This env reuses TerminalEnv's working-directory, sandbox and output methods, never its shell tasks:
    # its tasks are SWE tasks (a package, an issue, its tests), so the two attributes are retyped here.
    tasks: tuple[SweTask, ...]  # type: ignore[assignment]
    task: SweTask | None  # type: ignore[assignment]

    def __init__(
        self,
        tasks: list[str] | tuple[str, ...] | None = None,
        package: str | None = None,
        max_turns: int | None = None,
        command_timeout: float | None = None,
        reward: str = "fraction",
        call_format: str = "hermes",
        home: str | None = None,
        spec: str | None = None,
        sample: bool = False,
        memory_mb: int = 1024,
        max_output_chars: int = 4000,
        max_work_mb: int = 128,
        sandbox: str | None = None,
    ):
        # TerminalEnv's constructor reads its shipped shell tasks; this sets what its working-directory,
        # snapshot and output methods use (work_dir, sandbox, sandbox_config, limits) itself.
        if not isinstance(reward, str) or reward not in REWARDS:
            raise SweError(f"reward={reward!r:.80}: choose one of {REWARDS}.")
        if not isinstance(call_format, str) or call_format not in CALL_FORMATS:
            raise SweError(f"call_format={call_format!r:.80}: choose one of {sorted(CALL_FORMATS)}.")
        if tasks is not None and (not isinstance(tasks, (list, tuple)) or not all(isinstance(t, str) for t in tasks)):
            raise InvalidArgument(f"tasks={tasks!r:.80} must be a list of task ids (strings), or None for every task.")
        if package is not None and not isinstance(package, str):
            raise InvalidArgument(f"package={package!r:.80} must be a package name (a string), or None for every package.")
        if max_turns is not None:  # a look and a submit at least
            max_turns = check_count("max_turns", max_turns, least=2, none_means="each task's own")
        if command_timeout is not None:
            command_timeout = check_amount("command_timeout", command_timeout, "seconds", none_means="each task's own")
        check_count("memory_mb", memory_mb)
        check_count("max_output_chars", max_output_chars, least=100)
        check_count("max_work_mb", max_work_mb)
        if importlib.util.find_spec("pytest") is None:
            raise DependencyNotInstalled("The SWE envs grade with the packages' own tests: install pytest (`pip install pytest`).")
        spec_path = str(SAMPLE_SPEC_FILE if sample else (spec or SPEC_FILE))
        self.pack = load_pack(spec_path)
        self.tasks = self.pack.select(list(tasks) if tasks is not None else None, package)
        self.home = Path(_sample_home(spec_path) if sample else (home or default_home())).expanduser()
        check_home_hidden(self.home)
        self.tasks_dir = built_tasks_dir(self.home, self.pack, self.tasks)
        self.reward_mode, self.call_format = reward, call_format
        self.turn_limit, self.timeout_override = max_turns, command_timeout
        self.memory_mb, self.max_output_chars = memory_mb, max_output_chars
        self.sandbox = resolve_mode(sandbox)
        self.sandbox_config = SandboxConfig(max_work_mb=max_work_mb)
        slowest = max(max(t.command_timeout, t.test_timeout) for t in self.tasks)
        self.max_step_seconds = max(slowest, command_timeout or 0.0) + 15.0  # a command or a grade, plus sandbox start
        self.task = None
        self.max_turns, self.command_timeout = max_turns or self.tasks[0].max_turns, command_timeout or self.tasks[0].command_timeout
        self.turn = 0
        self.work_dir = None
        self._work_owner = None

    # ------------------------------------------------------------------ episode

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
        super(TerminalEnv, self).reset(seed=seed)
        index = int(self.np_random.integers(len(self.tasks)))
        if options and "task" in options:
            ids = [task.id for task in self.tasks]
            if options["task"] not in ids:
                raise SweError(f"options['task']={options['task']!r} is not one of {ids}.")
            index = ids.index(options["task"])
        self.task, self.turn = self.tasks[index], 0
        self.max_turns = self.turn_limit or self.task.max_turns
        self.command_timeout = self.timeout_override or self.task.command_timeout
        files = _tree_files(str(self.tasks_dir / self.task.id))
        self._new_work_dir(files)
        tools = "\n".join(f"- {name}({args}): {doc}" for name, (args, doc) in TOOLS.items())
        observation = (
            f"You are working in the repository of the Python package {self.task.package.name} "
            f"{self.task.package.version}, at /workspace. A user filed this issue:\n\n{self.task.issue}\n\n"
            f"Repository layout:\n{_layout(files)}\n\n"
            f"Fix the library so the behaviour the issue asks for holds; the package's own tests grade your fix. "
            f"Tools:\n{tools}\n"
            f"Call one tool per turn, e.g. {format_instruction(self.call_format, 'view', 'path')}. You have "
            f"{self.max_turns} turns; a command may run {self.command_timeout:g} s. There is no network."
        )
        return observation, {"task": self.task.id, "package": self.task.package.name}

    def step(self, action: str) -> StepResult:
        if self.task is None or self.work_dir is None:
            raise ResetNeeded("Call reset() before step().")
        self.turn += 1
        calls = parse_native_calls(self.call_format, action) if isinstance(action, str) else []
        if not calls or calls[-1].error:
            why = calls[-1].error if calls else "no tool call found"
            message = f"Invalid tool call ({why}); write one as {format_instruction(self.call_format, 'view', 'path')}."
            if self.turn >= self.max_turns:
                return self._grade(message, truncated=True, format_error=True)
            return self.invalid_action(message)
        call = calls[-1]
        if call.name == "submit":
            return self._grade("Submitted.", truncated=False)
        tool = getattr(self, f"_tool_{call.name}", None) if call.name in TOOLS else None
        if tool is None:
            observation = f"Unknown tool {call.name!r}; the tools are {', '.join(TOOLS)}."
        else:
            try:
                # Only arguments that do not fit the tool are the model's mistake; a TypeError from inside the
                # tool is the env's own bug and is raised.
                inspect.signature(tool).bind(**call.arguments)
            except TypeError:
                observation = f"Tool {call.name} takes ({TOOLS[call.name][0]}); got {sorted(call.arguments)}."
            else:
                try:
                    observation = tool(**call.arguments)
                except SweError as error:
                    observation = f"Tool error: {error}"
        if self.turn >= self.max_turns:
            return self._grade(observation + "\nOut of turns.", truncated=True)
        return observation + f"\n(turns left: {self.max_turns - self.turn})", 0.0, False, False, {"tool": call.name}

    def _swe_episode(self) -> tuple[SweTask, WorkDir]:
        """This episode's task and working directory; :class:`ResetNeeded` before the first ``reset()``."""
        if self.task is None or self.work_dir is None:
            raise ResetNeeded("Call reset() before step().")
        return self.task, self.work_dir

    def _grade(self, observation: str, *, truncated: bool, **info: Any) -> StepResult:
        task, work_dir = self._swe_episode()
        grade = grade_tree(work_dir.path, self.tasks_dir / task.id, task, mode=self.sandbox)
        reward = grade.fraction if self.reward_mode == "fraction" else float(grade.resolved)
        verdict = (
            f"{grade.fixed} of {len(grade.fail_to_pass)} tests of the issue pass, "
            + ("the other tests still pass" if grade.kept else "but other tests now fail")
            + (f" ({grade.error})" if grade.error else "")
        )
        details = {
            "success": grade.resolved, "tests_passed": grade.passed, "tests_total": len(grade.tests),
            "changed": list(grade.changed), "grade_seconds": round(grade.duration, 3), **info,
        }
        if grade.error:
            details["grade_error"] = grade.error  # e.g. a limit on reading the tree, named
        return f"{observation}\nGraded: {verdict}.", float(reward), not truncated, truncated, details

    # ------------------------------------------------------------------ tools

    def _run(self, command: str, timeout: float | None = None) -> SandboxResult:
        # The interpreter that runs GEM (and has pytest) first on PATH; the user site stays off.
        prefix = f"export PATH={shlex.quote(os.path.dirname(sys.executable))}:$PATH PYTHONNOUSERSITE=1\n"
        return run_shell(
            prefix + command, self._swe_episode()[1], timeout=timeout or self.command_timeout, memory_mb=self.memory_mb,
            mode=self.sandbox, config=self.sandbox_config,
        )

    def _tool_bash(self, command: str) -> str:
        if not isinstance(command, str) or not command.strip() or "\x00" in command:
            raise SweError("bash needs a non-empty command string.")
        return self._describe(self._run(command))

    def _tool_run_tests(self, tests: list[str] | str | None = None) -> str:
        package = self._swe_episode()[0].package
        chosen = package.tests if tests in (None, [], "") else ([tests] if isinstance(tests, str) else tests)
        if not isinstance(chosen, (list, tuple)) or not all(isinstance(t, str) and t and "\x00" not in t for t in chosen):
            raise SweError("run_tests takes a list of test files or ids (strings), or nothing for all tests.")
        path = ":".join(shlex.quote(p) for p in package.python_path)
        command = (
            f"PYTHONPATH={path} PYTEST_DISABLE_PLUGIN_AUTOLOAD=1 python -m pytest -q -p no:cacheprovider --tb=short "
            f"-W ignore::DeprecationWarning {' '.join(shlex.quote('--' if t == '--' else t) for t in chosen)}"
        )
        return self._describe(self._run(command, timeout=self._swe_episode()[0].test_timeout))

    def _resolve(self, path: Any) -> str:
        """The host path of ``path`` inside the working directory; refuses paths that leave it or pass a link."""
        if not isinstance(path, str) or not path or "\x00" in path:
            raise SweError("path must be a non-empty string, relative to /workspace.")
        if not path.isascii():
            try:
                path.encode("utf-8")
            except UnicodeEncodeError:  # a lone surrogate: valid JSON, but no file name (os raises on it)
                raise SweError(f"{path!r} is not UTF-8 text; name files with bash if they need other bytes.") from None
        relative = path[len("/workspace"):].lstrip("/") if path == "/workspace" or path.startswith("/workspace/") else path
        if os.path.isabs(relative) or ".." in Path(relative).parts:
            raise SweError(f"{path!r} is outside the repository: give a path relative to /workspace.")
        root = self._swe_episode()[1].path
        full = os.path.normpath(os.path.join(root, relative))
        if os.path.realpath(full) != full or not (full == root or full.startswith(root + os.sep)):
            raise SweError(f"{path!r} passes a symbolic link; view and replace follow none (use bash).")
        return full

    def _tool_view(self, path: str, start: int | None = None, end: int | None = None) -> str:
        full = self._resolve(path)
        if os.path.isdir(full):
            try:
                entries = sorted(os.listdir(full))
            except OSError as error:  # e.g. a folder the agent made unreadable with bash
                raise SweError(f"cannot list {path!r}: {error.strerror}.") from None
            listing = "\n".join(name + ("/" if os.path.isdir(os.path.join(full, name)) else "") for name in entries)
            return self._shorten(listing or "(empty folder)")
        text = _read_regular(full, _MAX_VIEW_BYTES).decode("utf-8", errors="replace")
        lines = text.splitlines()
        if start is not None or end is not None:
            if not all(isinstance(v, int) and not isinstance(v, bool) for v in (start or 1, end or len(lines))):
                raise SweError("start and end are line numbers (whole numbers).")
        first, last = max(1, start or 1), min(len(lines), end or len(lines))
        shown = "\n".join(f"{number:6d}  {lines[number - 1]}" for number in range(first, last + 1))
        return self._shorten(shown or "(no lines in that range)")

    def _tool_replace(self, path: str, old: str, new: str) -> str:
        if not isinstance(old, str) or not isinstance(new, str) or not old:
            raise SweError("replace needs old (non-empty text) and new (text).")
        full = self._resolve(path)
        if not os.path.isfile(full):
            raise SweError(f"{path!r} is not a file.")
        try:
            text = _read_regular(full, _MAX_VIEW_BYTES).decode("utf-8")
        except UnicodeDecodeError:  # e.g. written by bash: replacing in decoded-with-losses text would corrupt it
            raise SweError(f"{path!r} is not UTF-8 text; edit it with bash.") from None
        count = text.count(old)
        if count != 1:
            raise SweError(f"old occurs {count} times in {path}; give text that occurs exactly once (add surrounding lines).")
        try:
            data = text.replace(old, new).encode("utf-8")
        except UnicodeEncodeError:  # checked before the file is truncated, so a refused edit loses nothing
            raise SweError("new is not UTF-8 text (it holds a lone surrogate).") from None
        try:
            fd = os.open(full, os.O_WRONLY | os.O_TRUNC | os.O_NOFOLLOW)
        except OSError as error:  # e.g. a file the agent made read-only with bash
            raise SweError(f"cannot write {path!r}: {error.strerror}.") from None
        with os.fdopen(fd, "wb") as file:
            file.write(data)
        return f"Replaced 1 occurrence in {path}."

    def sample_random_action(self) -> str:
        """A harmless, well-formed tool call (never ``submit``): mostly viewing a file of the repository."""
        names = sorted(name for name, (_, data) in _tree_files(str(self.tasks_dir / self.task.id)).items() if data is not None) if self.task else ["."]
        choice = int(self.np_random.integers(4))
        if choice == 0:
            call = {"name": "bash", "arguments": {"command": "ls"}}
        else:
            call = {"name": "view", "arguments": {"path": names[int(self.np_random.integers(len(names)))], "start": 1, "end": 20}}
        return f"<tool_call>{json.dumps(call)}</tool_call>"

    def render(self) -> str:
        name = self.task.id if self.task else "-"
        return f"SWE task {name}, turn {self.turn}/{self.max_turns}, directory {self.work_dir}"


def _read_regular(path: str, limit: int) -> bytes:
    """The bytes of a regular file (links and FIFOs refused), at most ``limit``."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError as error:
        raise SweError(f"cannot open {os.path.basename(path)!r}: {error.strerror}.") from None
    with os.fdopen(fd, "rb") as file:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise SweError(f"{os.path.basename(path)!r} is not a regular file.")
        data = file.read(limit + 1)
    if len(data) > limit:
        raise SweError(f"{os.path.basename(path)!r} is larger than {limit} bytes; use bash (head, sed -n).")
    return data


def _layout(files: dict[str, tuple[int, bytes | None]]) -> str:
    """The repository's files, one per line (folders of many files summarised past a limit)."""
    names = [name for name, (_, data) in files.items() if data is not None and "egg-info" not in name]
    if len(names) <= _LISTING_LINES:
        return "\n".join(names)
    return "\n".join(names[:_LISTING_LINES]) + f"\n... and {len(names) - _LISTING_LINES} more files"
