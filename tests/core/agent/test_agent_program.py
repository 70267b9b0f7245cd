"""AgentProgram: an agent program run as a subprocess against the endpoint, with time and turn limits and a reward."""

from __future__ import annotations

import json
import math
import os
import re
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

pytest.importorskip("openai")
pytest.importorskip("uvicorn")

from ci_guard import needs, skip_unless_ci  # noqa: E402
from gem_core.agent.endpoint import AgentEndpoint  # noqa: E402
from gem_core.agent.program import AgentProgram, TaskSetup  # noqa: E402
from gem_core.errors import GemError, InvalidArgument, InvalidArgumentType  # noqa: E402
from gem_core.testing import ScriptedPolicy  # noqa: E402

# An agent written the way users write one: the OpenAI client, configured from the environment.
AGENT = textwrap.dedent(
    """
    import os, sys, time
    from openai import OpenAI

    mode = sys.argv[1]
    client = OpenAI(max_retries=0)  # OPENAI_BASE_URL and OPENAI_API_KEY come from the environment
    messages = [{"role": "user", "content": "Write the answer to answer.txt"}]
    if mode == "exit_early":
        sys.exit(3)
    if mode == "hang":  # its own child must die with it: found by this script's path in its command line
        import subprocess
        subprocess.Popen([sys.executable, "-c", "import time; time.sleep(1000)", sys.argv[0]])
        open("started", "w").close()
    for turn in range(100):
        reply = client.chat.completions.create(model="policy", messages=messages)
        text = reply.choices[0].message.content
        messages += [{"role": "assistant", "content": text}, {"role": "user", "content": f"ok {turn}"}]
        if mode == "hang":
            time.sleep(1000)
        if mode == "solve" and turn == 1:
            open("answer.txt", "w").write(text)
            if os.environ.get("WRITE_REWARD"):
                open(os.environ["GEM_REWARD_FILE"], "w").write("0.5")
            break
    """
)


@pytest.fixture
def agent(tmp_path):
    path = tmp_path / "agent.py"
    path.write_text(AGENT)
    return lambda mode: [sys.executable, str(path), mode]


@pytest.fixture
def endpoint(tiny_tokenizer):
    with AgentEndpoint(ScriptedPolicy(tiny_tokenizer, ["thinking", "42"]), tiny_tokenizer) as endpoint:
        yield endpoint


def answer_is_42(run):
    path = run.workdir / "answer.txt"
    return float(path.exists() and path.read_text() == "42")


def test_a_solving_agent_ends_its_episode_with_the_graders_reward(endpoint, agent, tmp_path):
    program = AgentProgram(command=lambda task: agent(task), grader=answer_is_42, time_limit=60)
    run = program.run(endpoint, "solve", workdir=tmp_path)
    assert run.exit_code == 0 and not run.truncated and run.reward == 1.0, run.stderr_tail
    (trajectory,) = run.trajectories
    assert trajectory.rewards == [0.0, 1.0] and trajectory.terminated and not trajectory.truncated
    assert run.key not in endpoint.episodes  # closed: a late call would get 409


def test_without_a_grader_the_reward_is_what_the_agent_wrote(endpoint, agent, tmp_path):
    run = AgentProgram(command=agent("solve"), env={"WRITE_REWARD": "1"}, time_limit=60).run(endpoint, workdir=tmp_path)
    assert run.reward == 0.5 and run.trajectories[0].rewards == [0.0, 0.5]


def test_an_agent_that_hangs_is_killed_with_its_children_and_the_episode_truncated(endpoint, agent, tmp_path):
    run = AgentProgram(command=agent("hang"), grader=answer_is_42, time_limit=8).run(endpoint, workdir=tmp_path)
    assert run.exit_code is None and run.truncated and "time limit" in run.ended
    (trajectory,) = run.trajectories
    assert trajectory.truncated and trajectory.num_turns == 1 and run.reward == 0.0
    assert (tmp_path / "started").exists()
    assert _survivors(str(tmp_path / "agent.py"), within=5) == []


def _alive(pid):
    try:
        os.kill(pid, 0)
        with open(f"/proc/{pid}/stat") as stat:  # a zombie is dead, only not yet reaped by its parent
            return stat.read().split(")")[-1].split()[0] != "Z"
    except (ProcessLookupError, FileNotFoundError):
        return False


