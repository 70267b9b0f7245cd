"""Grading an SWE task: the package's own tests, from a pristine tree, in a fresh sandbox process.

What the agent changed reaches the grader only as library source: :func:`overlay_source` starts from
the task's pristine starting tree (built by ``gem swe build``, outside the sandbox) and copies over it
only the agent's regular ``.py`` files under the package's source paths, never a test file
(``test_*.py``, ``*_test.py``, anything under a ``tests``/``test``/``testing`` folder), ``conftest.py``,
``sitecustomize.py``/``usercustomize.py``, ``.pth`` files, configuration (``setup.cfg``,
``pyproject.toml``, ``pytest.ini``, ``tox.ini``) or a symbolic link. So edited or deleted tests, a
``conftest.py`` that skips everything, a ``.pth`` hook and pytest settings change nothing.

The grader reads the agent's tree on the host (as root when the host is), so it follows no link at any level:
every folder is opened from the one above it with ``O_NOFOLLOW`` and every file likewise, so a source folder
replaced by a link (``ln -s /some/host/dir gemstats``, or ``ln -s / gemstats``) or one below a linked folder
counts as deleted, and no host file reaches the graded tree. What it walks and reads is bounded
(:data:`MAX_SOURCE_ENTRIES`, :data:`MAX_SOURCE_BYTES`, :data:`MAX_SOURCE_DEPTH`); past a bound the submission
is graded as failed, the grade's error naming it.

The tree is then graded by :mod:`.pytest_runner` in a sandbox of its own (no network, the usual limits):
the interpreter starts with ``-I -S``, pytest ignores every configuration file, ``conftest.py`` and
plugin entry point, and the per-test outcomes come back through the sandbox's function-call channel,
so an ``os._exit(0)`` at import yields no outcomes (every test failed). Run as root, the grading tree is
owned by root and read-only to the sandbox's uid, so the tested code cannot rewrite a test file that
has not been collected yet (unprivileged, its files are only made read-only).

Library code runs in the process that runs the tests, so it could rewrite pytest's objects in memory
from its import. Against the blunt form of that (every report made a pass), each graded test file gets
a canary appended in the grading copy, a test under a fresh random name that must fail: if a canary does
not come back failed, the grade is 0. Code that singles out the graded tests by name is not covered.
The issue's hacks (editing tests, conftest, sitecustomize/.pth, plugins, settings, an early exit,
deleting tests) all score 0.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import stat
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import BinaryIO

from gem_core.envs.swe.pack import Package, SweError, SweTask
from gem_core.tools.sandbox import FunctionCall, SandboxConfig, SandboxPool, WorkDir, resolve_mode

__all__ = [
    "Grade", "run_tests", "grade_tree", "overlay_source", "copy_tree", "is_test_path", "RUNNER",
    "MAX_SOURCE_ENTRIES", "MAX_SOURCE_BYTES", "MAX_SOURCE_DEPTH",
]

RUNNER = Path(__file__).with_name("pytest_runner.py").read_text(encoding="utf-8")
"""Source of the program the grading sandbox runs: it runs pytest on the graded tree and prints each test's outcome."""
#: Where a graded tree lies inside the grading sandbox's working directory (a root-owned folder).
_TREE = "repo"
_TEST_DIRS = frozenset({"tests", "test", "testing"})
_NEVER_COPIED = frozenset({"conftest.py", "sitecustomize.py", "usercustomize.py"})
#: Most bytes of the JSON verdict accepted back (outcomes of a few hundred test ids).
_MAX_VERDICT = 1 << 20
MAX_SOURCE_ENTRIES = 20_000
"""Most entries (files, folders, links) of the agent's source folders the grader looks at: past it the
submission is graded as failed, since the host walks a tree the agent may have filled with anything."""
MAX_SOURCE_BYTES = 64 << 20
"""Most bytes of the agent's ``.py`` files the grader reads (a package's source is a few MiB): past it the
submission is graded as failed."""
MAX_SOURCE_DEPTH = 64
"""Most levels of folders the grader walks (it holds a descriptor of each open level): past it the
submission is graded as failed."""
_FOLDER = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def is_test_path(relative: str) -> bool:
    """Whether a path (relative to the package root) is test code or a test hook, which grading never takes
    from the agent."""
    parts = Path(relative).parts
    name = parts[-1]
    return (
        any(part in _TEST_DIRS for part in parts[:-1])
        or name.startswith("test_") or name.endswith("_test.py") or name in _NEVER_COPIED
    )


