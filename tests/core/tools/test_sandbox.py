"""gem_core.tools.sandbox: the run_python/arun_python contract, modes, the worker pool."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import threading
import time

import pytest

from gem_core.tools import sandbox
from gem_core.tools.sandbox import (
    FunctionCall,
    SandboxConfig,
    SandboxPool,
    SandboxPools,
    SandboxResult,
    SandboxUnavailableError,
    arun_python,
    isolation,
    run_python,
)


def test_result_carries_stdout_stderr_exit_code_and_mode(bwrap_mode):
    result = run_python("import sys\nprint('out')\nprint('err', file=sys.stderr)\nsys.exit(3)", mode=bwrap_mode)
    assert isinstance(result, SandboxResult)
    assert (result.stdout, result.stderr, result.exit_code) == ("out\n", "err\n", 3)
    assert not result.timed_out and result.limit is None and result.mode == "bwrap" and result.duration >= 0
    assert not result.ok


def test_successful_run_is_ok(bwrap_mode):
    result = run_python("print(sum(range(10)))", mode=bwrap_mode)
    assert result.ok and result.stdout == "45\n"


def test_uncaught_exception_gives_traceback_and_status_1(bwrap_mode):
    result = run_python("def f():\n    raise ValueError('bad')\nf()", mode=bwrap_mode)
    assert result.exit_code == 1
    assert "ValueError: bad" in result.stderr and 'File "<sandbox>", line 2' in result.stderr
    assert "sandbox_worker" not in result.stderr  # the bootstrap's own frames are hidden


def test_stdin_is_readable_by_the_program_and_its_children(bwrap_mode):
    assert run_python("import sys\nprint(sys.stdin.read().upper())", stdin="hello", mode=bwrap_mode).stdout == "HELLO\n"
    assert run_python("import subprocess\nsubprocess.run(['cat'])", stdin="world\n", mode=bwrap_mode).stdout == "world\n"


def test_numpy_works_inside(bwrap_mode):
    pytest.importorskip("numpy")
    result = run_python("import numpy as np\nprint(int(np.arange(5).sum()))", mode=bwrap_mode)
    assert result.stdout == "10\n", result


def test_environment_is_scrubbed(bwrap_mode, monkeypatch):
    monkeypatch.setenv("GEM_TEST_SECRET", "hunter2")
    result = run_python("import os\nprint(sorted(os.environ))\nprint(os.environ.get('GEM_TEST_SECRET'))", mode=bwrap_mode)
    assert "hunter2" not in result.stdout and "None" in result.stdout


def test_a_worker_is_never_reused(bwrap_mode):
    code = "import builtins, os\nprint(hasattr(builtins, 'gem_mark'), os.path.exists('/tmp/mark'))\nbuiltins.gem_mark = 1\nopen('/tmp/mark', 'w').close()"
    first = run_python(code, mode=bwrap_mode)
    second = run_python(code, mode=bwrap_mode)
    assert first.stdout == second.stdout == "False False\n"


def test_memory_limit_is_per_call(bwrap_mode):
    code = "x = bytearray(300 * 1024 * 1024)\nprint('allocated')"
    assert run_python(code, memory_mb=128, mode=bwrap_mode).limit == "memory"
    assert run_python(code, memory_mb=1024, mode=bwrap_mode).stdout == "allocated\n"


def test_timeout_is_reported(bwrap_mode):
    result = run_python("import time\ntime.sleep(30)", timeout=0.5, mode=bwrap_mode)
    assert result.timed_out and result.limit == "time" and result.exit_code is None


def test_file_size_limit(bwrap_mode):
    result = run_python("open('/tmp/big', 'wb').write(b'x' * (64 * 1024 * 1024))", mode=bwrap_mode)
    assert result.limit == "file_size", result


def test_output_cap_is_configurable(bwrap_mode):
    pool = SandboxPool(bwrap_mode, SandboxConfig(max_output_bytes=1000, pool_size=0, preload=()))
    try:
        result = pool.run("print('y' * 5000)")
    finally:
        pool.close()
    assert result.limit == "output" and len(result.stdout) <= 1000


async def test_arun_python_does_not_block_the_event_loop(bwrap_mode):
    ticks = 0

    async def ticker():
        nonlocal ticks
        while True:
            ticks += 1
            await asyncio.sleep(0.01)

    task = asyncio.create_task(ticker())
    results = await asyncio.gather(*(arun_python(f"import time\ntime.sleep(0.3)\nprint({i})", mode=bwrap_mode) for i in range(4)))
    task.cancel()
    assert [r.stdout for r in results] == [f"{i}\n" for i in range(4)]
    assert ticks > 5  # the loop kept running while the snippets slept


def test_process_mode_runs_and_reports_itself():
    result = run_python("print('weak')", mode="process")
    assert result.stdout == "weak\n" and result.mode == "process"


def test_env_var_chooses_the_mode(monkeypatch):
    monkeypatch.setenv("GEM_SANDBOX", "process")
    assert run_python("print(1)").mode == "process"


def test_unknown_mode_is_an_error():
    with pytest.raises(ValueError, match="bwrap, process"):
        run_python("print(1)", mode="docker")


def test_refuses_to_fall_back_when_bwrap_is_missing(monkeypatch):
    monkeypatch.setattr(isolation, "bwrap_binary", lambda: None)
    monkeypatch.delenv("GEM_SANDBOX", raising=False)
    isolation.probe_cached.cache_clear()
    try:
        with pytest.raises(SandboxUnavailableError, match="apt-get install -y bubblewrap.*mode='process'"):
            run_python("print(1)")
        assert sandbox.available_modes() == ["process"]
    finally:
        isolation.probe_cached.cache_clear()


def test_refuses_bwrap_where_the_kernel_cannot_report_socket_memory(monkeypatch, bwrap_mode):
    """Socket buffers count toward memory_mb through sock_diag (issue 47.1); without it they would read 0."""

    def no_sock_diag():
        raise OSError(22, "the kernel's sock_diag cannot report Unix and netlink sockets")

    monkeypatch.setattr(isolation, "check_available", no_sock_diag)
    isolation.probe_cached.cache_clear()
    try:
        with pytest.raises(SandboxUnavailableError, match="unix_diag netlink_diag"):
            sandbox.resolve_mode("bwrap")
    finally:
        isolation.probe_cached.cache_clear()


def test_pool_survives_fork(bwrap_mode):
    """A forked child (process backends) uses its own workers, and its copies of the parent's pipes do not
    stall the parent's snippets while it lives."""
    import os
    import time

    pool = SandboxPool(bwrap_mode, SandboxConfig(pool_size=2, preload=(), zygote=False))
    try:
        assert pool.run("print('parent')").stdout == "parent\n"
        for _ in range(600):  # wait until the pool is full: the parent's next snippet runs in a worker from before the fork
            if pool._ready.qsize() == 2:
                break
            time.sleep(0.05)
        forked_worker = pool._ready.queue[0]
        results_read, results_write = os.pipe()
        go_read, go_write = os.pipe()
        child = os.fork()
        if child == 0:  # pragma: no cover - runs in the child
            try:
                os.read(go_read, 1)  # stay alive until the parent has run its snippet
                os.write(results_write, pool.run("print('child')").stdout.encode())
            finally:
                os._exit(0)
        os.close(results_write)
        parent = pool.run("print('parent again')", timeout=10)
        os.write(go_write, b"x")
        os.waitpid(child, 0)
        assert os.read(results_read, 100) == b"child\n"
        assert not parent.timed_out and parent.stdout == "parent again\n"
        assert forked_worker.process.returncode is not None  # that worker was the one used
        for fd in (results_read, go_read, go_write):
            os.close(fd)
    finally:
        pool.close()