def _processes_with(marker):
    """The live processes (but this one) whose command line holds ``marker``: an agent in a PID namespace of its own
    knows itself by a number that means another process here, so the tests find its processes by what they run."""
    found = []
    for name in os.listdir("/proc"):
        if name.isdigit() and int(name) != os.getpid():
            try:
                with open(f"/proc/{name}/cmdline", "rb") as cmdline:
                    if marker.encode() in cmdline.read() and _alive(int(name)):
                        found.append(int(name))
            except OSError:  # gone meanwhile
                pass
    return found


def _survivors(marker, within=10.0, spare=()):
    """The processes holding ``marker`` still alive after ``within`` seconds (but ``spare``), killed by their pid (a
    failed test leaves nothing running)."""
    deadline = time.monotonic() + within
    while [p for p in _processes_with(marker) if p not in spare] and time.monotonic() < deadline:
        time.sleep(0.05)
    survivors = [p for p in _processes_with(marker) if p not in spare]
    for pid in survivors:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    return survivors


def test_an_agent_over_its_turn_limit_is_refused_killed_and_truncated(endpoint, agent, tmp_path):
    run = AgentProgram(command=agent("loop"), max_turns=3, time_limit=60).run(endpoint, workdir=tmp_path)
    assert run.truncated and "turn limit of 3" in run.ended
    (trajectory,) = run.trajectories
    assert trajectory.num_turns == 3 and trajectory.truncated


def test_an_agent_that_exits_early_ends_its_episode_with_no_turns(endpoint, agent, tmp_path):
    run = AgentProgram(command=agent("exit_early"), grader=answer_is_42, time_limit=60).run(endpoint, workdir=tmp_path)
    assert run.exit_code == 3 and not run.truncated and "status 3" in run.ended
    assert run.trajectories == [] and run.reward == 0.0


def test_a_fresh_workdir_is_removed_once_graded_however_the_episode_ends(endpoint, agent):
    """Without a caller's workdir each run gets a temporary one: ~390 ``gem-agent-*`` folders were left in /tmp."""
    made = []

    def setup(task, workdir):
        made.append(workdir)

    def grader(run):
        assert run.workdir.is_dir()  # the grader still reads what the agent left
        return answer_is_42(run)

    def broken(run):
        raise ZeroDivisionError("the grader's own bug")

    solved = AgentProgram(command=agent("solve"), setup=setup, grader=grader, time_limit=60).run(endpoint)
    failed = AgentProgram(command=agent("exit_early"), setup=setup, time_limit=60).run(endpoint)
    timed_out = AgentProgram(command=agent("hang"), setup=setup, time_limit=2).run(endpoint)
    with pytest.raises(ZeroDivisionError):
        AgentProgram(command=agent("exit_early"), setup=setup, grader=broken, time_limit=60).run(endpoint)
    with pytest.raises(GemError, match="could not start"):  # the program cannot even start
        AgentProgram(command=["/nonexistent/agent"], setup=setup, time_limit=60).run(endpoint)
    assert solved.reward == 1.0 and failed.exit_code == 3 and timed_out.truncated
    assert len(made) == 5 and [path for path in made if path.exists()] == []


def test_a_callers_workdir_is_kept(endpoint, agent, tmp_path):
    AgentProgram(command=agent("solve"), grader=answer_is_42, time_limit=60).run(endpoint, workdir=tmp_path)
    assert (tmp_path / "answer.txt").read_text() == "42"


# Prints what the agent got of the task's text: the prompt file as bytes, and the variable.
READ_PROMPT = (
    "import json, os, sys; sys.stdout.write(json.dumps([open(os.environ['GEM_TASK_PROMPT_FILE'], 'rb').read().decode('utf-8'),"
    " os.environ.get('GEM_TASK_PROMPT')]))"
)


@pytest.mark.parametrize(
    ("prompt", "as_file", "in_variable"),
    [
        ("fix\x00this", "fix\x00this", False),  # a variable cannot hold a NUL: Popen raised "embedded null byte"
        ("fix \ud800 this", "fix \ufffd this", True),  # a string cut mid-pair: the UTF-8 write raised
        ("r\u00e9parer \u2264 \U0001f642", "r\u00e9parer \u2264 \U0001f642", True),
    ],
    ids=["nul", "lone-surrogate", "non-ascii"],
)
def test_any_task_text_reaches_the_agent_in_its_prompt_file(endpoint, tmp_path, prompt, as_file, in_variable):
    """A task's text from a dataset may hold what no variable can: the run raised before the agent started and left
    its episode open in the endpoint. The file holds every text (UTF-8); the variable holds what it can."""
    program = AgentProgram(command=[sys.executable, "-c", READ_PROMPT], setup=lambda task, workdir: TaskSetup(prompt=prompt),
                           time_limit=60)
    run = program.run(endpoint, workdir=tmp_path)
    assert run.exit_code == 0, run.stderr_tail
    assert json.loads(run.stdout_tail) == [as_file, as_file if in_variable else None]
    assert endpoint.episodes == {}