def _open_folder(root: str, relative: str = "") -> int | None:
    """A descriptor of the folder ``relative`` below ``root``, opened one part at a time from the one above with
    ``O_NOFOLLOW``: a link anywhere on the way (``ln -s /some/host/dir gemstats``) gives None, as does a missing
    folder, so the grader never reads through one. ``root`` itself is the host's own path and is taken as given."""
    try:
        folder = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError:
        return None
    for part in Path(relative).parts:
        try:
            child = os.open(part, _FOLDER, dir_fd=folder)
        except OSError:
            return None
        finally:
            os.close(folder)
        folder = child
    return folder


def _walk_files(top: int, budget: _Budget | None = None) -> Iterator[tuple[str, int, str]]:
    """Each regular file below the folder open at ``top``: its path relative to it, a descriptor of its folder
    (valid until the next item) and its name. Each folder is opened from its parent's descriptor with
    ``O_NOFOLLOW``, so a link is followed at no level, even one swapped in while the walk runs. Depth first, with
    a stack of open folders instead of recursion: one descriptor per level, :data:`MAX_SOURCE_DEPTH` at most.

    Raises:
        SweError: the folders nest deeper than :data:`MAX_SOURCE_DEPTH`, or ``budget`` ran out of entries.
    """
    stack = [("", os.dup(top), sorted(os.scandir(top), key=lambda entry: entry.name, reverse=True))]
    try:
        while stack:
            relative, folder, entries = stack[-1]
            if not entries:
                os.close(folder)
                stack.pop()
                continue
            entry = entries.pop()
            if budget is not None:
                budget.spend(entries=1)
            key = f"{relative}/{entry.name}" if relative else entry.name
            if entry.is_dir(follow_symlinks=False):
                if len(stack) > MAX_SOURCE_DEPTH:
                    raise SweError(f"the tree nests folders more than {MAX_SOURCE_DEPTH} deep, past the grader's limit (at {key[:200]})")
                try:
                    child = os.open(entry.name, _FOLDER, dir_fd=folder)
                except OSError:
                    continue
                try:
                    listing = sorted(os.scandir(child), key=lambda entry: entry.name, reverse=True)
                except OSError:
                    os.close(child)
                    continue
                stack.append((key, child, listing))
            elif entry.is_file(follow_symlinks=False):
                yield key, folder, entry.name
    finally:
        for _, folder, _ in stack:
            os.close(folder)


def _open_file(folder: int, name: str) -> BinaryIO | None:
    """``name`` in the folder open at ``folder``, if it is a regular file: not a link (``O_NOFOLLOW``), not a FIFO
    (opened without blocking, then checked on the descriptor, so a swap after the walk saw it changes nothing)."""
    try:
        fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=folder)
    except OSError:
        return None
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        return None
    return os.fdopen(fd, "rb")


def copy_tree(source: str | Path, destination: str | Path) -> None:
    """Copy the folders and regular files of ``source`` into ``destination`` (made if missing), modes
    0755/0644; links and special files are left out.

    Raises:
        SweError: ``source`` nests folders deeper than :data:`MAX_SOURCE_DEPTH`.
    """
    destination = Path(destination)
    destination.mkdir(parents=True, exist_ok=True)
    top = _open_folder(str(source))
    if top is not None:
        try:
            for relative, folder, name in _walk_files(top):
                original = _open_file(folder, name)
                if original is None:
                    continue
                target = destination / relative
                target.parent.mkdir(parents=True, exist_ok=True)
                with original, open(target, "wb") as copy:
                    shutil.copyfileobj(original, copy)
                os.chmod(target, 0o644)
        finally:
            os.close(top)
    for directory in [destination, *[p for p in destination.rglob("*") if p.is_dir()]]:
        os.chmod(directory, 0o755)


class _Budget:
    """What the grader may still read of the agent's tree: the tree is the agent's to fill, and the host reads
    it (as root), so past :data:`MAX_SOURCE_ENTRIES` or :data:`MAX_SOURCE_BYTES` the submission fails instead."""

    def __init__(self) -> None:
        self.entries, self.bytes = MAX_SOURCE_ENTRIES, MAX_SOURCE_BYTES

    def spend(self, entries: int = 0, data: int = 0) -> None:
        """Count ``entries`` looked at and ``data`` bytes read.

        Raises:
            SweError: a limit is passed; the message names it.
        """
        self.entries, self.bytes = self.entries - entries, self.bytes - data
        if self.entries < 0:
            raise SweError(f"the source folders hold more than {MAX_SOURCE_ENTRIES} entries, past the grader's limit")
        if self.bytes < 0:
            raise SweError(f"the library source holds more than {MAX_SOURCE_BYTES} bytes, past the grader's limit")


