"""Hostile programs, each run through the Python tool in the bubblewrap sandbox.

Every case checks both sides: the tool answers (an observation, never an exception) and the host is
untouched (no file written, nothing read, no process left, the test process alive, the sandbox still
usable afterwards).
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
import uuid
from pathlib import Path

import pytest

from gem_core.tools import sandbox
from gem_core.tools.sandbox import isolation
from gem_core.tools.python import PythonTool

PROJECT_ROOT = Path(__file__).resolve().parents[3]
TIMEOUT = 2.0


def processes_whose_cmdline_contains(token: str) -> list[int]:
    """Host PIDs whose command line contains ``token``."""
    found = []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            cmdline = Path(f"/proc/{entry.name}/cmdline").read_bytes().replace(b"\0", b" ")
        except OSError:
            continue
        if token.encode() in cmdline:
            found.append(int(entry.name))
    return found


def processes_of_uid(uid: int) -> list[int]:
    found = []
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                if entry.stat().st_uid == uid:
                    found.append(int(entry.name))
            except OSError:
                continue
    return found


def wait_until_gone(find, *args, attempts: int = 50) -> list[int]:
    """``find(*args)`` once it is empty (killed processes take a moment to be reaped), else the last answer."""
    left = find(*args)
    for _ in range(attempts):
        if not left:
            break
        time.sleep(0.1)
        left = find(*args)
    return left


@pytest.fixture(scope="module")
def tool(bwrap_mode):
    return PythonTool(timeout=TIMEOUT, memory_mb=256, mode=bwrap_mode)


def run(tool: PythonTool, code: str):
    (call,) = tool.parse(f"Let me try.\n<python>\n{code}\n</python>")
    result = tool.execute(call)
    assert result.observation.startswith("<output>")
    assert result.info["sandbox_mode"] == "bwrap"
    return result


@pytest.fixture(autouse=True)
def sandbox_still_works_afterwards(request):
    yield
    if "tool" in request.fixturenames:
        after = sandbox.run_python("print(6 * 7)", mode="bwrap")
        assert after.stdout == "42\n", after


def test_fork_bomb_is_contained(tool):
    code = "import os\nprint(os.getuid(), flush=True)\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass"
    result = run(tool, code)
    # Stopped at the timeout, or earlier by the whole-sandbox memory cap (32 interpreters add up).
    assert (result.info["timed_out"] or result.info["limit"] == "memory") and "stopped" in result.observation
    uid = int(result.observation.split("\n")[1])
    if uid != os.getuid():
        assert wait_until_gone(processes_of_uid, uid) == []
    assert subprocess.run(["true"]).returncode == 0  # the host can still start processes


def test_memory_bomb_hits_the_memory_limit(tool):
    result = run(tool, "chunks = []\nwhile True:\n    chunks.append(bytearray(16 * 1024 * 1024))")
    assert result.info["limit"] == "memory"
    assert "out of memory" in result.observation


def test_infinite_loop_times_out(tool):
    result = run(tool, "while True:\n    pass")
    assert result.info["timed_out"] and result.info["limit"] == "time"
    assert f"longer than {TIMEOUT:g} s" in result.observation


def test_cpu_spin_in_a_child_process_is_killed(tool):
    token = uuid.uuid4().hex
    code = (
        "import subprocess, sys\n"
        f"subprocess.Popen([sys.executable, '-c', 'while True: pass  # {token}'])\n"
        "print('child started')"
    )
    result = run(tool, code)
    assert "child started" in result.observation
    assert wait_until_gone(processes_whose_cmdline_contains, token) == []


def test_cpu_spin_in_a_waited_child_times_out(tool):
    token = uuid.uuid4().hex
    code = f"import subprocess, sys\nsubprocess.run([sys.executable, '-c', 'while True: pass  # {token}'])"
    result = run(tool, code)
    assert result.info["timed_out"]
    assert wait_until_gone(processes_whose_cmdline_contains, token) == []


def test_writing_outside_the_sandbox_fails(tool, tmp_path):
    targets = [tmp_path / "escaped.txt", PROJECT_ROOT / f"escaped-{uuid.uuid4().hex}.txt", Path.home() / f"escaped-{uuid.uuid4().hex}"]
    code = "\n".join(
        [
            "import os",
            f"for path in {[str(t) for t in targets]!r} + ['/etc/gem-escaped', '/usr/gem-escaped']:",
            "    try:",
            "        with open(path, 'w') as f:",
            "            f.write('escaped')",
            "        print('WROTE', path)",
            "    except OSError as e:",
            "        print('refused', path, type(e).__name__)",
            "open('/tmp/inside.txt', 'w').write('private')",
            "print('tmp ok', open('/tmp/inside.txt').read())",
        ]
    )
    result = run(tool, code)
    # A path under /tmp names the sandbox's own private /tmp: a checkout under /tmp shows there as the
    # interpreter's mount point, writable when unprivileged. Only the host side (checked below) matters there.
    wrote = [line.split(" ", 1)[1] for line in result.observation.splitlines() if line.startswith("WROTE ")]
    assert all(Path(path).is_relative_to("/tmp") for path in wrote), result.observation
    assert "tmp ok private" in result.observation  # the sandbox has a private, writable /tmp
    for target in targets + [Path("/etc/gem-escaped"), Path("/usr/gem-escaped")]:
        assert not target.exists()


def test_project_and_home_are_not_readable(tool):
    home = Path.home().resolve()
    python_dirs = {Path(d) for d in isolation.python_dirs(sandbox.SandboxConfig().python)}
    # Entries of the home directory that only exist in the sandbox as the path to the Python install.
    on_the_way = {d.relative_to(home).parts[0] for d in python_dirs if d.is_relative_to(home)}
    private = sorted(set(os.listdir(home)) - on_the_way)
    code = "\n".join(
        [
            "import os",
            f"for path in [{str(PROJECT_ROOT / 'pyproject.toml')!r}, {str(Path(__file__).resolve())!r}]:",
            "    try:",
            "        print('READ', open(path).read()[:50])",
            "    except OSError as e:",
            "        print('refused', type(e).__name__)",
            "try:",
            f"    print('HOME', sorted(os.listdir({str(home)!r})))",
            "except OSError as e:",
            "    print('home refused', type(e).__name__)",
        ]
    )
    result = run(tool, code)
    assert "READ" not in result.observation
    # Per line: run unprivileged, the home directory is missing inside too ("home refused FileNotFoundError").
    assert result.observation.splitlines().count("refused FileNotFoundError") == 2
    for name in private:
        assert repr(name) not in result.observation


def test_network_is_unreachable(tool):
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    listener.setblocking(False)
    port = listener.getsockname()[1]
    code = "\n".join(
        [
            "import socket",
            "try:",
            f"    socket.create_connection(('127.0.0.1', {port}), timeout=1)",
            "    print('CONNECTED')",
            "except OSError as e:",
            "    print('no network', type(e).__name__)",
        ]
    )
    try:
        result = run(tool, code)
        with pytest.raises(BlockingIOError):
            listener.accept()  # nobody reached the host's port
    finally:
        listener.close()
    assert "CONNECTED" not in result.observation and "no network" in result.observation


def test_100_megabytes_of_output_are_capped(tool):
    result = run(tool, "import sys\nfor _ in range(100):\n    sys.stdout.write('x' * 1_000_000)")
    assert result.info["limit"] == "output"
    assert len(result.observation) < 10_000
    assert "printed more output than allowed" in result.observation


def test_killing_the_parent_process_does_not_reach_the_host(tool):
    code = "\n".join(
        [
            "import os, signal",
            # 0 would be the snippet's own process group, tried below: a zygote call's parent is outside
            # its PID namespace, where getppid() says 0
            "for target in sorted({os.getppid(), 1, -1} - {0}):",
            "    try:",
            "        os.kill(target, signal.SIGKILL)",
            "    except OSError as e:",
            "        print('refused', target, type(e).__name__)",
            "print('still here')",
        ]
    )
    result = run(tool, code)
    assert "still here" in result.observation and not result.info["timed_out"]
    result = run(tool, "import os, signal\nos.killpg(0, signal.SIGKILL)")  # its whole process group
    assert result.info["exit_code"] == -signal.SIGKILL and "[exit code -9]" in result.observation
    os.kill(os.getpid(), 0)  # the host process is alive (we are running)


def test_sleeping_past_the_timeout_is_stopped(tool):
    result = run(tool, "import time\nprint('going to sleep', flush=True)\ntime.sleep(60)")
    assert result.info["timed_out"]
    assert "going to sleep" in result.observation  # output printed before the timeout is kept


def test_background_process_is_not_left_behind(tool):
    token = str(uuid.uuid4().int % 10**9 + 10**9)
    code = "\n".join(
        [
            "import os, subprocess",
            "if os.fork() == 0:",  # a daemon: new session, parent exits at once
            "    os.setsid()",
            f"    subprocess.Popen(['sleep', '{token}'])",
            "    os._exit(0)",
            "os.wait()",
            f"subprocess.Popen(['sleep', '{token}'], start_new_session=True)",
            "print('left two sleepers')",
        ]
    )
    result = run(tool, code)
    assert result.ok and "left two sleepers" in result.observation
    assert wait_until_gone(processes_whose_cmdline_contains, f"sleep {token}") == []


def test_signals_to_the_calls_pid_1_do_not_cost_the_call_its_status(tool):
    """Unprivileged, a snippet shares its uid with its call's PID 1, which the kernel shields from signals
    sent inside its namespace only where it keeps their default action: the interpreter's SIGINT handler
    made SIGINT a KeyboardInterrupt there, and the call ended with exit 70 and no status."""
    code = "\n".join(
        [
            "import os, signal, time",
            "for number in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGUSR1, signal.SIGPIPE, signal.SIGXFSZ):",
            "    try:",
            "        os.kill(1, number)",
            "    except OSError:",
            "        pass",
            "time.sleep(0.2)",
            "print('still here')",
        ]
    )
    result = run(tool, code)
    assert "still here" in result.observation and result.info["exit_code"] == 0, result