def test_zygote_pool_survives_fork(bwrap_mode):
    """A forked child starts a zygote of its own; the parent's keeps serving the parent meanwhile."""
    import os

    pool = SandboxPool(bwrap_mode, SandboxConfig(pool_size=1, preload=()))
    try:
        assert pool.run("print('parent')").stdout == "parent\n"
        parents_zygote = pool.zygote()
        results_read, results_write = os.pipe()
        go_read, go_write = os.pipe()
        child = os.fork()
        if child == 0:  # pragma: no cover - runs in the child
            try:
                os.read(go_read, 1)
                os.write(results_write, pool.run("print('child')").stdout.encode())
            finally:
                os._exit(0)
        os.close(results_write)
        parent = pool.run("print('parent again')", timeout=10)
        os.write(go_write, b"x")
        os.waitpid(child, 0)
        assert os.read(results_read, 100) == b"child\n"
        assert not parent.timed_out and parent.stdout == "parent again\n"
        assert pool.zygote() is parents_zygote and parents_zygote.alive()
        for fd in (results_read, go_read, go_write):
            os.close(fd)
    finally:
        pool.close()


def test_importing_the_sandbox_starts_nothing():
    """Issue 13: no pools, threads, atexit handlers or environment reads at import."""
    import subprocess
    import sys

    probe = (
        "import atexit, os, threading\n"
        "import gem_core.registry\n"  # the package's base (gymnasium, the env class), not under test here
        "before = atexit._ncallbacks()\n"
        "os.environ['GEM_SANDBOX_POOL'] = 'not a number'\n"  # read at import, this would raise
        "import gem_core.tools.sandbox as sandbox\n"
        "from gem_core.tools.sandbox import pool\n"
        "print(threading.active_count(), atexit._ncallbacks() - before, pool._default is None)"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60)
    assert done.stdout.split() == ["1", "0", "True"], done.stderr


