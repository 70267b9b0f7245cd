"""The terminal env: shipped tasks solved and checked in the sandbox, a working directory that lasts one
episode, hostile commands contained, snapshots that copy files without following links.

The env contract (gymnasium checker, determinism, hostile actions, snapshots) runs over
``terminal:Tasks-v0`` in tests/core/test_env_contract.py and test_env_state.py.
"""

from __future__ import annotations

import os
import pickle
import socket
import sys
import uuid
from pathlib import Path

import pytest
from ci_guard import skip_unless_ci

import gem_core
from gem_core.envs.terminal.terminal_env import SUBMIT, TerminalEnv, extract_command, load_tasks
from gem_core.errors import InvalidArgument
from gem_core.tools import sandbox
from gem_core.tools.sandbox import SandboxConfig, SandboxUnavailableError, isolation
from gem_core.tools.sandbox.shell import WorkDir, run_shell

PROJECT_ROOT = Path(__file__).resolve().parents[3]
TASKS = load_tasks()


@pytest.fixture(scope="module", autouse=True)
def needs_bwrap():
    if "bwrap" not in sandbox.available_modes():
        reason = f"bubblewrap is not usable here: {isolation.probe_cached('bwrap', sys.executable)}"
        skip_unless_ci(reason)


def bash(command: str) -> str:
    return f"```bash\n{command}\n```"


@pytest.fixture
def env():
    env = TerminalEnv(command_timeout=3.0)
    yield env
    env.close()


def solve(env: TerminalEnv) -> tuple[float, dict]:
    env.step(bash(env.task.solution))
    _, reward, terminated, _, info = env.step(bash(SUBMIT))
    assert terminated
    return reward, info


# ------------------------------------------------------------------------------ tasks


def test_about_ten_tasks_ship_with_instructions_files_and_checkers():
    assert 8 <= len(TASKS) <= 12
    for task in TASKS:
        assert task.instructions and task.check.strip() and task.solution.strip(), task.name


def test_the_scripted_solver_solves_seeds_0_to_19_and_every_shipped_task(env):
    seen = set()
    for seed in range(20):
        env.reset(seed=seed)
        seen.add(env.task.name)
        assert solve(env) == (1.0, {"success": True, "checker_exit_code": 0, "checker_limit": None}), (seed, env.task.name)
    for task in TASKS:
        if task.name not in seen:
            env.reset(seed=0, options={"task": task.name})
            assert solve(env)[0] == 1.0, task.name


def test_submitting_without_solving_fails_every_checker(env):
    for task in TASKS:
        env.reset(seed=0, options={"task": task.name})
        _, reward, terminated, _, info = env.step(bash(SUBMIT))
        assert (reward, terminated, info["success"]) == (0.0, True, False), task.name


def test_a_checker_brings_its_own_tests(env):
    """Editing the failing test instead of the code does not pass."""
    env.reset(seed=0, options={"task": "fix_test"})
    env.step(bash("printf 'print(\"ok\")\\n' > test_stats.py && python3 test_stats.py"))
    assert env.step(bash(SUBMIT))[1] == 0.0


def test_action_format(env):
    assert extract_command("```bash\nls -l\n```") == "ls -l"
    assert extract_command("first ```sh pwd``` then ```bash ls```") == "ls"
    assert extract_command("ls") is None and extract_command("```bash\n \n```") is None
    assert extract_command("```bash\necho \x00```") is None
    obs, _ = env.reset(seed=1)
    assert "```bash" in obs and SUBMIT in obs
    obs, reward, terminated, truncated, info = env.step("ls")
    assert info["format_error"] and reward < 0 and not terminated and "```bash" in obs


def test_out_of_turns_truncates_with_no_reward():
    env = TerminalEnv(max_turns=2)
    env.reset(seed=0)
    env.step(bash("true"))
    _, reward, terminated, truncated, info = env.step(bash("true"))
    assert (reward, terminated, truncated, info["success"]) == (0.0, False, True, False)
    env.close()