def _agent_source(agent_root: str, source: str, budget: _Budget, max_file_bytes: int) -> dict[str, bytes]:
    """The agent's library files under one source path (relative path -> bytes): regular ``.py`` files that are
    not test code, of at most ``max_file_bytes`` each, read through no link at any level (:func:`_open_folder`,
    :func:`_walk_files`). A source path that is a link, or passes one, holds nothing."""
    single = source.endswith(".py")
    top = _open_folder(agent_root, os.path.dirname(source) if single else source)
    if top is None:
        return {}
    try:
        listed = [(source, top, os.path.basename(source))] if single else (
            (f"{source}/{relative}", folder, name) for relative, folder, name in _walk_files(top, budget)
        )
        found = {}
        for relative, folder, name in listed:
            if not relative.endswith(".py") or is_test_path(relative):
                continue
            file = _open_file(folder, name)
            if file is None:
                continue
            with file:
                data = file.read(max_file_bytes + 1)
            budget.spend(data=len(data))
            if len(data) <= max_file_bytes:
                found[relative] = data
        return found
    finally:
        os.close(top)


def overlay_source(agent_root: str | Path, tree: str | Path, package: Package, *, max_file_bytes: int = 4 << 20) -> list[str]:
    """Make ``tree`` (a copy of the pristine starting tree) hold the agent's library source: its ``.py``
    files under ``package.source`` that are not test code replace, add to or (when the agent deleted
    them) remove the tree's; the changed paths, sorted. A source path the agent replaced by a link, or one
    below a link, counts as deleted: the grader reads the agent's tree through no link.

    Raises:
        SweError: the agent's source folders pass :data:`MAX_SOURCE_ENTRIES`, :data:`MAX_SOURCE_BYTES` or
            :data:`MAX_SOURCE_DEPTH` (nothing of ``tree`` has changed yet).
    """
    agent_root, tree = str(agent_root), Path(tree)
    budget, agent_files = _Budget(), {}
    for source in package.source:
        agent_files.update(_agent_source(agent_root, source, budget, max_file_bytes))
    changed = set()
    for source in package.source:
        if source.endswith(".py"):
            pristine = [source]
        else:
            top, pristine = _open_folder(str(tree), source), []
            if top is not None:
                try:
                    pristine = [f"{source}/{relative}" for relative, _, _ in _walk_files(top)]
                finally:
                    os.close(top)
        for relative in pristine:
            if relative.endswith(".py") and not is_test_path(relative) and relative not in agent_files and (tree / relative).is_file():
                (tree / relative).unlink()
                changed.add(relative)
    for relative, data in agent_files.items():
        target = tree / relative
        if target.is_file() and target.read_bytes() == data:
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
        os.chmod(target, 0o644)
        changed.add(relative)
    return sorted(changed)


def _plant_canaries(tree: Path, tests: tuple[str, ...]) -> tuple[str, ...]:
    """Append a test that must fail, under a fresh random name, to each test file of ``tests`` (in the
    grading copy); its ids. If one does not come back failed, code in the process rewrote how pytest
    reports (a patch that passes every test passes these too), and the grade is 0."""
    canaries = []
    for test_file in dict.fromkeys(test.split("::", 1)[0] for test in tests):
        path = tree / test_file
        if not test_file.endswith(".py") or not path.is_file():
            continue
        name = f"test_gem_canary_{secrets.token_hex(8)}"
        with open(path, "a", encoding="utf-8") as file:
            file.write(f"\n\ndef {name}():\n    raise AssertionError('this test must fail')\n")
        canaries.append(f"{test_file}::{name}")
    return tuple(canaries)