def test_a_program_that_cannot_start_raises_one_error_and_leaves_no_episode_open(endpoint, tmp_path):
    """It raised FileNotFoundError (or ValueError for a NUL in an argument) and its episode stayed open for good:
    one per task of a run whose command was mistyped."""
    for command in (["/nonexistent/agent"], [sys.executable, "-c", "pass", "a\x00b"], [str(tmp_path)]):
        with pytest.raises(GemError, match="could not start"):
            AgentProgram(command=command, time_limit=60).run(endpoint, workdir=tmp_path)
    assert endpoint.episodes == {}


def test_a_prompt_the_locale_cannot_encode_still_reaches_the_agent(tmp_path):
    """Under a locale whose encoding is ASCII, the prompt file was written in it and a non-ASCII task raised."""
    script = tmp_path / "run.py"
    script.write_text(textwrap.dedent(f"""
        import json, sys
        from gem_core.agent.endpoint import AgentEndpoint
        from gem_core.agent.program import AgentProgram, TaskSetup
        from gem_core.testing import ScriptedPolicy, make_tokenizer
        assert sys.getfilesystemencoding() == "ascii" and not sys.flags.utf8_mode
        tokenizer = make_tokenizer("chatml")
        with AgentEndpoint(ScriptedPolicy(tokenizer, ["x"]), tokenizer) as endpoint:
            program = AgentProgram(command=[sys.executable, "-c", {READ_PROMPT!r}],
                                   setup=lambda task, workdir: TaskSetup(prompt="r\\u00e9parer"), time_limit=60)
            run = program.run(endpoint)
        print(run.stdout_tail)
    """))
    environment = {**os.environ, "LC_ALL": "C", "PYTHONUTF8": "0", "PYTHONCOERCECLOCALE": "0"}
    result = subprocess.run([sys.executable, str(script)], env=environment, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]
    assert json.loads(result.stdout) == ["r\u00e9parer", None]  # ASCII variables cannot hold it: the file does


# A run of agents that hang (two, or one through AgentProgram.run). Each starts a child in its process group and one in a
# session of its own (both carry the folder in their command line), then writes its working and io folders to a file
# of the folder. Options: "no-namespace" runs the agents as if bubblewrap could not; "fork" forks a helper of the
# trainer once the agents run (its pid in the file "helper" beside the folder), which lives on for 60 s.
HANGING_RUN = textwrap.dedent(
    """
    import asyncio, os, signal, sys, threading, time
    from gem_core.agent import program as agent_program
    from gem_core.agent.episodes import run_agent_programs
    from gem_core.agent.program import AgentProgram
    from gem_core.testing import ScriptedPolicy, make_tokenizer

    signal.signal(signal.SIGINT, signal.default_int_handler)  # a background job may start with it ignored
    way, folder, options = sys.argv[1], sys.argv[2], sys.argv[3:]
    if "no-namespace" in options:
        agent_program._pid_namespace_bwrap = lambda: None
    hang = (
        "import os, subprocess, sys, time; sleep = [sys.executable, '-c', 'import time; time.sleep(1000)', sys.argv[1]]; "
        "subprocess.Popen(sleep); subprocess.Popen(sleep, start_new_session=True); "
        "folders = os.getcwd() + chr(10) + os.path.dirname(os.environ['GEM_REWARD_FILE']) + chr(10); "
        "open(os.path.join(sys.argv[1], os.environ['GEM_EPISODE_KEY']), 'w').write(folders); time.sleep(1000)"
    )
    if "fork" in options:
        def fork_a_helper():
            while not os.listdir(folder):
                time.sleep(0.05)
            helper = os.fork()
            if helper == 0:
                time.sleep(60)
                os._exit(0)
            open(os.path.join(os.path.dirname(folder), "helper.tmp"), "w").write(str(helper))
            os.replace(os.path.join(os.path.dirname(folder), "helper.tmp"), os.path.join(os.path.dirname(folder), "helper"))
        threading.Thread(target=fork_a_helper, daemon=True).start()
    program = AgentProgram(command=[sys.executable, "-c", hang, folder], time_limit=600)
    tokenizer = make_tokenizer("chatml")
    if way == "run_agent_programs":
        asyncio.run(run_agent_programs(program, ScriptedPolicy(tokenizer, ["x"]), tokenizer, ["a", "b"]))
    else:
        from gem_core.agent.endpoint import AgentEndpoint
        with AgentEndpoint(ScriptedPolicy(tokenizer, ["x"]), tokenizer) as endpoint:
            program.run(endpoint)
    """
)


