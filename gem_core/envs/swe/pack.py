"""The SWE task pack: what GEM ships (specs it wrote) and where ``gem swe build`` puts what it makes.

GEM ships only text it wrote: for each real package a pinned sdist (name, version, SHA-256), the
paths of its library source and its licence files; for each task the mutation that injects the bug
(one exact string replacement in one file), the issue a user would write, the package's own test ids
that the bug breaks (fail-to-pass) and a sample of those it leaves passing (pass-to-pass). The
packages' code is fetched by ``gem swe build`` from the package index into a cache (the *pack home*),
never at episode time and never into the repository.

Layout of the pack home (``$GEM_SWE_HOME``, default ``~/.cache/gem/swe``)::

    sdists/<file>.tar.gz         the pinned sdists, hash-checked
    tasks/<task id>/             the task's starting tree: the sdist with the bug injected
    built.json                   which tasks were built from which spec, and verified

The pack home must lie outside every directory the sandbox shows (the system directories and the
interpreter's prefixes): it holds the unmutated sdists, that is, the gold patches.
"""

from __future__ import annotations

import functools
import hashlib
import json
import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gem_core.errors import GemError
from gem_core.settings import environment_value, home_dir

__all__ = [
    "DATA_DIR",
    "SPEC_FILE",
    "SAMPLE_SPEC_FILE",
    "Package",
    "Mutation",
    "SweTask",
    "TaskPack",
    "SweError",
    "PackNotBuiltError",
    "load_pack",
    "default_home",
    "built_tasks_dir",
    "BUILD_COMMAND",
]

DATA_DIR = Path(__file__).with_name("data")
"""The folder of the shipped pack and sample files."""
SPEC_FILE = DATA_DIR / "pack.json"
"""The shipped pack: real packages from the index."""
SAMPLE_SPEC_FILE = DATA_DIR / "sample.json"
"""A one-package pack GEM wrote itself (``data/sample/``), built without the network: tests and demos."""
SPEC_FORMAT = "gem.swe_pack/1"
BUILD_COMMAND = "gem swe build"
"""The command that builds the pack, quoted in every error that needs it."""
_TASK_ID = re.compile(r"^[a-z0-9][a-z0-9_.-]*$")


class SweError(GemError, ValueError):
    """A pack spec, a build or an SWE env was given something it cannot use; the message says what."""


class PackNotBuiltError(GemError, FileNotFoundError):
    """An SWE env was made before ``gem swe build`` built its tasks; the message gives the command."""


@dataclass(frozen=True)
class Package:
    """One pinned package: where its sdist comes from and what in it is library source."""

    name: str
    version: str
    #: The sdist's file name as the index serves it (``inflection-0.5.1.tar.gz``).
    sdist: str
    sha256: str
    license: str
    #: Licence files kept in every built tree (relative to the unpacked sdist's root).
    license_files: tuple[str, ...]
    #: Files and folders holding the library itself: the only paths of the agent's tree the grader
    #: uses (test files under them excepted, see :mod:`.grading`).
    source: tuple[str, ...]
    #: The package's test files and folders (relative to the root): what the agent's ``run_tests`` tool runs.
    tests: tuple[str, ...] = ()
    #: Folders put on ``sys.path`` when its tests run (relative to the root).
    python_path: tuple[str, ...] = (".",)
    #: A folder of package data holding the tree (the shipped sample) instead of an sdist from the index.
    local: str | None = None


@dataclass(frozen=True)
class Mutation:
    """The injected bug: ``old`` (found exactly once in ``file``) becomes ``new`` (then found exactly once in
    the mutated file, so the gold patch is the reverse replacement, ``new`` -> ``old``)."""

    file: str
    old: str
    new: str


@dataclass(frozen=True)
class SweTask:
    """One bug in one package, with the issue text and the tests that grade a fix."""

    id: str
    package: Package
    mutation: Mutation
    issue: str
    fail_to_pass: tuple[str, ...]
    pass_to_pass: tuple[str, ...]
    max_turns: int
    command_timeout: float
    test_timeout: float

    @property
    def tests(self) -> tuple[str, ...]:
        """Every test id that grades a fix: fail-to-pass first."""
        return self.fail_to_pass + self.pass_to_pass