@pytest.mark.parametrize(
    ("kwargs", "key"),
    [(dict(command_timeout="x"), "command_timeout"), (dict(command_timeout=float("nan")), "command_timeout"),
     (dict(command_timeout=float("inf")), "command_timeout"), (dict(command_timeout=True), "command_timeout"),
     (dict(memory_mb="512"), "memory_mb"), (dict(max_output_chars=99), "max_output_chars"),
     (dict(max_work_mb=2.5), "max_work_mb"), (dict(max_turns="2"), "max_turns"), (dict(tasks=5), "tasks")],
)
def test_a_limit_of_the_wrong_type_or_out_of_range_is_refused_naming_it(kwargs, key):
    """A text used to fail with a bare TypeError, and nan or inf to reach the sandbox as a time limit."""
    with pytest.raises(InvalidArgument, match=key):
        TerminalEnv(**kwargs)


def test_observation_has_exit_code_and_shortened_output():
    env = TerminalEnv(max_output_chars=200)
    env.reset(seed=0)
    obs, _, _, _, info = env.step(bash("seq 1 5000; echo oops >&2; exit 4"))
    assert info["exit_code"] == 4 and "Exit code: 4" in obs and "oops" in obs
    assert "characters cut" in obs and "\n1\n" in obs and "5000" in obs and len(obs) < 800
    env.close()


# ------------------------------------------------------------------------------ working directory


def test_files_last_within_an_episode_and_are_gone_after_it(env):
    env.reset(seed=0)
    first = Path(env.work_dir.path)
    assert env.step(bash("echo kept > mine.txt"))[4]["exit_code"] == 0
    assert (first / "mine.txt").read_text() == "kept\n"  # on the host, in this episode's directory
    obs = env.step(bash("cat mine.txt"))[0]
    assert "kept" in obs
    env.reset(seed=0)
    assert not first.exists() and not first.parent.exists()  # the last episode's directory is deleted
    obs, _, _, _, info = env.step(bash("cat mine.txt"))
    assert info["exit_code"] != 0 and "No such file" in obs
    second = Path(env.work_dir.path)
    env.close()
    assert not second.exists() and env.work_dir is None


def test_two_envs_do_not_share_files():
    one, two = TerminalEnv(), TerminalEnv()
    one.reset(seed=0)
    two.reset(seed=0)
    one.step(bash("echo secret > one.txt"))
    assert two.step(bash("ls"))[0].count("one.txt") == 0
    assert one.work_dir.path != two.work_dir.path
    one.close()
    two.close()


def test_a_snapshot_copies_files_and_a_branch_writes_its_own(env):
    env.reset(seed=0)
    env.step(bash("mkdir -p d && echo v1 > d/f && chmod 700 d/f"))
    state = pickle.loads(pickle.dumps(env.get_state()))
    branch = env.spawn()
    branch.step(bash("echo v2 > d/f"))
    assert "v1" in env.step(bash("cat d/f"))[0]
    restored = TerminalEnv(command_timeout=3.0)
    restored.set_state(state)
    assert "v1" in restored.step(bash("cat d/f && stat -c %a d/f"))[0]
    assert "700" in restored.step(bash("stat -c %a d/f"))[0]
    paths = {env.work_dir.path, branch.work_dir.path, restored.work_dir.path}
    assert len(paths) == 3
    branch.close()
    assert os.path.isdir(env.work_dir.path)  # closing a branch leaves the original's directory alone
    restored.close()


def test_a_snapshot_keeps_links_as_links_and_skips_fifos(env):
    """The host reads the agent's files when it takes a snapshot: a link to a host file must stay a link
    (never read through), and a FIFO must not block the host."""
    env.reset(seed=0)
    # (the sandbox refuses mkfifo since issue 47; a FIFO could still come from elsewhere)
    env.step(bash("ln -s /etc/shadow leak; mkfifo pipe; ln -s /etc/hostname host"))
    files = env.get_state()["work_files"]
    assert files["leak"][1] == "/etc/shadow" and files["host"][1] == "/etc/hostname"
    assert "pipe" not in files


# ------------------------------------------------------------------------------ hostile commands


def host_alive_and_sandbox_usable(env) -> None:
    assert env.step(bash("echo still here"))[0].count("still here") == 1


def test_fork_bomb_is_contained(env):
    env.reset(seed=0)
    obs, _, _, _, info = env.step(bash(":(){ :|:& };:"))
    assert isinstance(obs, str)
    host_alive_and_sandbox_usable(env)