def _start_hanging_run(tmp_path, way, *options):
    """The run in a process of its own (its temporary folders under ``tmp_path``), once its agents hang: ``(process,
    the marker in the command line of each agent and child, the agents' working and io folders)``."""
    folder = tmp_path / "agents"
    folder.mkdir()
    temporary = tmp_path / "tmp"
    temporary.mkdir()
    script = tmp_path / "run.py"
    script.write_text(HANGING_RUN)
    process = subprocess.Popen([sys.executable, str(script), way, str(folder), *options], stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, env={**os.environ, "TMPDIR": str(temporary)})
    wanted = 2 if way == "run_agent_programs" else 1

    def ready():  # the folders of each agent that has written both
        written = [p.read_text() for p in folder.iterdir()]
        return [w.split() for w in written if w.count("\n") == 2]

    deadline = time.monotonic() + 60
    while not (len(ready()) == wanted and ("fork" not in options or (tmp_path / "helper").exists())) and time.monotonic() < deadline:
        if process.poll() is not None:
            break
        time.sleep(0.1)
    if len(ready()) != wanted:
        process.kill()
        _survivors(str(folder), within=0)
        pytest.fail(f"{len(ready())} of {wanted} agents started:\n" + process.communicate(timeout=10)[0].decode(errors="replace")[-2000:])
    folders = [Path(f) for pair in ready() for f in pair]
    assert all(f.is_dir() and f.is_relative_to(temporary) for f in folders), folders
    return process, str(folder), folders


@pytest.mark.parametrize("way", ["run_agent_programs", "AgentProgram.run"])
def test_ctrl_c_kills_the_agents_and_ends_the_run(tmp_path, way):
    """Ctrl-C reaches the trainer, not the agents (each runs in a session of its own, so a limit can kill its
    processes). The run went on until the time limit (600 s by default) with every agent running, and Python's exit
    waited for it; now the agents and what they started are killed and the run ends at once."""
    process, agents, _ = _start_hanging_run(tmp_path, way)
    process.send_signal(signal.SIGINT)
    try:
        output = process.communicate(timeout=30)[0].decode(errors="replace")
    except subprocess.TimeoutExpired:
        process.kill()
        output = process.communicate()[0].decode(errors="replace")
        pytest.fail(f"the run did not end within 30 s of Ctrl-C (its time limit is 600 s):\n{output[-2000:]}")
    assert "KeyboardInterrupt" in output, output[-2000:]
    assert _survivors(agents) == [], "processes outlived the run (the agents, the children in their group or out of it)"


def test_an_agent_that_prints_without_end_costs_no_disk_and_its_tail_is_kept(endpoint, tmp_path):
    """The program's output went to files in full, of which the run reads the last 8 KiB: an agent that printed
    without end wrote 2.7 GB in 5 s (the time limit is 600 s). Here it writes 64 MiB, then reports what its run's
    folder holds (``$GEM_REWARD_FILE``'s) but the task it was given: nothing of its output."""
    flood = (
        "import os, sys\n"
        "for _ in range(1024): sys.stdout.write('x' * 65535 + '\\n')\n"
        "sys.stdout.write('the end'); sys.stdout.flush()\n"
        "folder = os.path.dirname(os.environ['GEM_REWARD_FILE'])\n"
        "given = os.path.basename(os.environ['GEM_TASK_FILE'])\n"
        "sys.stderr.write(str(sum(os.path.getsize(os.path.join(folder, name)) for name in os.listdir(folder) if name != given)))\n"
    )
    run = AgentProgram(command=[sys.executable, "-c", flood], time_limit=120).run(endpoint, workdir=tmp_path)
    assert run.exit_code == 0, run.stderr_tail
    assert run.stderr_tail == "0"  # bytes in the run's folder once 64 MiB were printed (67,108,864 before)
    assert run.stdout_tail.endswith("x\nthe end") and len(run.stdout_tail) == 8192


