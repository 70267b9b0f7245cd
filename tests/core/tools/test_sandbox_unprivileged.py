"""The hostile sandbox suite run again by an unprivileged user (issue 14: "as root and as an
unprivileged user").

Run as root, the sandbox takes another path: no user namespace of bubblewrap's own, each call under a
fresh uid. Users without root get bubblewrap's unprivileged path (``--unshare-user``: the snippet keeps
the caller's uid, mapped), which this test exercises by re-running ``test_sandbox_hostile.py``,
``test_sandbox_hardening.py``, ``test_sandbox_shared_memory.py`` and ``test_sandbox_shell.py`` (a work
directory's tree deleted by its unprivileged owner) as uid 65534 (``setpriv``): every wall whose check can
differ by privilege (memory and its accounting, processes and signals, files and permissions, namespaces,
sockets and network), not the few whose code is the same for every user (``SAME_FOR_EVERY_USER``). Run by
a user that is not root, the suite itself already takes that path and this test skips.

The interpreter must be readable by that user. Where it lies under a directory only root may enter
(pyenv under ``/root`` on this project's CI machine), the child runs in a private mount namespace in which
that directory is an empty tmpfs holding only the way to the interpreter: nothing changes on the host.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import stat
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from ci_guard import skip_unless_ci

PROJECT_ROOT = Path(__file__).resolve().parents[3]
SUITE = [
    "tests/core/tools/test_sandbox_hostile.py",
    "tests/core/tools/test_sandbox_hardening.py",
    "tests/core/tools/test_sandbox_shared_memory.py",
    "tests/core/tools/test_sandbox_shell.py",
]
#: Left to the root run: the host's time limit and output cap, the status channel's protocol and a seccomp
#: rule run the same code whoever starts the sandbox (~7 s of the ~60 s re-run).
SAME_FOR_EVERY_USER = (
    "test_infinite_loop_times_out", "test_sleeping_past_the_timeout_is_stopped", "test_100_megabytes_of_output_are_capped",
    "test_a_status_written_by_the_snippet_is_not_believed", "test_a_forged_exit_claim_does_not_end_the_call_early",
    "test_io_uring_is_denied",
)
NOBODY = 65534
SETPRIV = ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups"]


def closed_ancestors(path: Path) -> list[Path]:
    """Ancestors of ``path`` (and itself, if a directory) that other users may not enter."""
    path = path.resolve()
    chain = [*reversed(path.parents), path] if path.is_dir() else [*reversed(path.parents)]
    return [p for p in chain if not os.stat(p).st_mode & stat.S_IXOTH]


def reopen_closed_directory(closed: Path, needed: Path) -> str:
    """Shell lines, for a private mount namespace, that cover ``closed`` with an empty tmpfs other users
    may enter, holding only the first directory on the way to ``needed`` (bound back from the host)."""
    child = closed / needed.resolve().relative_to(closed).parts[0]
    stash = f"/tmp/gem-unprivileged-{os.getpid()}"
    q = shlex.quote
    return "\n".join(
        [
            f"mkdir -p {q(stash)}",
            f"mount --bind {q(str(child))} {q(stash)}",
            f"mount -t tmpfs -o mode=0755,size=1m gem-unprivileged {q(str(closed))}",
            f"mkdir -p {q(str(child))}",
            f"mount --bind {q(stash)} {q(str(child))}",
            f"umount -l {q(stash)}",
            f"rmdir {q(stash)}",
        ]
    )


@pytest.fixture(scope="module")
def as_nobody():
    """The command prefix that runs a program as uid 65534 with this interpreter reachable; skips with
    the reason where that cannot be arranged."""
    if os.geteuid() != 0:
        pytest.skip("not root: the hostile suite in this run already takes the unprivileged path")
    for tool in ("setpriv", "unshare", "bwrap"):
        if shutil.which(tool) is None:
            skip_unless_ci(f"`{tool}` is not installed (util-linux, bubblewrap)")
    userns = subprocess.run([*SETPRIV, "bwrap", "--unshare-user", "--ro-bind", "/", "/", "true"], capture_output=True, text=True, timeout=60)
    if userns.returncode != 0:
        skip_unless_ci(f"unprivileged user namespaces are disabled here, so bubblewrap cannot run unprivileged: {userns.stderr.strip()[:300]}")
    interpreter = [Path(os.path.realpath(sys.executable)), Path(sys.base_prefix)]
    needed = [*interpreter, Path(sys.prefix), PROJECT_ROOT]
    closed = sorted({c for path in needed for c in closed_ancestors(path)})
    if not closed:
        return []
    if len(closed) > 1 or any(closed[0] in (p.resolve(), *p.resolve().parents) for p in (Path(sys.prefix), PROJECT_ROOT)):
        pytest.skip(f"{[str(c) for c in closed]} may not be entered by other users and cannot be opened here for the test")
    script = reopen_closed_directory(closed[0], interpreter[0]) + '\nexec "$@"'
    return ["unshare", "--mount", "--propagation", "private", "sh", "-c", script, "sh"]


@pytest.fixture
def nobody_home():
    """A home directory of uid 65534's own (pytest's tmp_path lies under a directory only root may enter)."""
    home = tempfile.mkdtemp(prefix="gem-nobody-home-")
    os.chown(home, NOBODY, NOBODY)
    yield home
    shutil.rmtree(home, ignore_errors=True)


@pytest.mark.slow  # ~25 s: the whole hostile suite once more
def test_the_hostile_sandbox_suite_passes_for_an_unprivileged_user(as_nobody, nobody_home):
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": nobody_home,
        "PYTHONPATH": str(PROJECT_ROOT),  # this checkout, whatever is installed
        "PYTHONDONTWRITEBYTECODE": "1",
        "CI": "true",  # inside, bubblewrap must work: a skip there is a failure
    }
    leave_out = "not (" + " or ".join(SAME_FOR_EVERY_USER) + ")"
    command = [*as_nobody, *SETPRIV, sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-rs", "-k", leave_out, *SUITE]
    done = subprocess.run(command, cwd=PROJECT_ROOT, env=env, capture_output=True, text=True, timeout=600)
    summary = done.stdout.strip().splitlines()[-1] if done.stdout.strip() else ""
    assert done.returncode == 0, done.stdout[-6000:] + done.stderr[-3000:]
    assert "passed" in summary and "skipped" not in summary and "failed" not in summary, summary
    assert "deselected" in summary, summary
    check = subprocess.run(
        [*as_nobody, *SETPRIV, sys.executable, "-c", "import os; from gem_core.tools.sandbox import run_python as r; print(os.geteuid(), r('import os; print(os.geteuid())', mode='bwrap').stdout)"],
        cwd=PROJECT_ROOT, env=env, capture_output=True, text=True, timeout=120,
    )
    assert check.stdout.split() == [str(NOBODY), str(NOBODY)], check  # the host side ran as nobody; inside, its uid mapped


def test_every_check_left_to_the_root_run_is_a_test_of_the_suite():
    """A renamed test would silently join the unprivileged re-run; a wrong name would leave out nothing."""
    defined = {name for path in SUITE for name in re.findall(r"^def (test_\w+)", (PROJECT_ROOT / path).read_text(encoding="utf-8"), re.M)}
    assert set(SAME_FOR_EVERY_USER) - defined == set()
