"""``gem swe build``: fetch the pinned sdists, inject each task's bug, and check every task.

For each package of the pack: ``pip download --no-deps --no-binary :all: NAME==VERSION`` into
``<home>/sdists`` (skipped when a file with the spec's SHA-256 is already there), the SHA-256 checked,
the sdist unpacked with tarfile's ``data`` filter (no links out of the tree, no devices, no absolute
paths). For each task: the unpacked tree with its mutation applied (the ``old`` text must occur exactly
once) becomes ``<home>/tasks/<id>``. Then the checks that make a task worth training on, with the real
grader in the sandbox: the unmutated tree passes every listed test, and the mutated tree fails every
fail-to-pass test and passes every pass-to-pass one. A task that fails a check is not recorded as built
(``built.json``), so no env serves it. Downloads, and then checks, run side by side (up to one per CPU).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from gem_core.cpus import usable_cpus
from gem_core.envs.swe.grading import Grade, copy_tree, run_tests
from gem_core.envs.swe.pack import DATA_DIR, SPEC_FILE, Package, SweError, SweTask, TaskPack, load_pack
from gem_core.tools.sandbox.isolation import SYSTEM_DIRS, python_dirs

__all__ = ["build_pack", "fetch_sdist", "unpack_sdist", "apply_mutation", "check_home_hidden"]

Report = Callable[[str], None]


def check_home_hidden(home: Path) -> None:
    """Refuse a pack home the sandbox would show (under a system directory or the interpreter's prefix):
    it holds the unmutated sdists, so an agent could read the gold patch there.

    Raises:
        SweError: naming the folder and the fix.
    """
    resolved = home.resolve()
    for shown in (*SYSTEM_DIRS, *python_dirs(sys.executable)):
        if resolved == Path(shown) or Path(shown) in resolved.parents:
            raise SweError(
                f"The SWE pack home {home} lies inside {shown}, which the sandbox shows to the agent (the sdists there "
                "hold the unbuggy code): pick another folder with --home or $GEM_SWE_HOME (default ~/.cache/gem/swe)."
            )


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as file:
        for chunk in iter(lambda: file.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def fetch_sdist(package: Package, sdists: Path, *, python: str = sys.executable, report: Report = print) -> Path:
    """The package's sdist in ``sdists``, downloaded with pip unless a copy with the right hash is there.

    Raises:
        SweError: pip failed (no network, no such version) or the file's SHA-256 is not the spec's.
    """
    target = sdists / package.sdist
    if target.is_file() and _sha256(target) == package.sha256:
        return target
    sdists.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=sdists, prefix=".download-") as scratch:
        command = [python, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:", "--disable-pip-version-check",
                   "-q", "-d", scratch, f"{package.name}=={package.version}"]
        report(f"downloading {package.name}=={package.version} (sdist)")
        try:
            done = subprocess.run(command, capture_output=True, text=True, timeout=600, stdin=subprocess.DEVNULL)
        except (OSError, subprocess.TimeoutExpired) as error:
            raise SweError(f"pip download of {package.name}=={package.version} failed to run: {error}.") from None
        fetched = Path(scratch) / package.sdist
        if done.returncode != 0 or not fetched.is_file():
            tail = (done.stderr or done.stdout).strip().splitlines()[-3:]
            raise SweError(
                f"pip download of {package.name}=={package.version} gave no {package.sdist} (exit {done.returncode}): "
                f"{' | '.join(tail) or 'no output'}. The build needs the package index once; episodes run offline after it."
            )
        found = _sha256(fetched)
        if found != package.sha256:
            raise SweError(f"{package.sdist}: SHA-256 {found} is not the spec's {package.sha256}; refusing to use it.")
        os.replace(fetched, target)
    return target


def unpack_sdist(sdist: Path, destination: Path) -> None:
    """Unpack ``sdist`` (a .tar.gz whose members share one top folder) so that folder's content is ``destination``.

    Raises:
        SweError: the archive is not one top folder, or a member is unsafe (tarfile's ``data`` filter).
    """
    with tempfile.TemporaryDirectory(dir=destination.parent, prefix=".unpack-") as scratch:
        try:
            with tarfile.open(sdist, "r:gz") as archive:
                archive.extractall(scratch, filter="data")
        except (tarfile.TarError, OSError) as error:
            raise SweError(f"{sdist.name}: cannot unpack ({error}).") from None
        tops = os.listdir(scratch)
        if len(tops) != 1 or not os.path.isdir(os.path.join(scratch, tops[0])):
            raise SweError(f"{sdist.name}: expected one top folder in the sdist, found {sorted(tops)[:5]}.")
        copy_tree(os.path.join(scratch, tops[0]), destination)


def apply_mutation(tree: Path, task: SweTask) -> None:
    """Inject the task's bug into ``tree``.

    Raises:
        SweError: the file is missing, or ``old`` does not occur exactly once (the spec no longer fits the sdist),
            or ``new`` does not occur exactly once in the result (the gold patch would be ambiguous).
    """
    path = tree / task.mutation.file
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as error:
        raise SweError(f"task {task.id}: cannot read {task.mutation.file} ({error.strerror}).") from None
    count = text.count(task.mutation.old)
    if count != 1:
        raise SweError(f"task {task.id}: the mutation's 'old' text occurs {count} times in {task.mutation.file}; it must occur once.")
    mutated = text.replace(task.mutation.old, task.mutation.new)
    if mutated.count(task.mutation.new) != 1:
        raise SweError(f"task {task.id}: the mutation's 'new' text occurs {mutated.count(task.mutation.new)} times in the mutated "
                       f"{task.mutation.file}; extend 'old' and 'new' with context so it occurs once (the gold patch reverses it).")
    path.write_text(mutated, encoding="utf-8")


def _original_tree(package: Package, sdist: Path | None, scratch: Path) -> Path:
    tree = scratch / f"{package.name}-{package.version}"
    if package.local is not None:
        copy_tree(DATA_DIR / package.local, tree)
    else:
        assert sdist is not None
        unpack_sdist(sdist, tree)
    missing = [name for name in package.license_files if not (tree / name).is_file()]
    if missing:
        raise SweError(f"{package.name} {package.version}: licence file(s) {missing} not in the sdist; fix 'license_files' in the spec.")
    return tree


def _workers(jobs: int) -> int:
    # pip downloads wait on the index and each check is a fresh sandboxed interpreter: one at a time leaves
    # the other cores idle, so they run side by side (each check keeps its own time and memory limits).
    return max(1, min(jobs, usable_cpus(), 8))


def _fetch_all(packages: list[Package], home: Path, report: Report) -> dict[str, Path | None]:
    """Each package's sdist (None for a local package), downloaded side by side."""
    remote = [package for package in packages if package.local is None]
    with ThreadPoolExecutor(max_workers=_workers(len(remote))) as pool:
        fetched = {package.name: pool.submit(fetch_sdist, package, home / "sdists", report=report) for package in remote}
        return {package.name: fetched[package.name].result() if package.name in fetched else None for package in packages}


def _verdict(task: SweTask, gold_ok: dict[str, str], buggy: Grade) -> str | None:
    """Why the task fails its checks, or None: the original passes its tests (the gold patch scores 1), the
    mutation fails each fail-to-pass test and passes each pass-to-pass one (the empty patch scores 0, only for the bug)."""
    broken = [test for test in task.tests if gold_ok.get(test) != "passed"]
    if broken:
        return f"the unmutated tree does not pass {broken[:3]}"
    if buggy.error:
        return f"the mutated tree's run failed: {buggy.error}"
    still = [test for test in task.fail_to_pass if buggy.outcomes.get(test) == "passed"]
    if still:
        return f"the mutated tree still passes {still[:3]}"
    lost = [test for test in task.pass_to_pass if buggy.outcomes.get(test) != "passed"]
    if lost:
        return f"the mutated tree also fails pass-to-pass {lost[:3]}; list them in fail_to_pass or narrow the mutation"
    return None


def _check_all(tasks: Sequence[SweTask], originals: dict[str, Path], staged: dict[str, Path], mode: str | None,
               report: Report) -> dict[str, str | None]:
    """Each task's problem (None: it passed), from every package's unmutated tree and every mutated one, run side by side."""
    with ThreadPoolExecutor(max_workers=_workers(len(originals) + len(tasks))) as pool:
        gold = {}
        for name, tree in originals.items():
            mine = [task for task in tasks if task.package.name == name]
            wanted = tuple(dict.fromkeys(test for task in mine for test in task.tests))
            report(f"checking {name} {mine[0].package.version}: {len(wanted)} listed tests on the unmutated tree")
            timeout = max(task.test_timeout for task in mine) * 2
            gold[name] = pool.submit(run_tests, tree, mine[0].package, wanted, timeout=timeout, mode=mode)
        buggy = {task.id: pool.submit(run_tests, staged[task.id], task.package, task.tests, timeout=task.test_timeout, mode=mode)
                 for task in tasks}
        return {task.id: _verdict(task, gold[task.package.name].result().outcomes, buggy[task.id].result()) for task in tasks}


def build_pack(
    home: str | Path, *, spec: str | Path = SPEC_FILE, task_ids: list[str] | None = None, verify: bool = True,
    mode: str | None = None, report: Report = print,
) -> dict[str, str]:
    """Build (and with ``verify``, check) the tasks of ``spec`` in ``home``; ``{task id: "ok" | why it failed}``.

    Only the tasks that passed are recorded in ``<home>/built.json`` (with the spec's digest), so an env
    serves no task whose check failed.

    Raises:
        SweError: a download, hash, unpack or mutation failed (the message names the package or task), or
            the home is visible inside the sandbox.
    """
    home = Path(home).expanduser()
    home.mkdir(parents=True, exist_ok=True)
    check_home_hidden(home)
    pack: TaskPack = load_pack(spec)
    tasks = pack.select(task_ids)
    packages = [pack.packages[name] for name in dict.fromkeys(task.package.name for task in tasks)]
    results: dict[str, str] = {}
    with tempfile.TemporaryDirectory(dir=home, prefix=".build-") as scratch_name:
        scratch = Path(scratch_name)
        sdists = _fetch_all(packages, home, report)
        originals = {package.name: _original_tree(package, sdists[package.name], scratch) for package in packages}
        staged = {task.id: scratch / f"task-{task.id}" for task in tasks}
        for task in tasks:
            copy_tree(originals[task.package.name], staged[task.id])
            apply_mutation(staged[task.id], task)
        problems = _check_all(tasks, originals, staged, mode, report) if verify else {}
        for task in tasks:
            problem = problems.get(task.id)
            results[task.id] = problem or "ok"
            report(f"  {task.id}: {'ok' if problem is None else 'FAILED: ' + problem}")
            if problem is None:
                final = home / "tasks" / task.id
                final.parent.mkdir(parents=True, exist_ok=True)
                if final.exists():
                    shutil.rmtree(final)
                os.replace(staged[task.id], final)
    _record(home, pack, [task_id for task_id, result in results.items() if result == "ok"])
    return results


def _record(home: Path, pack: TaskPack, built: list[str]) -> None:
    path = home / "built.json"
    try:
        manifest = json.loads(path.read_text(encoding="utf-8"))
        recorded = manifest["tasks"] if isinstance(manifest, dict) and isinstance(manifest.get("tasks"), dict) else {}
    except (OSError, ValueError, KeyError):
        recorded = {}
    recorded.update({task_id: pack.digest for task_id in built})
    temporary = path.with_suffix(".tmp")
    temporary.write_text(json.dumps({"format": "gem.swe_built/1", "tasks": recorded}, indent=1, sort_keys=True), encoding="utf-8")
    os.replace(temporary, path)