def test_what_an_agent_left_running_ends_with_its_episode(endpoint, tmp_path):
    """An agent that exited on its own left its background processes running (a server, a shell), one set per
    episode of a run."""
    marker = str(tmp_path / "left")
    leave = f"import subprocess, sys; subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(1000)', {marker!r}])"
    run = AgentProgram(command=[sys.executable, "-c", leave], time_limit=60).run(endpoint, workdir=tmp_path)
    assert run.exit_code == 0 and not run.truncated, run.stderr_tail
    assert _survivors(marker, within=5) == []


@pytest.mark.parametrize(
    ("fields", "named"),
    [
        ({"command": "python agent.py"}, "command='python agent.py' must be the program and its arguments as a list"),
        ({"command": 5}, "command=5"),
        ({"time_limit": "60"}, "time_limit='60'"),  # TypeError: '>' not supported between 'str' and 'int'
        ({"time_limit": math.inf}, "time_limit=inf"),
        ({"max_turns": 2.5}, "max_turns=2.5"),  # accepted
        ({"max_turns": True}, "max_turns=True"),  # accepted as 1
        ({"max_response_tokens": 0}, "max_response_tokens=0"),
        ({"env": {"DEBUG": 1}}, "'DEBUG': 1"),  # TypeError at every run: expected str, bytes or os.PathLike, not int
        ({"env": {"A=B": "x"}}, "'A=B'"),  # at every run, an error that blamed the command
        ({"env": "DEBUG=1"}, "'DEBUG=1'"),
    ],
    ids=lambda value: repr(value)[:40],
)
def test_a_bad_field_is_one_error_naming_it_when_the_program_is_made(fields, named):
    """Unchecked, each was a TypeError at every run of a batch, an accepted nonsense limit, or (a command string) a
    run of its characters: ``['p', 'y', 't', ...]``."""
    with pytest.raises(InvalidArgument, match=re.escape(named)):
        AgentProgram(**{"command": ["python", "agent.py"], **fields})


def test_a_command_function_that_returns_a_string_is_refused_before_anything_runs(endpoint, tmp_path):
    with pytest.raises(InvalidArgument, match="return a list of arguments"):
        AgentProgram(command=lambda task: f"python agent.py {task}").run(endpoint, "t1", workdir=tmp_path)
    assert endpoint.episodes == {}


@pytest.mark.parametrize(
    ("way", "how", "options"),
    [
        ("run_agent_programs", signal.SIGKILL, ()),
        ("AgentProgram.run", signal.SIGKILL, ()),
        ("run_agent_programs", signal.SIGTERM, ()),
        ("AgentProgram.run", signal.SIGKILL, ("no-namespace",)),
    ],
    ids=["run_agent_programs-SIGKILL", "AgentProgram.run-SIGKILL", "run_agent_programs-SIGTERM", "AgentProgram.run-SIGKILL-no-namespace"],
)
def test_agents_end_with_a_trainer_that_is_killed(tmp_path, way, how, options):
    """A trainer killed outright (the OOM killer, SIGKILL or SIGTERM, a lost node) runs no cleanup, and each agent runs
    in a session of its own: every agent of the batch and the processes it started ran on (here, for 1000 s), a child
    in a session of its own even once the guard killed the agents' groups, and the runs' temporary folders (two per
    agent) stayed in the temporary directory for good. The orphan guard ends them all once the trainer is gone."""
    process, agents, folders = _start_hanging_run(tmp_path, way, *options)
    process.send_signal(how)
    process.wait(timeout=30)
    survivors = _survivors(agents)
    deadline = time.monotonic() + 10
    while [f for f in folders if os.path.lexists(f)] and time.monotonic() < deadline:
        time.sleep(0.05)
    left = [f for f in folders if os.path.lexists(f)]
    assert (survivors, left) == ([], []), "processes or temporary folders outlived their killed trainer"


def test_agents_end_with_a_trainer_that_is_killed_while_a_fork_of_it_lives(tmp_path):
    """The guard waited for end-of-file on a pipe from the trainer, whose write end every fork of the trainer held too (a
    data loader's worker, a multiprocessing helper): killed while one lived, the trainer's agents ran on as long."""
    process, agents, _ = _start_hanging_run(tmp_path, "AgentProgram.run", "fork")
    helper = int((tmp_path / "helper").read_text())
    try:
        process.kill()
        process.wait(timeout=30)
        assert _alive(helper)
        assert _survivors(agents, spare=(helper,)) == [], "processes outlived their killed trainer while its fork lived"
    finally:
        os.kill(helper, signal.SIGKILL)


