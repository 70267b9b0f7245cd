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
two to four canaries in the grading copy (:func:`_plant_canaries`), tests that must fail: each sits between
the file's top-level statements at random, runs at a random place among the graded ids, copies the shape of
one of the file's graded ids (function or class method, parametrized or not, naming style) and is named
from the words of the task's own test names mixed with plain words, with no fixed part, so a rule such as
"pass all but names holding X", "all but each file's last test" or "all but ids of this shape" fails a
canary too. If a canary does not come back failed, or outcomes come back for ids that were not run, the
grade is 0. What remains possible: code that singles out the graded tests by their exact names (readable in
the agent's copy of the tests), or that tells canaries apart by their bodies or objects (their source, line
numbers, a ``unittest`` class where the file's own is a plain one), can still pass the graded tests alone.
The issue's hacks (editing tests, conftest, sitecustomize/.pth, plugins, settings, an early exit,
deleting tests) all score 0.
"""

from __future__ import annotations

import ast
import json
import os
import random
import re
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


#: Plain words of test names: with the words of the task's own test names, what a canary's name is made of.
_CANARY_WORDS = (
    "basic", "simple", "empty", "single", "many", "none", "zero", "one", "two", "negative", "large", "small",
    "long", "short", "unicode", "ascii", "default", "custom", "invalid", "valid", "missing", "extra", "nested",
    "flat", "order", "reverse", "sorted", "unsorted", "keys", "values", "items", "list", "dict", "tuple", "set",
    "string", "bytes", "number", "float", "int", "bool", "type", "error", "raises", "returns", "result", "input",
    "output", "edge", "case", "cases", "round", "trip", "first", "last", "start", "end", "middle", "mixed",
    "repeated", "unique", "limit", "range", "step", "window", "prefix", "suffix", "split", "join", "match",
    "format", "parse", "convert", "compare", "equal", "copy", "update", "call", "args", "kwargs", "lazy",
    "iter", "generator", "index", "count", "length", "size", "width", "fill", "pad", "strip", "lower", "upper",
)
_WORD = re.compile(r"[A-Z]?[a-z]+|[A-Z]+(?![a-z])|[0-9]+")
_SAFE_PARAMETER = re.compile(r"[A-Za-z0-9_.-]{1,40}")


def _name_words(tests: tuple[str, ...]) -> list[str]:
    """The words of the functions' and classes' names in ``tests`` (``test_camelize_lower`` -> camelize, lower)."""
    words = []
    for test in tests:
        for part in test.split("[", 1)[0].split("::")[1:]:
            words += [word.lower() for word in _WORD.findall(part) if word.lower() not in ("test", "tests")]
    return list(dict.fromkeys(word for word in words if word.isalpha() and 2 <= len(word) <= 20))


def _canary_source(template: str, source: str, own_words: list[str], taken: set[str], draw: random.Random) -> tuple[str, str]:
    """A canary shaped like the real test id ``template`` (a function or a class's method, ``test_snake`` or
    ``testCamel``, parametrized or not), named with words of the task's test names and plain words: its code and
    its id below the file. No part of its name is fixed, and each name is new to ``source`` and ``taken``."""
    parts = template.split("[", 1)[0].split("::")[1:]
    parameter = template.split("[", 1)[1][:-1] if "[" in template else None
    if parameter is not None and not _SAFE_PARAMETER.fullmatch(parameter):  # an id pytest would escape
        parameter = "-".join(draw.choice(_CANARY_WORDS) for _ in range(draw.randint(1, 3)))
    real_class = parts[0] if len(parts) > 1 else None
    # pytest collects a plain class only under a Test... name, and a unittest class can hold no parametrized test
    unittest_class = real_class is not None and (not real_class.startswith("Test") or parameter is None)
    if unittest_class:
        parameter = None
    snake = parts[-1].startswith("test_") or not parts[-1][4:5].isupper()
    for _ in range(1000):
        words = [draw.choice(own_words) if own_words and draw.random() < 0.5 else draw.choice(_CANARY_WORDS)
                 for _ in range(draw.randint(1, 3))]
        names = ["test_" + "_".join(words) if snake else "test" + "".join(word.capitalize() for word in words)]
        if real_class is not None:
            camel = "".join(word.capitalize() for word in (draw.choice(own_words or _CANARY_WORDS), *words[:1]))
            suffix = "Test" if real_class.endswith("Test") else "Tests"
            names.insert(0, "Test" + camel if real_class.startswith("Test") else camel + suffix)
        if not any(name in taken or re.search(rf"\b{name}\b", source) for name in names):
            break
    else:  # every draw clashed: unreachable for a real test file, but never plant a name twice
        names = [name + secrets.token_hex(4) for name in names]
    taken.update(names)
    failing = f"assert {draw.choice(_CANARY_WORDS)!r} == {draw.choice(_CANARY_WORDS) + draw.choice(_CANARY_WORDS)!r}"
    argument = draw.choice(own_words or _CANARY_WORDS) + "_" + draw.choice(_CANARY_WORDS)
    decorator = "" if parameter is None else f"@__import__('pytest').mark.parametrize({argument!r}, [None], ids=[{parameter!r}])\n"
    arguments = ([] if real_class is None else ["self"]) + ([] if parameter is None else [argument])
    code = f"{decorator}def {names[-1]}({', '.join(arguments)}):\n    {failing}\n"
    if real_class is not None:
        base = "(__import__('unittest').TestCase)" if unittest_class else ""
        code = f"class {names[0]}{base}:\n" + "".join(f"    {line}\n" for line in code.splitlines())
    return code, "::".join(names) + ("" if parameter is None else f"[{parameter}]")


def _top_level_gaps(source: str) -> list[int]:
    """Line indexes between the file's top-level statements (after its ``__future__`` imports) where a new
    definition may go; just the end if the file does not parse."""
    lines = source.count("\n") + 1
    try:
        body = ast.parse(source).body
    except (SyntaxError, ValueError):
        return [lines]
    futures = [i for i, node in enumerate(body) if isinstance(node, ast.ImportFrom) and node.module == "__future__"]
    first = futures[-1] if futures else 0
    gaps = []
    for i, node in enumerate(body[first:], first):
        following = body[i + 1] if i + 1 < len(body) else None
        end = node.end_lineno or node.lineno
        if following is None or min([following.lineno, *(d.lineno for d in getattr(following, "decorator_list", []))]) > end:
            gaps.append(end)
    return gaps or [lines]


def _plant_canaries(tree: Path, tests: tuple[str, ...]) -> tuple[str, ...]:
    """Put tests that must fail into each test file of ``tests`` (in the grading copy): two to four per file,
    each between the file's top-level statements at random and shaped like one of the file's graded tests,
    named from the task's test-name words and plain words (:func:`_canary_source`), so that neither a fixed
    name part, the file's end nor the id's shape tells them from the real tests. Their ids. If one does not
    come back failed, code in the process rewrote how pytest reports, and the grade is 0."""
    draw = random.SystemRandom()
    own_words = _name_words(tests)
    canaries = []
    by_file: dict[str, list[str]] = {}
    for test in tests:
        by_file.setdefault(test.split("::", 1)[0], []).append(test)
    for test_file, templates in by_file.items():
        path = tree / test_file
        if not test_file.endswith(".py") or not path.is_file():
            continue
        try:
            source = path.read_bytes().decode("utf-8")
        except UnicodeDecodeError:
            continue
        lines, taken = source.splitlines(keepends=True), set[str]()
        if lines and not lines[-1].endswith("\n"):
            lines[-1] += "\n"
        planted = []
        for _ in range(draw.randint(2, 4)):
            code, test_id = _canary_source(draw.choice(templates), source, own_words, taken, draw)
            planted.append((draw.choice(_top_level_gaps(source)), code))
            canaries.append(f"{test_file}::{test_id}")
        for gap, code in sorted(planted, key=lambda item: item[0], reverse=True):
            lines.insert(gap, f"\n\n{code}\n\n")
        path.write_text("".join(lines), encoding="utf-8")
    return tuple(canaries)


def _mixed_in(tests: tuple[str, ...], canaries: tuple[str, ...]) -> tuple[str, ...]:
    """``tests`` with ``canaries`` put at random places (pytest runs given ids in order): a canary is neither
    the first nor the last to run by rule."""
    draw, mixed = random.SystemRandom(), list(tests)
    for canary in canaries:
        mixed.insert(draw.randint(0, len(mixed)), canary)
    return tuple(mixed)


def _tampering(outcomes: dict[str, str], tests: tuple[str, ...], canaries: tuple[str, ...]) -> str | None:
    """Why the outcomes show the run was tampered with, or None: outcomes for ids that were not run (pytest,
    given ids, runs only those, so the outcomes never outnumber them), or a canary that did not fail or is
    missing while its file's other tests reported. A file none of whose tests reported (its import failed) is
    no tampering: its tests count as failed."""
    ran = set(tests) | set(canaries)
    if not set(outcomes) <= ran:
        return "outcomes came back for tests that were not run: the test run was tampered with"
    reported_files = {test.split("::", 1)[0] for test in outcomes}
    for canary in canaries:
        outcome = outcomes.get(canary)
        if outcome not in (None, "failed") or (outcome is None and canary.split("::", 1)[0] in reported_files):
            return "a test that must fail did not: the test run was tampered with"
    return None


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
        canaries = _plant_canaries(Path(tree), task.tests)
        grade = _run_in_sandbox(
            work.path, task.package, _mixed_in(task.tests, canaries), timeout=task.test_timeout, mode=mode, memory_mb=memory_mb
        )
        tampered = None if grade.error is not None else _tampering(grade.outcomes, task.tests, canaries)
        if tampered is not None:
            grade = replace(grade, outcomes={}, error=tampered)
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