def test_rm_rf_root_and_home_touch_only_the_working_directory(env, tmp_path):
    sentinel = tmp_path / "sentinel.txt"
    sentinel.write_text("host")
    env.reset(seed=0, options={"task": "sort_unique"})
    env.step(bash("rm -rf / ~ --no-preserve-root 2>/dev/null; rm -rf ~/* /tmp/* 2>/dev/null; true"))
    assert sentinel.read_text() == "host"
    assert (PROJECT_ROOT / "pyproject.toml").is_file() and Path.home().is_dir()
    assert not (Path(env.work_dir.path) / "fruits.txt").exists()  # its own files are fair game
    host_alive_and_sandbox_usable(env)


def test_no_network_not_even_the_hosts_loopback(env):
    server = socket.create_server(("127.0.0.1", 0))
    port = server.getsockname()[1]
    env.reset(seed=0)
    obs = env.step(bash(f"(echo hi > /dev/tcp/127.0.0.1/{port}) 2>&1; (echo hi > /dev/tcp/1.1.1.1/80) 2>&1; echo done"))[0]
    server.settimeout(0.2)
    with pytest.raises(TimeoutError):
        server.accept()  # a connection made during the command would be waiting in the backlog
    server.close()
    # no IP socket can be made at all since issue 47 ("Address family not supported by protocol")
    assert "done" in obs and any(word in obs for word in ("refused", "unreachable", "not supported")), obs


def test_host_files_cannot_be_read(env):
    env.reset(seed=0)
    package = Path(gem_core.__file__).parent
    obs = env.step(bash(
        f"cat /etc/shadow; ls {PROJECT_ROOT}; cat {PROJECT_ROOT}/pyproject.toml; ls -R {package} | head; "
        f"find / \\( -path /proc -o -path /sys -o -path /usr -o -path {sys.prefix} \\) -prune -o -name check.sh -print 2>/dev/null; "
        "echo end"
    ))[0]
    assert "Permission denied" in obs and "end" in obs  # it ran to the end
    assert "root:" not in obs and "[project]" not in obs  # neither the password hashes nor the checkout
    assert "check.sh" not in obs and "terminal_env.py" not in obs  # nor GEM's package and its checkers


def test_writes_outside_the_working_directory_do_not_reach_the_host(env):
    marker = f"gem-terminal-{uuid.uuid4().hex}"
    env.reset(seed=0)
    obs = env.step(bash(f"touch /etc/{marker} /usr/{marker} /{marker} /tmp/{marker} ~/{marker} 2>&1; ls /tmp"))[0]
    assert marker in obs  # the private /tmp is writable...
    for place in ("/etc", "/usr", "/tmp", str(Path.home()), "/"):
        assert not (Path(place) / marker).exists()  # ...but nothing reached the host


def test_the_host_cannot_be_killed(env):
    env.reset(seed=0)
    env.step(bash(f"kill -9 -1; kill -9 {os.getpid()} {os.getppid()} 1; pkill -9 python; true"))
    host_alive_and_sandbox_usable(env)


def test_a_full_working_directory_stops_the_command_and_ends_the_episode():
    env = TerminalEnv(max_work_mb=2, command_timeout=5.0)
    env.reset(seed=0)
    obs, reward, terminated, _, info = env.step(bash("head -c 8000000 /dev/zero > big; sleep 4"))
    assert (reward, terminated, info["limit"]) == (0.0, True, "disk") and "disk" in obs
    env.close()


def _sparse_files(folder: str, count: int, size: int) -> None:
    """``count`` files of ``size`` bytes holding no block (``truncate -s``): a du of a few KB."""
    for i in range(count):
        with open(os.path.join(folder, f"sparse{i}"), "wb") as file:
            file.truncate(size)


def test_sparse_files_count_at_their_size_against_the_work_dir_cap(tmp_path):
    from gem_core.tools.sandbox.accounting import work_dir_over

    _sparse_files(str(tmp_path), 3, 1 << 20)
    assert work_dir_over(str(tmp_path), 2 << 20, 100)  # 3 MiB to read and copy, whatever du says
    assert not work_dir_over(str(tmp_path), 4 << 20, 100)