def test_pools_are_closed_explicitly_and_kill_their_workers(bwrap_mode):
    pools = SandboxPools(pool_size=1)
    assert pools.pool(bwrap_mode).run("print(5)").stdout == "5\n"
    zygote = pools.pool(bwrap_mode).zygote()
    pools.close()
    assert zygote.process.returncode is not None  # killed, not left to the interpreter's exit
    workers = SandboxPool("process", SandboxConfig(pool_size=1, preload=()))
    assert workers.run("print(6)").stdout == "6\n"
    for _ in range(600):  # the pool refills one worker in the background
        if workers._ready.qsize() == 1:
            break
        time.sleep(0.05)
    (waiting,) = list(workers._ready.queue)
    workers.close()
    assert waiting.process.returncode is not None and workers._ready.qsize() == 0


def test_a_bad_pool_size_names_the_variable(monkeypatch):
    monkeypatch.setenv("GEM_SANDBOX_POOL", "many")
    with pytest.raises(ValueError, match="GEM_SANDBOX_POOL"):
        SandboxPools()


def test_a_called_function_returns_its_value_through_the_supervisor(bwrap_mode):
    code = "class Solution:\n    def add(self, a, b):\n        print('noise')\n        return [a + b]"
    result = run_python(code, call=FunctionCall("add", [2, 3]), mode=bwrap_mode)
    assert result.ok and result.returned == "[5]" and result.stdout == "noise\n"
    missing = run_python("x = 1", call=FunctionCall("add", [2, 3]), mode=bwrap_mode)
    assert missing.exit_code == 1 and missing.returned is None and "define a function named add" in missing.stderr


def test_a_zygote_that_cannot_start_falls_back_to_a_sandbox_per_call(bwrap_mode, monkeypatch, caplog):
    from gem_core.tools.sandbox import zygote

    def refuse(self, timeout=60.0):
        self.close()
        raise SandboxUnavailableError("no nested namespaces here")

    monkeypatch.setattr(zygote.Zygote, "wait_ready", refuse)
    pool = SandboxPool(bwrap_mode, SandboxConfig(pool_size=1, preload=()))
    try:
        with caplog.at_level("WARNING", logger="gem.tools.sandbox"):
            first = pool.run("import os\nprint(os.getpid())")
            second = pool.run("print('again')")
    finally:
        pool.close()
    assert first.ok and second.stdout == "again\n"
    assert [r.message for r in caplog.records].count(
        "The sandbox zygote cannot run here (no nested namespaces here); starting a sandbox per call instead."
    ) == 1


@pytest.mark.parametrize("zygote", [True, False], ids=["zygote", "sandbox-per-call"])
def test_an_interpreter_in_a_virtualenv_under_tmp_can_start_children(bwrap_mode, zygote):
    """A CI clone under /tmp has its virtualenv there: each call's fresh /tmp must not hide it (it did,
    on the zygote path: ``sys.executable`` was missing inside, so ``subprocess`` of it failed)."""
    import subprocess as host_subprocess
    import tempfile

    from gem_core.tools.sandbox import SandboxConfig, SandboxPool

    with tempfile.TemporaryDirectory(dir="/tmp") as root:
        venv = f"{root}/venv"
        host_subprocess.run([sys.executable, "-m", "venv", "--without-pip", venv], check=True, timeout=120)
        pool = SandboxPool(bwrap_mode, SandboxConfig(python=f"{venv}/bin/python", pool_size=1, zygote=zygote, preload=()))
        try:
            result = pool.run(
                "import os, subprocess, sys\n"
                "print(sys.executable, os.path.exists(sys.executable))\n"
                "print(subprocess.run([sys.executable, '-c', 'print(6 * 7)'], capture_output=True, text=True).stdout.strip())\n"
                "try:\n    open(os.path.join(os.path.dirname(os.path.dirname(sys.executable)), 'planted'), 'w')\nexcept OSError:\n    print('read-only')\n",
                timeout=20,
            )
        finally:
            pool.close()
        assert result.stdout.splitlines() == [f"{venv}/bin/python True", "42", "read-only"], result