@dataclass(frozen=True)
class TaskPack:
    """A spec file read and checked: its packages and tasks, and a digest that names this exact content."""

    path: Path
    digest: str
    packages: dict[str, Package]
    tasks: tuple[SweTask, ...]

    def task(self, task_id: str) -> SweTask:
        """The task with id ``task_id``.

        Raises:
            SweError: if the pack holds no such task (the message lists the ids it holds).
        """
        for task in self.tasks:
            if task.id == task_id:
                return task
        raise SweError(f"No SWE task {task_id!r} in {self.path.name}; choose one of {[t.id for t in self.tasks]}.")

    def select(self, task_ids: list[str] | tuple[str, ...] | None = None, package: str | None = None) -> tuple[SweTask, ...]:
        """The tasks named (all if None), of ``package`` only if given; refuses unknown names and an empty choice.

        Raises:
            SweError: if a task or ``package`` is not in the pack, or the choice leaves no task.
        """
        chosen = self.tasks if task_ids is None else tuple(self.task(task_id) for task_id in task_ids)
        if package is not None:
            if package not in self.packages:
                raise SweError(f"No package {package!r} in {self.path.name}; choose one of {sorted(self.packages)}.")
            chosen = tuple(task for task in chosen if task.package.name == package)
        if not chosen:
            raise SweError(f"No SWE task chosen from {self.path.name} (tasks={task_ids!r}, package={package!r}).")
        return chosen


def _need(entry: dict[str, Any], key: str, kind: type, where: str) -> Any:
    value = entry.get(key)
    if not isinstance(value, kind) or (kind is str and not value):
        raise SweError(f"{where}: {key!r} must be a non-empty {kind.__name__}, got {value!r}.")
    return value


def _strings(entry: dict[str, Any], key: str, where: str, *, empty: bool = False, default: list[str] | None = None) -> tuple[str, ...]:
    value = entry.get(key, [] if empty else default)
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value) or (not value and not empty):
        raise SweError(f"{where}: {key!r} must be a list of non-empty strings{'' if empty else ' (at least one)'}, got {value!r}.")
    return tuple(value)


def _seconds(limits: dict[str, Any], key: str, where: str) -> float:
    """A timeout of the spec: a JSON number of seconds, finite and above 0 (a text, NaN or infinity never ends)."""
    value = limits.get(key)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
        raise SweError(f"{where}: limits {key!r} must be a finite number of seconds above 0, got {value!r:.80}.")
    return float(value)


def _relative(path: str, where: str) -> str:
    parts = Path(path).parts
    if Path(path).is_absolute() or ".." in parts or not parts:
        raise SweError(f"{where}: the path {path!r} must be relative to the package root, without '..'.")
    return path


def _package(name: str, entry: Any, where: str) -> Package:
    if not isinstance(entry, dict):
        raise SweError(f"{where}: a package entry is an object, got {type(entry).__name__}.")
    local = entry.get("local")
    if local is not None and (not isinstance(local, str) or not local):
        raise SweError(f"{where}: 'local' must be the name of a folder of package data (a non-empty string), got {local!r:.80}.")
    sha = "" if local else _need(entry, "sha256", str, where)
    if not local and not re.fullmatch(r"[0-9a-f]{64}", sha):
        raise SweError(f"{where}: 'sha256' must be 64 lowercase hex digits, got {sha!r}.")
    return Package(
        name=name,
        version=_need(entry, "version", str, where),
        sdist="" if local else _need(entry, "sdist", str, where),
        sha256=sha,
        license=_need(entry, "license", str, where),
        license_files=tuple(_relative(p, where) for p in _strings(entry, "license_files", where)),
        source=tuple(_relative(p, where) for p in _strings(entry, "source", where)),
        tests=tuple(_relative(p, where) for p in _strings(entry, "tests", where)),
        # A list, never one string (its characters would be read as folders).
        python_path=tuple(_relative(p, where) if p != "." else p for p in _strings(entry, "python_path", where, default=["."])),
        local=local,
    )


def _task(entry: Any, packages: dict[str, Package], defaults: dict[str, Any], where: str) -> SweTask:
    if not isinstance(entry, dict):
        raise SweError(f"{where}: a task entry is an object, got {type(entry).__name__}.")
    task_id = _need(entry, "id", str, where)
    if not _TASK_ID.match(task_id):
        raise SweError(f"{where}: task id {task_id!r} must be lowercase letters, digits, '_', '.', '-'.")
    name = entry.get("package")
    package = packages.get(name) if isinstance(name, str) else None
    if package is None:
        raise SweError(f"{where} ({task_id}): 'package' must name one of {sorted(packages)}, got {entry.get('package')!r}.")
    mutation = _need(entry, "mutation", dict, where)
    old, new = _need(mutation, "old", str, where), mutation.get("new")
    if not isinstance(new, str) or not new or new == old:
        # Non-empty, so the gold patch is the reverse replacement (``new`` -> ``old``, see build.apply_mutation).
        raise SweError(f"{where} ({task_id}): the mutation's 'new' must be non-empty text other than 'old' (keep a line of context).")
    own = entry.get("limits", {})
    if not isinstance(own, dict):
        raise SweError(f"{where} ({task_id}): 'limits' must be an object (max_turns, command_timeout, test_timeout), got {own!r:.80}.")
    limits = {**defaults, **own}
    max_turns = limits.get("max_turns")
    if isinstance(max_turns, bool) or not isinstance(max_turns, int) or max_turns < 2:
        raise SweError(f"{where} ({task_id}): limits 'max_turns' must be an integer of at least 2 (a look and a submit), got {max_turns!r:.80}.")
    command_timeout, test_timeout = _seconds(limits, "command_timeout", f"{where} ({task_id})"), _seconds(limits, "test_timeout", f"{where} ({task_id})")
    return SweTask(
        id=task_id,
        package=package,
        mutation=Mutation(_relative(_need(mutation, "file", str, where), where), old, new),
        issue=_need(entry, "issue", str, where),
        fail_to_pass=_strings(entry, "fail_to_pass", where),
        pass_to_pass=_strings(entry, "pass_to_pass", where, empty=True),
        max_turns=max_turns,
        command_timeout=command_timeout,
        test_timeout=test_timeout,
    )