def test_sparse_files_past_the_cap_are_refused_at_submit_and_in_a_snapshot():
    """Made between two samples of the cap, sparse files are still not read whole by the host: the submit and
    a snapshot name the cap instead (they were read into memory and written out in full for the checker)."""
    env = TerminalEnv(max_work_mb=2, command_timeout=5.0)
    env.reset(seed=0)
    _sparse_files(env.work_dir.path, 3, 1 << 20)
    with pytest.raises(ValueError, match="2 MiB"):
        env.get_state()
    observation, reward, terminated, _, info = env.step(bash(SUBMIT))
    assert (reward, terminated, info["success"]) == (0.0, True, False) and "2 MiB" in observation, observation
    env.close()


def test_endless_output_is_capped():
    env = TerminalEnv(command_timeout=5.0)
    env.reset(seed=0)
    obs, _, terminated, _, info = env.step(bash("yes"))
    assert info["limit"] == "output" and not terminated and len(obs) < 10_000
    env.close()


# ------------------------------------------------------------------------------ sandbox extension


def test_the_working_directory_must_not_cover_the_interpreter(tmp_path):
    with pytest.raises(ValueError, match="work_mount"):
        isolation.bwrap_launch(SandboxConfig(work_dir=str(tmp_path), work_mount="/usr/lib"), privileged=False)


@pytest.mark.skipif(os.geteuid() != 0, reason="the owner check guards runs as root")
def test_as_root_a_root_owned_working_directory_is_refused(tmp_path):
    with pytest.raises(ValueError, match="owned by root"):
        run_shell("true", str(tmp_path))


def test_run_shell_runs_as_the_working_directorys_owner():
    work = WorkDir()
    result = run_shell("id -u; echo x > f; stat -c %u f", work)
    uid, owner = result.stdout.split()
    assert uid == owner and (os.geteuid() != 0 or int(uid) == os.stat(work.path).st_uid != 0)
    work.close()
    assert not os.path.exists(work.path)


def test_without_bubblewrap_the_env_refuses_unless_process_mode_is_chosen(monkeypatch):
    real = isolation.probe_cached
    monkeypatch.setattr(isolation, "probe_cached", lambda mode, python: "no bwrap here" if mode == "bwrap" else real(mode, python))
    monkeypatch.delenv("GEM_SANDBOX", raising=False)
    with pytest.raises(SandboxUnavailableError, match="GEM_SANDBOX=process"):
        TerminalEnv()
    monkeypatch.setenv("GEM_SANDBOX", "process")
    env = TerminalEnv()
    env.reset(seed=0, options={"task": "csv_sum"})
    assert env.step(bash("pwd"))[0].count(env.work_dir.path) == 1  # process mode: the host directory itself
    assert solve(env)[0] == 1.0
    env.close()


# ------------------------------------------------------------------------------ token runner


async def test_one_episode_through_the_token_runner(tiny_tokenizer):
    from gem_core.rollout import run_episode
    from gem_core.testing import ScriptedPolicy

    probe = gem_core.make("terminal:Tasks-v0")
    probe.reset(seed=6)
    policy = ScriptedPolicy(tiny_tokenizer, [bash(probe.task.solution), bash(SUBMIT)])
    probe.close()
    trajectory = await run_episode(gem_core.make("terminal:Tasks-v0"), policy, tiny_tokenizer, seed=6)
    assert trajectory.rewards[-1] == 1.0 and trajectory.terminated and trajectory.num_turns == 2


def test_gem_play_plays_a_task_from_stdin():
    import subprocess

    moves = "```bash ls```\n```bash sort -u fruits.txt > unique.txt```\n```bash submit```\n"
    played = subprocess.run(
        [sys.executable, "-m", "gem_core.cli", "play", "terminal:Tasks-v0", "--seed", "0"],
        input=moves, capture_output=True, text=True, timeout=120,
    )
    assert played.returncode == 0, played.stderr
    assert "fruits.txt" in played.stdout and "Episode won after 3 turns with return 1" in played.stdout


# ------------------------------------------------------------------------------ checkers that run agent code


