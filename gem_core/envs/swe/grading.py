"""Grading an SWE task: the package's own tests, from a pristine tree, in a fresh sandbox process.

What the agent changed reaches the grader only as library source: :func:`overlay_source` starts from
the task's pristine starting tree (built by ``gem swe build``, outside the sandbox) and copies over it
only the agent's regular ``.py`` files under the package's source paths, never a test file
(``test_*.py``, ``*_test.py``, anything under a ``tests``/``test``/``testing`` folder), ``conftest.py``,
``sitecustomize.py``/``usercustomize.py``, ``.pth`` files, configuration (``setup.cfg``,
``pyproject.toml``, ``pytest.ini``, ``tox.ini``) or a symbolic link. So edited or deleted tests, a
``conftest.py`` that skips everything, a ``.pth`` hook and pytest settings change nothing.

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
from dataclasses import dataclass, field, replace
from pathlib import Path

from gem_core.envs.swe.pack import Package, SweTask
from gem_core.tools.sandbox import FunctionCall, SandboxConfig, SandboxPool, WorkDir, resolve_mode

__all__ = ["Grade", "run_tests", "grade_tree", "overlay_source", "copy_tree", "is_test_path", "RUNNER"]

RUNNER = Path(__file__).with_name("pytest_runner.py").read_text(encoding="utf-8")
"""Source of the program the grading sandbox runs: it runs pytest on the graded tree and prints each test's outcome."""
#: Where a graded tree lies inside the grading sandbox's working directory (a root-owned folder).
_TREE = "repo"
_TEST_DIRS = frozenset({"tests", "test", "testing"})
_NEVER_COPIED = frozenset({"conftest.py", "sitecustomize.py", "usercustomize.py"})
#: Most bytes of the JSON verdict accepted back (outcomes of a few hundred test ids).
_MAX_VERDICT = 1 << 20


def is_test_path(relative: str) -> bool:
    """Whether a path (relative to the package root) is test code or a test hook, which grading never takes
    from the agent."""
    parts = Path(relative).parts
    name = parts[-1]
    return (
        any(part in _TEST_DIRS for part in parts[:-1])
        or name.startswith("test_") or name.endswith("_test.py") or name in _NEVER_COPIED
    )


def _walk_files(root: str) -> dict[str, str]:
    """Regular files under ``root`` (relative path -> absolute path), symbolic links never followed; walked
    with a list of folders to visit, not recursion (a tree of any depth is fine)."""
    found: dict[str, str] = {}
    pending = [""]
    while pending:
        relative = pending.pop()
        try:
            entries = list(os.scandir(os.path.join(root, relative)))
        except OSError:
            continue
        for entry in entries:
            key = os.path.join(relative, entry.name)
            if entry.is_dir(follow_symlinks=False):
                pending.append(key)
            elif entry.is_file(follow_symlinks=False):
                found[key] = entry.path
    return found


def copy_tree(source: str | Path, destination: str | Path) -> None:
    """Copy the folders and regular files of ``source`` into ``destination`` (made if missing), modes
    0755/0644; links and special files are left out."""
    destination = Path(destination)
    destination.mkdir(parents=True, exist_ok=True)
    for relative, path in sorted(_walk_files(str(source)).items()):
        target = destination / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, target)
        os.chmod(target, 0o644)
    for directory in [destination, *[p for p in destination.rglob("*") if p.is_dir()]]:
        os.chmod(directory, 0o755)


def _regular_file(path: str, limit: int) -> bytes | None:
    """The bytes of ``path`` if it is a regular file (not a link, not a FIFO) of at most ``limit`` bytes."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return None
    with os.fdopen(fd, "rb") as file:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        data = file.read(limit + 1)
    return data if len(data) <= limit else None


def overlay_source(agent_root: str | Path, tree: str | Path, package: Package, *, max_file_bytes: int = 4 << 20) -> list[str]:
    """Make ``tree`` (a copy of the pristine starting tree) hold the agent's library source: its ``.py``
    files under ``package.source`` that are not test code replace, add to or (when the agent deleted
    them) remove the tree's; the changed paths, sorted."""
    agent_root, tree = str(agent_root), Path(tree)
    changed = []
    for source in package.source:
        agent_files = {}
        if source.endswith(".py"):
            candidates = {source: os.path.join(agent_root, source)}
        else:
            candidates = {os.path.join(source, k): v for k, v in _walk_files(os.path.join(agent_root, source)).items()}
        for relative, path in candidates.items():
            if relative.endswith(".py") and not is_test_path(relative):
                data = _regular_file(path, max_file_bytes)
                if data is not None:
                    agent_files[relative] = data
        pristine = [source] if source.endswith(".py") else [os.path.join(source, k) for k in _walk_files(str(tree / source))]
        for relative in pristine:
            if relative.endswith(".py") and not is_test_path(relative) and relative not in agent_files and (tree / relative).is_file():
                (tree / relative).unlink()
                changed.append(relative)
        for relative, data in agent_files.items():
            target = tree / relative
            if target.is_file() and target.read_bytes() == data:
                continue
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data)
            os.chmod(target, 0o644)
            changed.append(relative)
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
    """Grade the agent's tree for ``task``: its library source over the pristine tree, then the task's tests."""
    work = WorkDir(prefix="gem-swe-grade-")
    try:
        tree = os.path.join(work.path, _TREE)
        copy_tree(pristine, tree)
        changed = overlay_source(agent_root, tree, task.package)
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
