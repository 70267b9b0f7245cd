"""AgentProgram: an agent program run as a subprocess against the endpoint, with time and turn limits and a reward."""

from __future__ import annotations

import os
import sys
import textwrap
import time

import pytest

pytest.importorskip("openai")
pytest.importorskip("uvicorn")

from gem_core.agent.endpoint import AgentEndpoint  # noqa: E402
from gem_core.agent.program import AgentProgram  # noqa: E402
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
    with pytest.raises(FileNotFoundError):  # the program cannot even start
        AgentProgram(command=["/nonexistent/agent"], setup=setup, time_limit=60).run(endpoint)
    assert solved.reward == 1.0 and failed.exit_code == 3 and timed_out.truncated
    assert len(made) == 5 and [path for path in made if path.exists()] == []


def test_a_callers_workdir_is_kept(endpoint, agent, tmp_path):
    AgentProgram(command=agent("solve"), grader=answer_is_42, time_limit=60).run(endpoint, workdir=tmp_path)
    assert (tmp_path / "answer.txt").read_text() == "42"