def write_file(name: str, text: str) -> str:
    return bash(f"cat > {name} <<'EOF_AGENT'\n{text}\nEOF_AGENT")


def test_fix_test_an_early_exit_in_stats_py_fails_the_checker(env):
    """The checker imports stats.py: exiting with status 0 from it must not pass for all tests passing."""
    env.reset(seed=0, options={"task": "fix_test"})
    env.step(write_file("stats.py", "import os\nos._exit(0)"))
    _, reward, terminated, _, info = env.step(bash(SUBMIT))
    assert (reward, terminated, info["success"]) == (0.0, True, False)


def test_fix_test_results_that_claim_to_equal_anything_fail_the_checker(env):
    env.reset(seed=0, options={"task": "fix_test"})
    env.step(write_file("stats.py", (
        "class Anything(float):\n"
        "    def __eq__(self, other): return True\n"
        "    __hash__ = float.__hash__\n"
        "def mean(values): return Anything(0)\n"
        "def median(values): return Anything(0)"
    )))
    assert env.step(bash(SUBMIT))[1] == 0.0
    env.reset(seed=0, options={"task": "fix_test"})
    env.step(write_file("stats.py", "def mean(values): return True\ndef median(values): return True"))
    assert env.step(bash(SUBMIT))[1] == 0.0


@pytest.mark.parametrize("task, fixed", [
    ("fix_test", (
        "import os\n"
        "try:\n"
        "    open(f'/proc/{os.getppid()}/mem', 'r+b')\n"
        "except OSError:\n"
        "    pass\n"
        "else:\n"
        "    raise SystemExit('reached the checker')\n"
        "def mean(values): return sum(values) / len(values)\n"
        "def median(values):\n"
        "    ordered, middle = sorted(values), len(values) // 2\n"
        "    return ordered[middle] if len(values) % 2 else (ordered[middle - 1] + ordered[middle]) / 2"
    )),
    ("make_script", (
        "#!/bin/sh\n"
        "if (: < /proc/$PPID/mem) 2>/dev/null && (: >> /proc/$PPID/mem) 2>/dev/null; then echo reached; exit 1; fi\n"
        'echo "Hello, $1!"'
    )),
])
def test_agent_code_a_checker_runs_cannot_reach_the_checkers_memory(env, task, fixed):
    """A correct solution that would give a wrong answer if it could open the checker's /proc/PID/mem
    (whence it could rewrite the verdict) passes: the process that decides is not dumpable."""
    env.reset(seed=0, options={"task": task})
    name = "stats.py" if task == "fix_test" else "greet.sh"
    env.step(write_file(name, fixed) if task == "fix_test" else bash(f"cat > {name} <<'EOF_AGENT'\n{fixed}\nEOF_AGENT\nchmod +x {name}"))
    _, reward, _, _, info = env.step(bash(SUBMIT))
    assert reward == 1.0, info


# ------------------------------------------------------------------------------ deep directory trees


def deep_tree(levels: int, name: str = "d") -> str:
    return bash(f"mkdir -p $(python3 -c 'print(\"/\".join([\"{name}\"] * {levels}))') && echo made")


def test_a_tree_1100_levels_deep_snapshots_restores_and_is_deleted_at_reset():
    env = TerminalEnv(command_timeout=10.0)
    env.reset(seed=0)
    assert "made" in env.step(deep_tree(1100))[0]
    state = env.get_state()
    assert len([key for key, (_, content) in state["work_files"].items() if content is None]) == 1100
    restored = TerminalEnv(command_timeout=10.0)
    restored.set_state(state)
    assert "1100" in restored.step(bash("find . -type d -name d | wc -l"))[0]
    first, second = Path(env.work_dir.path).parent, Path(restored.work_dir.path).parent
    env.reset(seed=0)
    assert not first.exists()
    restored.close()
    env.close()
    assert not second.exists()


def test_a_tree_too_long_to_snapshot_is_refused_clearly_and_still_deleted():
    env = TerminalEnv(command_timeout=10.0)
    env.reset(seed=0)
    assert "made" in env.step(deep_tree(40, "n" * 200))[0]  # paths of 8 KB, past PATH_MAX
    with pytest.raises(ValueError, match="too long to snapshot"):
        env.get_state()
    first = Path(env.work_dir.path).parent
    env.reset(seed=0)
    assert not first.exists()
    env.close()


