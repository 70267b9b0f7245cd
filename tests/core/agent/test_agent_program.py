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

import pytest

pytest.importorskip("openai")
pytest.importorskip("uvicorn")

from gem_core.agent.endpoint import AgentEndpoint  # noqa: E402
from gem_core.agent.program import AgentProgram, TaskSetup  # noqa: E402
from gem_core.errors import GemError, InvalidArgument  # noqa: E402
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
    if mode == "hang":
        import subprocess
        child = subprocess.Popen(["sleep", "1000"])  # the agent's own child must die with it
        open("pids", "w").write(f"{os.getpid()} {child.pid}")
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
    for pid in map(int, (tmp_path / "pids").read_text().split()):
        deadline = time.monotonic() + 5
        while _alive(pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not _alive(pid), pid


def _alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    with open(f"/proc/{pid}/stat") as stat:  # a zombie is dead, only not yet reaped by its parent
        return stat.read().split(")")[-1].split()[0] != "Z"


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


# A run of agents that hang (two, or one through AgentProgram.run), each once it has written its pid and its child's.
HANGING_RUN = textwrap.dedent(
    """
    import asyncio, signal, sys
    from gem_core.agent.episodes import run_agent_programs
    from gem_core.agent.program import AgentProgram
    from gem_core.testing import ScriptedPolicy, make_tokenizer

    signal.signal(signal.SIGINT, signal.default_int_handler)  # a background job may start with it ignored
    way, folder = sys.argv[1], sys.argv[2]
    hang = "import os, subprocess, sys, time; c = subprocess.Popen(['sleep', '1000']); "
    hang += "open(os.path.join(sys.argv[1], str(os.getpid())), 'w').write(str(c.pid)); time.sleep(1000)"
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


def _start_hanging_run(tmp_path, way):
    """The run in a process of its own, once its agents hang: ``(process, the pids of the agents and their children)``."""
    pids = tmp_path / "pids"
    pids.mkdir()
    script = tmp_path / "run.py"
    script.write_text(HANGING_RUN)
    process = subprocess.Popen([sys.executable, str(script), way, str(pids)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    wanted = 2 if way == "run_agent_programs" else 1
    deadline = time.monotonic() + 60
    while len([p for p in pids.iterdir() if p.read_text()]) < wanted and time.monotonic() < deadline and process.poll() is None:
        time.sleep(0.1)
    agents = [(int(p.name), int(p.read_text())) for p in pids.iterdir() if p.read_text()]
    assert len(agents) == wanted, process.communicate(timeout=10)[0][-2000:]
    return process, [pid for pair in agents for pid in pair]


def _survivors(pids, within=10.0):
    """Those of ``pids`` still alive after ``within`` seconds, killed (a failed test leaves nothing running)."""
    deadline = time.monotonic() + within
    while any(map(_alive, pids)) and time.monotonic() < deadline:
        time.sleep(0.05)
    survivors = [pid for pid in pids if _alive(pid)]
    for pid in survivors:
        os.kill(pid, signal.SIGKILL)
    return survivors


@pytest.mark.parametrize("way", ["run_agent_programs", "AgentProgram.run"])
def test_ctrl_c_kills_the_agents_and_ends_the_run(tmp_path, way):
    """Ctrl-C reaches the trainer, not the agents (each runs in a session of its own, so a limit can kill its
    processes). The run went on until the time limit (600 s by default) with every agent running, and Python's exit
    waited for it; now the agents and what they started are killed and the run ends at once."""
    process, agents = _start_hanging_run(tmp_path, way)
    process.send_signal(signal.SIGINT)
    try:
        output = process.communicate(timeout=30)[0].decode(errors="replace")
    except subprocess.TimeoutExpired:
        process.kill()
        output = process.communicate()[0].decode(errors="replace")
        pytest.fail(f"the run did not end within 30 s of Ctrl-C (its time limit is 600 s):\n{output[-2000:]}")
    assert "KeyboardInterrupt" in output, output[-2000:]
    assert _survivors(agents) == [], "processes outlived the run"


def test_an_agent_that_prints_without_end_costs_no_disk_and_its_tail_is_kept(endpoint, tmp_path):
    """The program's output went to files in full, of which the run reads the last 8 KiB: an agent that printed
    without end wrote 2.7 GB in 5 s (the time limit is 600 s). Here it writes 64 MiB, then reports what its run's
    folder holds (``$GEM_REWARD_FILE``'s): nothing of its output."""
    flood = (
        "import os, sys\n"
        "for _ in range(1024): sys.stdout.write('x' * 65535 + '\\n')\n"
        "sys.stdout.write('the end'); sys.stdout.flush()\n"
        "folder = os.path.dirname(os.environ['GEM_REWARD_FILE'])\n"
        "sys.stderr.write(str(sum(os.path.getsize(os.path.join(folder, name)) for name in os.listdir(folder))))\n"
    )
    run = AgentProgram(command=[sys.executable, "-c", flood], time_limit=120).run(endpoint, workdir=tmp_path)
    assert run.exit_code == 0, run.stderr_tail
    assert run.stderr_tail == "0"  # bytes in the run's folder once 64 MiB were printed (67,108,864 before)
    assert run.stdout_tail.endswith("x\nthe end") and len(run.stdout_tail) == 8192


def test_what_an_agent_left_running_ends_with_its_episode(endpoint, tmp_path):
    """An agent that exited on its own left its background processes running (a server, a shell), one set per
    episode of a run."""
    leave = "import subprocess, sys; print(subprocess.Popen(['sleep', '1000']).pid)"
    run = AgentProgram(command=[sys.executable, "-c", leave], time_limit=60).run(endpoint, workdir=tmp_path)
    assert run.exit_code == 0 and not run.truncated, run.stderr_tail
    left = int(run.stdout_tail)
    deadline = time.monotonic() + 5
    while _alive(left) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(left)


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


@pytest.mark.parametrize("way", ["run_agent_programs", "AgentProgram.run"])
def test_agents_end_with_a_trainer_that_is_killed(tmp_path, way):
    """A trainer killed outright (the OOM killer, SIGKILL, a lost node) runs no cleanup, and each agent runs in a
    session of its own: every agent of the batch and the processes it started ran on (here, for 1000 s). The orphan
    guard kills their sessions once the trainer is gone."""
    process, agents = _start_hanging_run(tmp_path, way)
    process.kill()
    process.wait()
    assert _survivors(agents) == [], "processes outlived their killed trainer"


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
