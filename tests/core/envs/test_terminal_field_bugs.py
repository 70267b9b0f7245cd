"""Terminal env defects found in the field: the work directory's cap checked only while a command runs, and
commands too long to be one argument of ``bash -c``."""

from __future__ import annotations

import sys

import pytest
from ci_guard import skip_unless_ci

from gem_core.envs.terminal.terminal_env import TerminalEnv
from gem_core.tools import sandbox
from gem_core.tools.sandbox import SandboxConfig, isolation
from gem_core.tools.sandbox import worker as worker_module
from gem_core.tools.sandbox.accounting import SandboxMonitor
from gem_core.tools.sandbox.pool import SandboxPool
from gem_core.tools.sandbox.shell import WorkDir, run_shell

#: The kernel's limit on one argument (MAX_ARG_STRLEN, 32 pages of 4 KiB), its terminating NUL included.
ARGUMENT_LIMIT = 128 * 1024


@pytest.fixture(scope="module", autouse=True)
def needs_bwrap():
    if "bwrap" not in sandbox.available_modes():
        skip_unless_ci(f"bubblewrap is not usable here: {isolation.probe_cached('bwrap', sys.executable)}")


def bash(command: str) -> str:
    return f"```bash\n{command}\n```"


@pytest.fixture
def rare_walks(monkeypatch):
    """Only a command's first sample walks the work directory (taken before the commands below write):
    each then ends between two walks, as a fast one does with the shipped interval."""
    monkeypatch.setattr(SandboxMonitor, "WORK_DIR_EVERY", 10**9)


@pytest.mark.parametrize("mode", ["bwrap", "process"])
def test_a_command_that_fills_the_work_dir_between_two_walks_ends_the_episode(rare_walks, mode):
    """The cap was sampled only while the command ran: one that wrote 4 MiB under a 2 MiB cap and ended before
    the next walk reported no limit, the episode went on, and the bytes stayed on the host's disk."""
    env = TerminalEnv(max_work_mb=2, command_timeout=5.0, sandbox=mode)
    try:
        env.reset(seed=0, options={"task": "count_errors"})
        observation, reward, terminated, _, info = env.step(bash("sleep 0.3; head -c 4000000 /dev/zero > big"))
        assert (reward, terminated, info.get("limit")) == (0.0, True, "disk"), observation
        assert "full" in observation
    finally:
        env.close()


def test_a_full_work_dir_outranks_the_timeout_that_stopped_the_command(rare_walks):
    """A command that filled the directory and then ran out of time was reported as timed out only, so the
    episode went on with the directory over its cap."""
    env = TerminalEnv(max_work_mb=2, command_timeout=1.5)
    try:
        env.reset(seed=0, options={"task": "count_errors"})
        observation, _, terminated, _, info = env.step(bash("sleep 0.3; head -c 4000000 /dev/zero > big; sleep 30"))
        assert (terminated, info.get("limit")) == (True, "disk"), observation
    finally:
        env.close()


def test_a_call_without_a_work_dir_never_walks_one(monkeypatch):
    """The check after the end costs a walk of the directory: a Python snippet, which has none, must not pay it."""
    walks = []
    monkeypatch.setattr(worker_module, "work_dir_over", lambda *args: walks.append(args) or False)
    result = SandboxPool("bwrap", SandboxConfig(pool_size=0, zygote=False, preload=())).run("print('hi')", timeout=10)
    assert (result.ok, walks) == (True, [])


def test_a_command_too_long_for_one_argument_runs():
    """A command past 128 KiB was handed to bash as one argument: execvp failed with E2BIG in the sandbox and
    the agent was shown the harness's traceback as 'Exit code: 1'."""
    env = TerminalEnv(command_timeout=5.0)
    try:
        env.reset(seed=0, options={"task": "count_errors"})
        observation, reward, terminated, _, info = env.step(bash("echo " + "x" * 200_000 + " | wc -c"))
        assert "Traceback" not in observation and "execvp" not in observation, observation[:300]
        assert (info["exit_code"], info["limit"], terminated) == (0, None, False), observation[:300]
        assert "200001" in observation
    finally:
        env.close()


@pytest.mark.parametrize("length", [ARGUMENT_LIMIT - 1, ARGUMENT_LIMIT, 300_000])
def test_long_commands_run_like_short_ones(length):
    """Either side of the limit a command runs the same: several lines, a here-document, an empty stdin, the
    work directory as its directory (its lines padded to ``length`` bytes with a comment)."""
    work = WorkDir()
    try:
        command = (
            "cat > notes.txt <<'EOF'\nhello\nEOF\n"
            "read -r line || echo stdin-empty\n"
            "pwd; wc -c < notes.txt\n"
        )
        command += "#" + "y" * (length - len(command.encode()) - 1)
        assert len(command.encode()) == length
        result = run_shell(command, work, timeout=10)
        assert (result.exit_code, result.limit) == (0, None), result.stderr[-500:]
        assert result.stdout.split() == ["stdin-empty", "/workspace", "6"]
    finally:
        work.close()