def test_the_program_starts_with_the_signal_dispositions_subprocess_gives(endpoint, tmp_path):
    """The orphan guard is a Python process, and Python ignores SIGPIPE and SIGXFSZ: passed on through exec, the
    agent's `yes | head` got EPIPE errors instead of ending."""
    run = AgentProgram(command=["grep", "SigIgn", "/proc/self/status"], time_limit=60).run(endpoint, workdir=tmp_path)
    ignored = int(run.stdout_tail.split()[1], 16)
    assert not ignored & (1 << (signal.SIGPIPE - 1) | 1 << (signal.SIGXFSZ - 1)), hex(ignored)


GUARDED = textwrap.dedent(
    """
    import os, signal, subprocess, sys
    from gem_core.agent.orphan_guard import OrphanGuard

    guard = OrphanGuard()
    quiet = {"stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL}  # the caller reads this script's output to its end
    kept, released = (subprocess.Popen(["sleep", "1000"], start_new_session=True, **quiet) for _ in range(2))
    guard.watch(kept.pid)
    guard.watch(released.pid)
    guard.release(released.pid)
    print(kept.pid, released.pid, flush=True)
    os.kill(os.getpid(), signal.SIGKILL)  # no cleanup runs
    """
)


def test_the_orphan_guard_kills_the_groups_still_listed_once_its_trainer_is_gone_and_no_other(tmp_path):
    script = tmp_path / "trainer.py"
    script.write_text(GUARDED)
    result = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=60)
    assert result.returncode == -signal.SIGKILL, result.stderr[-2000:]
    kept, released = map(int, result.stdout.split())
    try:
        deadline = time.monotonic() + 10
        while _alive(kept) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not _alive(kept)
        assert _alive(released)  # struck off: not the guard's to kill
    finally:
        for pid in (kept, released):
            if _alive(pid):
                os.kill(pid, signal.SIGKILL)


def test_a_run_whose_pipes_are_past_descriptor_1023_reads_them(endpoint, tmp_path):
    """A trainer with hundreds of runs at once holds descriptors past 1023, which ``select`` refuses (ValueError:
    filedescriptor out of range), so the run's output was waited on with a call that could not take them."""
    from connection_flood import allow_open_files

    if not allow_open_files(1200):
        pytest.skip("the hard open-file limit is under 1200")
    held = [os.open(os.devnull, os.O_RDONLY) for _ in range(1100)]  # the next descriptors are past 1023
    try:
        run = AgentProgram(command=[sys.executable, "-c", "print('ok')"], time_limit=60).run(endpoint, workdir=tmp_path)
    finally:
        for fd in held:
            os.close(fd)
    assert run.exit_code == 0 and run.stdout_tail == "ok\n", run.stderr_tail


# Runs an agent (the code in argv[1]) without a grader, under an address-space limit (a read without end fails here, not
# the host), and prints its reward and info.
REWARD_RUN = textwrap.dedent(
    """
    import json, resource, sys
    from gem_core.agent.endpoint import AgentEndpoint
    from gem_core.agent.program import AgentProgram
    from gem_core.testing import ScriptedPolicy, make_tokenizer

    tokenizer = make_tokenizer("chatml")
    with AgentEndpoint(ScriptedPolicy(tokenizer, ["x"]), tokenizer) as endpoint:
        with open("/proc/self/statm") as statm:
            mapped = int(statm.read().split()[0]) * resource.getpagesize()
        resource.setrlimit(resource.RLIMIT_AS, (mapped + (1 << 30), resource.RLIM_INFINITY))
        run = AgentProgram(command=[sys.executable, "-c", sys.argv[1]], time_limit=5).run(endpoint)
    print(json.dumps([run.reward, run.info]))
    """
)