@pytest.mark.parametrize("zygote", [True, False], ids=["zygote", "sandbox-per-call"])
def test_an_interpreter_started_by_a_relative_path_runs_snippets(bwrap_mode, zygote, tmp_path):
    """``../venv/bin/python train.py`` gives ``sys.executable`` as ``CWD/../venv/bin/python``, unnormalised, and
    the sandbox hides the working directory: a path through it named no file inside, so every call failed
    (the zygote, then the sandbox per call it fell back to)."""
    import subprocess as host_subprocess

    workdir = tmp_path / "project"
    workdir.mkdir()
    relative = os.path.relpath(sys.executable, workdir)  # ../../.. up to /, then down to the interpreter
    assert ".." in relative.split(os.sep)
    probe = (
        "import sys\n"
        "from gem_core.tools.sandbox import SandboxConfig, SandboxPool\n"
        "assert '/../' in sys.executable, sys.executable\n"
        f"pool = SandboxPool('bwrap', SandboxConfig(pool_size=1, zygote={zygote}, preload=()))\n"
        "try:\n"
        "    result = pool.run('import subprocess, sys\\nprint(subprocess.run([sys.executable, \"-c\", \"print(6 * 7)\"], "
        "capture_output=True, text=True).stdout.strip())', timeout=20)\n"
        "finally:\n"
        "    pool.close()\n"
        "print(result.stdout.strip(), result.exit_code)\n"
    )
    done = host_subprocess.run([relative, "-c", probe], cwd=workdir, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["42 0"], done.stdout + done.stderr


@pytest.mark.parametrize("zygote", [True, False], ids=["zygote", "sandbox-per-call"])
def test_a_user_without_a_home_directory_runs_snippets(bwrap_mode, zygote, no_home):
    """No ``~`` (a container's random uid): there is no home to hide, and the sandbox starts without one."""
    assert_a_fresh_pool_runs_a_snippet(bwrap_mode, zygote)


@pytest.mark.parametrize("zygote", [True, False], ids=["zygote", "sandbox-per-call"])
def test_a_process_whose_working_directory_was_deleted_runs_snippets(bwrap_mode, zygote, tmp_path, monkeypatch):
    """A job whose working directory was removed under it (a cleaned-up scratch folder): there is nothing left
    to hide, and ``Path.cwd()`` raises, which stopped every sandbox from starting."""
    gone = tmp_path / "gone"
    gone.mkdir()
    monkeypatch.chdir(gone)
    gone.rmdir()
    assert_a_fresh_pool_runs_a_snippet(bwrap_mode, zygote)


def assert_a_fresh_pool_runs_a_snippet(mode: str, zygote: bool) -> None:
    """A pool made now (its zygote, or a sandbox per call, started in this process's state) runs ``print(6 * 7)``."""
    from gem_core.tools.sandbox import SandboxConfig, SandboxPool

    pool = SandboxPool(mode, SandboxConfig(pool_size=1, zygote=zygote, preload=()))
    try:
        result = pool.run("print(6 * 7)", timeout=20)
    finally:
        pool.close()
    assert (result.stdout, result.exit_code) == ("42\n", 0), result


def _calls_of(zygote) -> list[int]:
    """Host PIDs of the calls' processes a zygote forked (its children that are PID 2 of their own PID
    namespace, beside the call's init), waiting or running; not the ended ones it has yet to reap, nor
    the inits, nor a helper that is making a network namespace for the next call."""
    from gem_core.tools.sandbox.accounting import process_tree

    def call_process(pid: int) -> bool:
        try:
            with open(f"/proc/{pid}/stat") as file:
                fields = file.read().rsplit(")", 1)[1].split()
            with open(f"/proc/{pid}/status") as file:
                namespace_pids = next(line.split()[1:] for line in file if line.startswith("NSpid:"))
        except (OSError, StopIteration):
            return False
        if fields[0] in ("Z", "X") or int(fields[6]) & 0x4:  # dead, or exiting (PF_EXITING)
            return False
        return namespace_pids[-1] == "2"

    return [pid for pid, depth in process_tree(zygote.process.pid) if depth == 4 and call_process(pid)]


def zygote_interpreter_pid(zygote) -> int:
    """The zygote's interpreter: the deepest process of the sandbox before any call (bwrap, its init, the
    interpreter that made the zygote's PID namespace and waits for it, then the zygote)."""
    from gem_core.tools.sandbox.accounting import process_tree

    return next(pid for pid, depth in process_tree(zygote.process.pid) if depth == 3)


def test_a_zygote_keeps_calls_forked_ahead_and_uses_each_once(bwrap_mode):
    """Issue 23: a snippet is handed to a call that was forked, isolated and dropped its privileges before
    it came; taking one orders its replacement, and no call ever runs two snippets."""
    pool = SandboxPool(bwrap_mode, SandboxConfig(pool_size=2, preload=()))
    try:
        code = "import os\nprint(os.getpid(), os.getppid(), os.path.exists('/tmp/mark'))\nopen('/tmp/mark', 'w').close()"
        first = pool.run(code)
        zygote = pool.zygote()
        waiting: list[int] = []
        for _ in range(1200):  # the replacement is forked while the caller goes on
            calls = _calls_of(zygote)
            if len(calls) == 2 and calls == waiting:  # the same two twice: not the used call, killed but not yet dead
                break
            waiting = calls
            time.sleep(0.05)
        assert len(zygote._forked) == 2 and len(waiting) == 2
        second = pool.run(code)
        # A call's snippet is PID 2 beside the call's own init (its parent, the zygote, is outside its
        # PID namespace), and /tmp is its own.
        assert first.stdout == second.stdout == "2 0 False\n", (first, second)
        for _ in range(1200):  # the call that ran it is killed (and reaped) right after
            if set(waiting) - set(_calls_of(zygote)):
                break
            time.sleep(0.05)
        assert set(waiting) - set(_calls_of(zygote)), "the snippet did not run in a call forked ahead of it"
    finally:
        pool.close()


def test_the_zygotes_rehearsal_of_a_call_leaves_nothing_a_call_sees(bwrap_mode):
    """Issue 46: the zygote walks a call's path before forking any (so Python's warm-up writes are shared,
    not copied in each call). A call still gets Python's own SIGINT handling, the zygote's SIGINT stays the
    default (its calls' inits share its handlers), and no descriptor the walk opened is left in the zygote."""
    pool = SandboxPool(bwrap_mode, SandboxConfig(pool_size=1, preload=()))
    try:
        code = (
            "import os, signal\n"
            "print(signal.getsignal(signal.SIGINT) is signal.default_int_handler)\n"
            "try:\n    os.kill(os.getpid(), signal.SIGINT)\n    signal.pause()\nexcept KeyboardInterrupt:\n    print('interrupted')"
        )
        result = pool.run(code, timeout=30)
        assert result.stdout == "True\ninterrupted\n", result
        zygote = zygote_interpreter_pid(pool.zygote())
        with open(f"/proc/{zygote}/status") as file:
            caught = int(next(line.split()[1] for line in file if line.startswith("SigCgt:")), 16)
        assert not caught & (1 << (signal.SIGINT - 1)), hex(caught)
        # Its control socket, its PID namespace, a status socket and a pidfd per call, network namespaces:
        # no memfd, pipe or socket of the walk's. An order for a call holds pipes until the call is forked:
        # wait (bounded) for the zygote to be idle.
        deadline = time.monotonic() + 60
        while True:
            links = _fd_links(zygote)
            if not any(link.startswith("pipe:") for link in links) or time.monotonic() > deadline:
                break
            time.sleep(0.05)
        assert not [link for link in links if link.startswith(("/memfd:", "pipe:"))], links
        assert sum(link.startswith("socket:") for link in links) <= 1 + 2 * pool.config.pool_size, links
        assert sum(link == "anon_inode:[pidfd]" for link in links) <= 2 * pool.config.pool_size, links
    finally:
        pool.close()


def _fd_links(pid: int) -> list[str]:
    """What each open descriptor of ``pid`` is; one closed between the listing and its readlink is left out (the
    zygote closes an order's pipes as it forks the call: CI read a listed descriptor that was gone)."""
    links = []
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            links.append(os.readlink(f"/proc/{pid}/fd/{fd}"))
        except FileNotFoundError:
            continue
    return links


def test_closing_a_pool_kills_the_calls_waiting_for_a_snippet(bwrap_mode):
    from gem_core.tools.sandbox.accounting import process_tree

    pool = SandboxPool(bwrap_mode, SandboxConfig(pool_size=3, preload=()))
    assert pool.run("print(1)").ok
    zygote = pool.zygote()
    deadline = time.monotonic() + 60  # bounded, and generous: the refills queue for a core on a loaded machine
    while len(_calls_of(zygote)) != 3 and time.monotonic() < deadline:  # the used call may still be being reaped
        time.sleep(0.05)
    assert len(_calls_of(zygote)) >= 3
    everything = [pid for pid, _ in process_tree(zygote.process.pid)]
    assert len(everything) >= 4 + 2 * 3  # bwrap, its init, the zygote (two processes), each call's init and process
    pool.close()
    deadline = time.monotonic() + 60
    left = everything
    while left and time.monotonic() < deadline:
        left = [pid for pid in everything if os.path.exists(f"/proc/{pid}")]
        time.sleep(0.05)
    assert not left


def test_a_killed_zygote_is_replaced_and_its_waiting_calls_are_not_used(bwrap_mode):
    import signal

    pool = SandboxPool(bwrap_mode, SandboxConfig(pool_size=2, preload=()))
    try:
        assert pool.run("print(1)").ok
        first = pool.zygote()
        os.kill(zygote_interpreter_pid(first), signal.SIGKILL)  # the calls waiting in its sandbox die with it
        first.process.wait(timeout=30)
        result = pool.run("print('after')")
        assert result.ok and result.stdout == "after\n", result
        assert pool.zygote() is not first and pool.zygote().alive()
    finally:
        pool.close()


def test_a_waiting_call_cannot_be_handed_a_snippet_by_another_call(bwrap_mode):
    """The calls waiting for their snippets sit in PID namespaces of their own: a snippet sees only its
    own PID 1 and itself, so it can neither read nor write another call's request."""
    pool = SandboxPool(bwrap_mode, SandboxConfig(pool_size=3, preload=()))
    try:
        result = pool.run("import os\nprint(sorted(int(p) for p in os.listdir('/proc') if p.isdigit()))")
    finally:
        pool.close()
    assert result.stdout == "[1, 2]\n", result


def _wait_until_thread_is_gone(native_id: int) -> None:
    """Block until the OS thread ``native_id`` of this process has ended for the kernel too (a joined
    Python thread may still be exiting), bounded."""
    deadline = time.monotonic() + 60
    while os.path.exists(f"/proc/self/task/{native_id}") and time.monotonic() < deadline:
        time.sleep(0.01)
    assert not os.path.exists(f"/proc/self/task/{native_id}")


def test_a_zygote_started_from_a_thread_that_ended_keeps_running_calls(bwrap_mode):
    """bubblewrap's ``--die-with-parent`` (``PR_SET_PDEATHSIG``) follows the thread that started it, not its
    process: a zygote started by one of several caller threads was killed when that thread ended, and
    every call still running in it ended with exit 70 and no status (the flaky four-call tests of
    test_sandbox_shared_memory.py)."""
    pool = SandboxPool(bwrap_mode, SandboxConfig(pool_size=1, preload=()))
    try:
        started: list[int] = []

        def start_the_zygote() -> None:
            started.append(threading.get_native_id())
            assert pool.run("print(1)").ok

        starter = threading.Thread(target=start_the_zygote)
        starter.start()
        starter.join(120)
        first = pool.zygote()  # the one the thread started (or a replacement, had it died already)
        _wait_until_thread_is_gone(started[0])
        result = pool.run("import time\ntime.sleep(0.5)\nprint('done')")
        assert result.ok and result.stdout == "done\n", result
        assert pool.zygote() is first and first.alive(), "the zygote died with the thread that started it"
    finally:
        pool.close()


def test_a_call_whose_zygote_dies_while_it_runs_is_run_again_on_a_new_zygote(bwrap_mode):
    """A call's PID 1 dies with its zygote and sends no status: the host used to report exit 70 with no
    limit and no output, a result with no reason. The zygote's end is the host's affair, not the
    snippet's: the call runs again on a new zygote (a snippet has no effect outside its sandbox)."""
    import signal

    from gem_core.tools.sandbox.accounting import process_tree

    pool = SandboxPool(bwrap_mode, SandboxConfig(pool_size=1, preload=()))
    try:
        assert pool.run("print(1)").ok
        first = pool.zygote()
        code = "import ctypes, time\nctypes.CDLL(None).prctl(15, b'gem-running', 0, 0, 0)  # PR_SET_NAME\ntime.sleep(2)\nprint('done')"
        results: list[SandboxResult] = []
        caller = threading.Thread(target=lambda: results.append(pool.run(code, timeout=60)))
        caller.start()

        def running() -> bool:
            for pid, _ in process_tree(first.process.pid):
                try:
                    with open(f"/proc/{pid}/comm") as comm:
                        if comm.read().strip() == "gem-running":
                            return True
                except OSError:
                    continue
            return False

        deadline = time.monotonic() + 60
        while not running() and time.monotonic() < deadline:
            time.sleep(0.01)
        assert running(), "the snippet never started"
        os.kill(zygote_interpreter_pid(first), signal.SIGKILL)  # the call running in it dies with it
        caller.join(120)
        assert results and results[0].ok and results[0].stdout == "done\n", results
        assert pool.zygote() is not first and pool.zygote().alive()
    finally:
        pool.close()


@pytest.mark.parametrize(("sample_interval", "refilled_while_running"), [(60.0, False), (0.01, True)])
def test_a_zygote_call_orders_its_replacement_after_a_short_call_not_while_it_runs(bwrap_mode, sample_interval, refilled_while_running):
    """Issue 46: forking and setting up a replacement costs more CPU than a short call, so it is ordered
    once the call ends or has run for a sample interval, whichever comes first; a long call's
    replacement is still forked while it runs."""
    pool = SandboxPool(bwrap_mode, SandboxConfig(pool_size=1, preload=(), sample_interval=sample_interval))
    try:
        pool.run("pass")
        zygote = pool.zygote()
        deadline = time.monotonic() + 30
        while len(zygote._forked) < 1 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert len(zygote._forked) == 1
        result: list = []
        runner = threading.Thread(target=lambda: result.append(pool.run("import time\ntime.sleep(1.5)", timeout=30)))
        runner.start()
        while len(zygote._forked) == 1 and runner.is_alive():  # until the call took the waiting one
            time.sleep(0.005)
        time.sleep(0.5)  # the call runs: long past a 0.01 s sample interval, far from 60 s
        assert (len(zygote._forked) == 1) is refilled_while_running
        runner.join(30)
        assert result and result[0].ok, result
        assert len(zygote._forked) == 1  # ordered at the latest when the call ended
    finally:
        pool.close()


def _stopping_the_zygote_while_each_call_runs(monkeypatch) -> None:
    """Stop (SIGSTOP) a call's zygote as soon as the host knows the call started, before the hand-over,
    and let it go on (SIGCONT) when the host is done with the call: the zygote, the parent of the call's
    process, then says nothing of how that process ended while the host waits."""
    from gem_core.tools.sandbox import zygote as zygote_module

    started, run = zygote_module._ForkedCall.started, zygote_module.Zygote.run

    def run_with_the_zygote_stopped(self, request, timeout):
        interpreter = zygote_interpreter_pid(self)

        def started_then_stopped(call, deadline):
            pid = started(call, deadline)
            if pid is not None:
                os.kill(interpreter, signal.SIGSTOP)
            return pid

        monkeypatch.setattr(zygote_module._ForkedCall, "started", started_then_stopped)
        try:
            return run(self, request, timeout)
        finally:
            os.kill(interpreter, signal.SIGCONT)
            monkeypatch.setattr(zygote_module._ForkedCall, "started", started)

    monkeypatch.setattr(zygote_module.Zygote, "run", run_with_the_zygote_stopped)


def test_a_zygote_calls_status_comes_back_from_the_snippets_report_without_its_zygote(bwrap_mode, monkeypatch):
    """Issue 46: the way back is one wake-up, as for a fork and exit: the host takes the status from the
    snippet's report once the kernel shows its process exiting with the claimed wait status, so a call
    ends with no word from the process's parent (it used to wait for the call's PID 1's status; the
    zygote is that parent now)."""
    _stopping_the_zygote_while_each_call_runs(monkeypatch)
    pool = SandboxPool(bwrap_mode, SandboxConfig(pool_size=1, preload=()))
    try:
        result = pool.run("print(1 + 1)\nraise SystemExit(3)", timeout=10)
        called = pool.run("def f(x):\n    return x * 2", call=FunctionCall("f", [21]), timeout=10)
    finally:
        pool.close()
    assert result.exit_code == 3 and result.stdout == "2\n" and not result.timed_out, result
    assert called.ok and called.returned == "42", called


def test_without_a_confirmed_report_a_zygote_call_waits_for_its_zygote(bwrap_mode, monkeypatch):
    """What the kernel does not confirm (a death by signal after a report claiming exit 0) never ends a
    call from the report: only the zygote, the process's parent, says how it ended; stopped, it says
    nothing and the call times out."""
    _stopping_the_zygote_while_each_call_runs(monkeypatch)
    pool = SandboxPool(bwrap_mode, SandboxConfig(pool_size=1, preload=()))
    try:
        forged = pool.run(FORGED_THEN_KILLED, timeout=1.5)
    finally:
        pool.close()
    assert forged.timed_out and forged.exit_code is None, forged


FORGED_THEN_KILLED = """
import os, signal
for fd in range(3, 64):
    try:
        os.write(fd, b'{"wait_status": 0}\\n')
    except OSError:
        pass
os.kill(os.getpid(), signal.SIGKILL)
"""


def test_claims_a_snippet_writes_itself_keep_the_host_polling_proc_at_most_once(bwrap_mode, monkeypatch):
    """The snippet holds its report pipe: each line it writes there must not start another 2 ms of
    polling /proc in the host (a CPU cost a hostile snippet could multiply); after one unconfirmed claim
    the zygote's status decides, and the status is still right."""
    from gem_core.tools.sandbox import zygote as zygote_module

    checks = []
    exiting_with = zygote_module._SnippetProcess.exiting_with

    def counted(self, claimed, patience=0.002):
        checks.append(claimed)
        return exiting_with(self, claimed, patience)

    monkeypatch.setattr(zygote_module._SnippetProcess, "exiting_with", counted)
    pool = SandboxPool(bwrap_mode, SandboxConfig(pool_size=1, preload=()))
    try:
        result = pool.run(CLAIMS_THEN_EXIT, timeout=20)
    finally:
        pool.close()
    assert result.exit_code == 3 and not result.timed_out, result
    assert len(checks) == 1, checks


CLAIMS_THEN_EXIT = """
import os, time
for _ in range(20):
    for fd in range(3, 64):
        try:
            os.write(fd, b'{"wait_status": 0}\\n')
        except OSError:
            pass
    time.sleep(0.01)
os._exit(3)
"""


ORPHANS_HOLDING_MEMORY = """
import os, time
for _ in range(4):  # each orphan holds 48 MiB, under the per-process limit; four of them pass a 128 MiB cap
    if os.fork() == 0:
        if os.fork() == 0:
            time.sleep(0.2)  # its parent has exited: it is the call's init's now, not below the snippet
            block = bytearray(48 << 20)
            block[::4096] = b'x' * len(range(0, len(block), 4096))
            time.sleep(30)
        os._exit(0)
    os.wait()
time.sleep(20)
"""


def test_memory_held_by_a_zygote_calls_orphans_counts_toward_its_cap(bwrap_mode):
    """A zygote call's process is not below the call's init (the zygote forks both), and its orphans go
    to the init: the host counts what is below either, or a snippet's double-forked children held memory
    past the cap uncounted."""
    pool = SandboxPool(bwrap_mode, SandboxConfig(pool_size=1, preload=()))
    try:
        result = pool.run(ORPHANS_HOLDING_MEMORY, memory_mb=128, timeout=15)
    finally:
        pool.close()
    assert result.limit == "memory" and not result.timed_out, result


def test_a_host_holding_more_than_1024_descriptors_still_runs_zygote_calls(bwrap_mode):
    """A trainer with hundreds of calls in flight holds descriptors numbered past 1024, where the
    host's ``select`` raised ``ValueError: filedescriptor out of range`` and the call was lost."""
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard < 1200:
        pytest.skip(f"the hard limit of open files here is {hard}")
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, 1200), hard))
    held = [os.open(os.devnull, os.O_RDONLY) for _ in range(1100)]
    pool = SandboxPool(bwrap_mode, SandboxConfig(pool_size=2, preload=()))
    try:
        results = [pool.run("print(6 * 7)", timeout=30) for _ in range(3)]
    finally:
        pool.close()
        for fd in held:
            os.close(fd)
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
    assert [result.stdout for result in results] == ["42\n"] * 3, results