# ------------------------------------------------------------------------------ the checker's view (issue 47.5)
# The checker runs on a copy of the working directory holding its files and directories: a link is
# never followed out of the tree (`ln -sf /tmp/expected.ini app.ini` passed replace_text, whose checker
# writes its expected file to its own /tmp).


@pytest.mark.parametrize("command", [
    "ln -sf /tmp/expected.ini app.ini",  # the checker's own expected file
    "ln -sf ../tmp/expected.ini app.ini",  # the same, relative: /workspace/.. is /
    "ln -sf /proc/self/root/tmp/expected.ini app.ini",
    "ln -s . here && ln -sf here/../tmp/expected.ini app.ini",  # inside the tree by its spelling, not by where it leads
])
def test_a_link_to_the_checkers_expected_file_does_not_pass(env, command):
    env.reset(seed=0, options={"task": "replace_text"})
    env.step(bash(command))
    _, reward, terminated, _, info = env.step(bash(SUBMIT))
    assert (reward, terminated, info["success"]) == (0.0, True, False)


def test_a_link_to_a_file_inside_the_tree_is_checked_as_that_file(env):
    env.reset(seed=0, options={"task": "sort_unique"})
    env.step(bash("mkdir -p out && sort -u fruits.txt > out/sorted && ln -s ../unique.txt out/back && ln -s out/sorted unique.txt"))
    _, reward, _, _, info = env.step(bash(SUBMIT))
    assert reward == 1.0, info
    assert os.path.islink(os.path.join(env.work_dir.path, "unique.txt"))  # the agent's own tree is untouched


def test_every_checker_sees_files_and_directories_only(tmp_path):
    """Whatever the task: the checker's copy holds no link, and a link's file inside the tree arrives as a file."""
    task = tmp_path / "spy"
    (task / "files").mkdir(parents=True)
    (task / "files" / "inside.txt").write_text("hi")
    (task / "task.json").write_text('{"instructions": "nothing"}')
    (task / "solution.sh").write_text("true")
    (task / "check.sh").write_text(
        '[ -z "$(find . -type l)" ] && [ ! -e up ] && [ ! -e root ] && [ ! -e loop ] && [ "$(cat alias)" = hi ] '
        '&& [ "$(cat d/alias)" = hi ] && [ -d d ]'
    )
    env = TerminalEnv(command_timeout=5.0, data_dir=str(tmp_path))
    try:
        env.reset(seed=0)
        env.step(bash("ln -s .. up; ln -s / root; ln -s loop loop; ln -s inside.txt alias; mkdir d; ln -s ../alias d/alias"))
        _, reward, _, _, info = env.step(bash(SUBMIT))
        assert reward == 1.0, info
    finally:
        env.close()


@pytest.mark.parametrize(
    ("broken", "named"),
    [("check.sh", "check.sh"), ("solution.sh", "solution.sh"), ("{bad", "task.json"), ("[]", "instructions"),
     ('{"nope": 1}', "instructions"), ("not utf-8", "check.sh"), ("no data_dir", "nowhere")],
)
def test_a_broken_task_folder_is_refused_naming_the_folder_and_the_file(tmp_path, broken, named):
    """These used to escape as a bare FileNotFoundError, JSONDecodeError or KeyError from the constructor."""
    task = tmp_path / "t1"
    task.mkdir()
    (task / "task.json").write_text('{"instructions": "x"}')
    (task / "check.sh").write_text("exit 0")
    (task / "solution.sh").write_text("true")
    data_dir = tmp_path
    if broken in ("check.sh", "solution.sh"):
        (task / broken).unlink()
    elif broken == "not utf-8":
        (task / "check.sh").write_bytes(b"exit \xff")
    elif broken == "no data_dir":
        data_dir = tmp_path / "nowhere"
    else:
        (task / "task.json").write_text(broken)
    with pytest.raises(InvalidArgument, match=named) as raised:
        TerminalEnv(data_dir=str(data_dir), sandbox="process")
    assert str(data_dir if broken == "no data_dir" else task) in str(raised.value)