def load_pack(path: str | Path = SPEC_FILE) -> TaskPack:
    """Read and check a pack spec (JSON, format ``gem.swe_pack/1``); parsed once per process and content.

    Raises:
        SweError: the file is not a pack spec, or an entry is malformed (the message names it and the key).
        OSError: the file cannot be read.
    """
    path = Path(path)
    return _parse_pack(path, path.read_bytes())


@functools.lru_cache(maxsize=8)
def _parse_pack(path: Path, raw: bytes) -> TaskPack:
    try:
        spec = json.loads(raw)
    except ValueError as error:
        raise SweError(f"{path}: not JSON ({error}).") from None
    if not isinstance(spec, dict) or spec.get("format") != SPEC_FORMAT:
        raise SweError(f"{path}: not an SWE pack spec (expected an object with \"format\": \"{SPEC_FORMAT}\").")
    packages = {name: _package(name, entry, f"{path.name}: package {name!r}") for name, entry in _need(spec, "packages", dict, path.name).items()}
    defaults = _need(spec, "defaults", dict, path.name)
    tasks = tuple(_task(entry, packages, defaults, f"{path.name}: task {i}") for i, entry in enumerate(_need(spec, "tasks", list, path.name)))
    ids = [task.id for task in tasks]
    if len(set(ids)) != len(ids):
        raise SweError(f"{path}: task ids repeat: {sorted({i for i in ids if ids.count(i) > 1})}.")
    return TaskPack(path=path, digest=hashlib.sha256(raw).hexdigest(), packages=packages, tasks=tasks)


def default_home() -> Path:
    """``$GEM_SWE_HOME``, else ``~/.cache/gem/swe``: where ``gem swe build`` keeps sdists and built trees.

    Raises:
        SweError: neither is known: no ``$GEM_SWE_HOME`` and no home directory (a container's random uid).
    """
    chosen = environment_value("GEM_SWE_HOME")
    if chosen:
        return Path(chosen).expanduser()
    home = home_dir()
    if home is None:
        raise SweError("cannot find a home directory (no $HOME, and no passwd entry for this uid) for the SWE pack; "
                       "set GEM_SWE_HOME to the folder `gem swe build` should keep it in.")
    return home / ".cache" / "gem" / "swe"


def built_tasks_dir(home: str | Path, pack: TaskPack, tasks: tuple[SweTask, ...]) -> Path:
    """The folder of built task trees under ``home``, after checking that every task in ``tasks`` was built
    (and verified) from this very spec.

    Raises:
        PackNotBuiltError: nothing was built there, or not these tasks, or from another spec; the message
            gives the command that builds them.
    """
    home = Path(home)
    command = f"{BUILD_COMMAND}" + ("" if pack.path == SPEC_FILE else f" --spec {pack.path}") + (
        "" if home == default_home() else f" --home {home}"
    )
    try:
        manifest = json.loads((home / "built.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        raise PackNotBuiltError(
            f"The SWE tasks are not built in {home}: run `{command}` once (it downloads the pinned sdists "
            "from the package index and checks every task); episodes then run offline."
        ) from None
    built = manifest.get("tasks", {}) if isinstance(manifest, dict) else {}
    missing = [task.id for task in tasks if built.get(task.id) != pack.digest or not (home / "tasks" / task.id).is_dir()]
    if missing:
        raise PackNotBuiltError(
            f"SWE tasks {missing[:5]}{'...' if len(missing) > 5 else ''} are not built in {home} from the current "
            f"spec {pack.path.name}: run `{command}`."
        )
    return home / "tasks"