def test_a_zygote_started_under_a_low_soft_limit_serves_more_calls_at_once_than_it_allows(bwrap_mode):
    """The zygote keeps two descriptors per running call (its status socket, its process's pidfd), and one
    network namespace: under the soft limit it inherited (1024 on many machines) it could not take the
    descriptors of the next call past a few hundred at once, so it raises its soft limit to the hard one.
    Here it starts under a soft limit a few descriptors above what this process holds (the host's limit is
    back before any call) and serves more calls at once than that limit allows it three descriptors each."""
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    inherited = len(os.listdir("/proc/self/fd")) + 40  # room for starting the zygote and its first call, no more
    resource.setrlimit(resource.RLIMIT_NOFILE, (inherited, hard))
    try:
        pool = SandboxPool(bwrap_mode, SandboxConfig(pool_size=1, preload=()))
        pool.run("pass", timeout=30)  # the zygote starts here, under that limit
        first = pool.zygote()
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
    calls = inherited // 3 + 16
    results: list = []
    try:
        callers = [
            threading.Thread(target=lambda: results.append(pool.run("import time\ntime.sleep(2)\nprint('done')", timeout=60)))
            for _ in range(calls)
        ]
        for caller in callers:
            caller.start()
        for caller in callers:
            caller.join(120)
        same_zygote = pool.zygote() is first and first.alive()
    finally:
        pool.close()
    assert len(results) == calls and all(result.stdout == "done\n" for result in results), results
    assert same_zygote, "the zygote died (the calls ran on a replacement or a sandbox each)"