@pytest.mark.parametrize(
    ("agent", "why"),
    [
        ("os.mkfifo(os.environ['GEM_REWARD_FILE'])", "not a regular file"),  # the read waited for a writer for good
        ("os.symlink('/dev/zero', os.environ['GEM_REWARD_FILE'])", "symbolic link"),  # read without end: MemoryError
        ("open('n', 'w').write('1'); os.symlink(os.path.abspath('n'), os.environ['GEM_REWARD_FILE'])", "symbolic link"),
        ("open(os.environ['GEM_REWARD_FILE'], 'w').truncate(1 << 36)", "over 100 bytes"),  # read whole: MemoryError
        ("os.mkdir(os.environ['GEM_REWARD_FILE'])", "not a regular file"),
        ("open(os.environ['GEM_REWARD_FILE'], 'w').write('nan')", "not a finite number"),
        ("open(os.environ['GEM_REWARD_FILE'], 'w').write('solved!')", "not a number"),
        ("pass", "the agent wrote none"),
    ],
    ids=["fifo", "symlink-to-dev-zero", "symlink-to-a-number", "huge", "directory", "nan", "text", "none"],
)
def test_a_reward_file_that_is_not_a_small_regular_file_is_no_reward_and_the_info_says_why(tmp_path, agent, why):
    """The reward was read whole from whatever the path named: the agent's FIFO held the trainer's thread for good, and
    /dev/zero (through a link) or a sparse file of 64 GiB was read until memory ran out. The trainer reads at most
    100 bytes of a regular file, never through a link and never waiting; anything else is no reward, and says why."""
    script = tmp_path / "run.py"
    script.write_text(REWARD_RUN)
    temporary = tmp_path / "tmp"  # what a failed run leaves behind is the test's
    temporary.mkdir()
    try:
        result = subprocess.run([sys.executable, str(script), f"import os; {agent}"], capture_output=True, text=True, timeout=60,
                                env={**os.environ, "TMPDIR": str(temporary)})
    except subprocess.TimeoutExpired:
        pytest.fail("the run did not return within 60 s (its time limit is 5 s)")
    assert result.returncode == 0, result.stderr[-2000:]
    reward, info = json.loads(result.stdout)
    assert reward == 0.0 and why in info.get("reward_file", ""), info


@pytest.mark.parametrize(
    "replace",
    [
        "shutil.rmtree(io); os.symlink(os.environ['CANARY'], io)",  # rmtree: "Cannot call rmtree on a symbolic link"
        "shutil.rmtree(io); open(io, 'w').write('x')",  # NotADirectoryError
    ],
    ids=["symlink", "file"],
)
def test_an_agent_that_replaced_its_io_folder_ends_as_any_other_and_the_folder_is_removed(endpoint, tmp_path, replace):
    """An agent that replaced the folder of ``$GEM_REWARD_FILE`` by a link or a file made the run raise OSError from the
    folder's cleanup (and ``run_agent_programs`` with it: the whole batch was lost). The cleanup follows no link and
    leaves nothing (the link's target is untouched); the agent's attempt may fail (where its folder is a mount point)."""
    canary = tmp_path / "canary"
    canary.mkdir()
    (canary / "keep").write_text("kept")
    code = (f"import os, shutil, sys; io = os.path.dirname(os.environ['GEM_REWARD_FILE']); print(io, flush=True); {replace}")
    program = AgentProgram(command=[sys.executable, "-c", code], env={"CANARY": str(canary)}, time_limit=30)
    run = program.run(endpoint)
    io = run.stdout_tail.splitlines()[0]
    assert run.reward == 0.0 and not run.truncated and endpoint.episodes == {}
    assert not os.path.lexists(io) and (canary / "keep").read_text() == "kept"


def _pid_namespace_available():
    from gem_core.agent import program

    return getattr(program, "_pid_namespace_bwrap", lambda: True)() is not None


@needs(_pid_namespace_available(), "bubblewrap cannot make a PID namespace here")
def test_a_process_that_left_the_agents_session_ends_with_the_run(endpoint, tmp_path):
    """A child that called setsid left the agent's process group, which was all a run killed; once the agent exited it
    was init's, out of any tree: it ran on after the run (here for 1000 s). In a PID namespace of its own, everything
    the agent started ends with it."""
    marker = str(tmp_path / "escapee")
    escape = f"import subprocess, sys; subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(1000)', {marker!r}], start_new_session=True)"
    run = AgentProgram(command=[sys.executable, "-c", escape], time_limit=60).run(endpoint, workdir=tmp_path)
    assert run.exit_code == 0, run.stderr_tail
    assert _survivors(marker, within=5) == []