@dataclass(frozen=True)
class Grade:
    """The outcome of grading: each listed test's outcome, and the reward rules over them."""

    outcomes: dict[str, str]
    fail_to_pass: tuple[str, ...]
    pass_to_pass: tuple[str, ...] = ()
    changed: tuple[str, ...] = ()
    error: str | None = None
    duration: float = 0.0
    log: str = field(default="", repr=False)

    @property
    def tests(self) -> tuple[str, ...]:
        """Every listed test: the fail-to-pass ones, then the pass-to-pass ones."""
        return self.fail_to_pass + self.pass_to_pass

    @property
    def passed(self) -> int:
        """How many listed tests passed."""
        return sum(self.outcomes.get(test) == "passed" for test in self.tests)

    @property
    def fixed(self) -> int:
        """How many fail-to-pass tests passed."""
        return sum(self.outcomes.get(test) == "passed" for test in self.fail_to_pass)

    @property
    def kept(self) -> bool:
        """Every pass-to-pass test still passed."""
        return all(self.outcomes.get(test) == "passed" for test in self.pass_to_pass)

    @property
    def fraction(self) -> float:
        """The share of the fail-to-pass tests that pass, or 0.0 when a pass-to-pass test broke: partial
        credit for a partial fix, none for the untouched tree or a fix that breaks something else."""
        return self.fixed / len(self.fail_to_pass) if self.fail_to_pass and self.kept else 0.0

    @property
    def resolved(self) -> bool:
        """Every listed test passed."""
        return bool(self.tests) and self.passed == len(self.tests)


def run_tests(
    tree: str | Path, package: Package, tests: tuple[str, ...] | list[str], *, timeout: float, mode: str | None = None,
    memory_mb: int = 1024, tb: str = "no",
) -> Grade:
    """Run ``tests`` (pytest ids) on a copy of ``tree`` in a fresh sandbox; never raises for what the tests do.

    Raises:
        SandboxUnavailableError: the sandbox cannot run here (see :func:`~gem_core.tools.sandbox.resolve_mode`).
    """
    work = WorkDir(prefix="gem-swe-grade-")
    try:
        copy_tree(tree, os.path.join(work.path, _TREE))  # root-owned when run as root: read-only to the tests
        return _run_in_sandbox(work.path, package, tuple(tests), timeout=timeout, mode=mode, memory_mb=memory_mb, tb=tb)
    finally:
        work.close()


def grade_tree(
    agent_root: str | Path, pristine: str | Path, task: SweTask, *, mode: str | None = None, memory_mb: int = 1024,
) -> Grade:
    """Grade the agent's tree for ``task``: its library source over the pristine tree, then the task's tests.
    A tree past the grader's limits (:data:`MAX_SOURCE_ENTRIES`, :data:`MAX_SOURCE_BYTES`,
    :data:`MAX_SOURCE_DEPTH`) is graded as failed, with :attr:`Grade.error` naming the limit."""
    work = WorkDir(prefix="gem-swe-grade-")
    try:
        tree = os.path.join(work.path, _TREE)
        copy_tree(pristine, tree)
        try:
            changed = overlay_source(agent_root, tree, task.package)
        except SweError as error:  # a limit on reading the agent's tree: a failed grade, named
            return Grade({}, task.fail_to_pass, task.pass_to_pass, error=str(error))
        canaries = _plant_canaries(Path(tree), task.fail_to_pass)
        grade = _run_in_sandbox(
            work.path, task.package, task.tests + canaries, timeout=task.test_timeout, mode=mode, memory_mb=memory_mb
        )
        if grade.error is None and any(grade.outcomes.get(canary) != "failed" for canary in canaries):
            grade = replace(grade, outcomes={}, error="a test that must fail did not: the test run was tampered with")
        return replace(grade, fail_to_pass=task.fail_to_pass, pass_to_pass=task.pass_to_pass, changed=tuple(changed))
    finally:
        work.close()


def _run_in_sandbox(
    work_path: str, package: Package, tests: tuple[str, ...], *, timeout: float, mode: str | None, memory_mb: int, tb: str = "no",
) -> Grade:
    config = SandboxConfig(work_dir=work_path, pool_size=0, zygote=False, preload=(), max_returned_bytes=_MAX_VERDICT)
    request = {"root": f"{config.work_mount}/{_TREE}", "python_path": list(package.python_path), "ids": list(tests), "tb": tb}
    result = SandboxPool(resolve_mode(mode), config).run(
        RUNNER, timeout=timeout, memory_mb=memory_mb, call=FunctionCall("run_tests", [request])
    )
    log = (result.stdout + result.stderr)[-20_000:]
    if result.limit is not None:
        return Grade({}, tests, error=f"the tests hit the {result.limit} limit", duration=result.duration, log=log)
    try:
        verdict = json.loads(result.returned) if result.returned else None
    except ValueError:
        verdict = None
    outcomes = verdict.get("outcomes") if isinstance(verdict, dict) else None
    if not isinstance(outcomes, dict):
        return Grade({}, tests, error="the test run ended without reporting outcomes", duration=result.duration, log=log)
    kept = {str(k): v for k, v in outcomes.items() if v in ("passed", "failed", "skipped")}
    return Grade(kept, tests, duration=result.duration, log=log)