@pytest.mark.parametrize("namespace", [True, False], ids=["pid-namespace", "no-namespace"])
def test_a_process_that_left_the_agents_session_ends_at_the_time_limit(endpoint, tmp_path, monkeypatch, namespace):
    """Without a PID namespace the run walks the agent's process tree (by parent pid) and its group, stopping each
    process before it looks for its children: a child in a session of its own, and its own children, end too."""
    if namespace and not _pid_namespace_available():
        skip_unless_ci("bubblewrap cannot make a PID namespace here")
    if not namespace:
        from gem_core.agent import program

        monkeypatch.setattr(program, "_pid_namespace_bwrap", lambda: None, raising=False)
    marker = str(tmp_path / "escapee")
    sleep = f"[sys.executable, '-c', 'import subprocess, sys, time; subprocess.Popen(sys.argv[1:]); time.sleep(1000)', sys.executable, '-c', 'import time; time.sleep(1000)', {marker!r}]"
    hang = f"import subprocess, sys, time; subprocess.Popen({sleep}, start_new_session=True); time.sleep(1000)"
    run = AgentProgram(command=[sys.executable, "-c", hang], time_limit=3).run(endpoint, workdir=tmp_path)
    assert run.truncated and "time limit" in run.ended
    assert _survivors(marker, within=5) == []


@pytest.mark.parametrize(
    ("fields", "named"),
    [
        ({"grader": "not callable"}, "grader='not callable'"),  # raised only once the agent had run, at every task
        ({"setup": 5}, "setup=5"),
        ({"time_limt": 3}, "'time_limt' (did you mean 'time_limit'?)"),  # TypeError: __init__() got an unexpected keyword
    ],
    ids=["grader", "setup", "misspelt"],
)
def test_a_bad_grader_setup_or_keyword_is_one_error_naming_it_when_the_program_is_made(fields, named):
    with pytest.raises(InvalidArgumentType, match=re.escape(named)):
        AgentProgram(**{"command": ["python", "agent.py"], **fields})


# Prints what the agent got of its task: $GEM_TASK and $GEM_TASK_PROMPT (their sizes, or None), and the files' sizes.
READ_TASK = (
    "import json, os; sizes = lambda *names: [len(os.environ[n].encode()) if n in os.environ else None for n in names]; "
    "files = [os.path.getsize(os.environ[n]) for n in ('GEM_TASK_FILE', 'GEM_TASK_PROMPT_FILE')]; "
    "print(json.dumps([*sizes('GEM_TASK', 'GEM_TASK_PROMPT'), *files]))"
)


@pytest.mark.parametrize(
    ("task", "prompt", "in_variables"),
    [
        ({"issue": "x" * 140_000}, "x" * 140_000, [False, False]),  # E2BIG: "Give a command that exists here"
        (None, "\u4fee" * 50_000, [True, False]),  # 150 KB of UTF-8 in 50,000 characters passed a rule of 100,000 characters
        ({"issue": "fix it"}, "fix it", [True, True]),
    ],
    ids=["140-kb", "cjk", "small"],
)
def test_a_task_too_big_for_a_variable_reaches_the_agent_in_a_file(endpoint, tmp_path, task, prompt, in_variables):
    """Linux holds at most 128 KiB in one variable: a task whose JSON or text was longer made the run unstartable, with
    an error that blamed the command. Both are files always, and variables where they fit (bytes, not characters)."""
    program = AgentProgram(command=[sys.executable, "-c", READ_TASK], setup=lambda task, workdir: TaskSetup(prompt=prompt), time_limit=30)
    run = program.run(endpoint, task, workdir=tmp_path)
    assert run.exit_code == 0, run.stderr_tail
    task_bytes, prompt_bytes = len(json.dumps(task).encode()), len(prompt.encode())
    assert json.loads(run.stdout_tail) == [
        task_bytes if in_variables[0] else None, prompt_bytes if in_variables[1] else None, task_bytes, prompt_bytes
    ]


def test_an_environment_over_the_systems_limit_is_an_error_that_says_so_not_blaming_the_command(endpoint, tmp_path):
    """Each variable fits, all together they do not (ARG_MAX): the error said to give a command that exists."""
    env = {f"BIG_{i}": "x" * 100_000 for i in range(int(os.sysconf("SC_ARG_MAX")) // 100_000 + 2)}
    with pytest.raises(GemError, match="limit") as error:
        AgentProgram(command=[sys.executable, "-c", "pass"], env=env, time_limit=30).run(endpoint, workdir=tmp_path)
    assert "exists" not in str(error.value) and len(str(error.value)) < 2000
    assert endpoint.episodes == {}
