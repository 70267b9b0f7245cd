"""run_agent_programs / run_agent_episodes: agent programs as an episode source, the policy behind the endpoint."""

from __future__ import annotations

import asyncio
import json
import re
import sys
import textwrap

import pytest

pytest.importorskip("uvicorn")

from gem_core.agent.endpoint import AgentEndpointConfig  # noqa: E402
from gem_core.agent.episodes import episode_trajectory, run_agent_episodes, run_agent_programs  # noqa: E402
from gem_core.agent.program import AgentProgram, TaskSetup  # noqa: E402
from gem_core.rollout.policy import BatchingPolicy, SamplingParams  # noqa: E402
from gem_core.testing import ScriptedPolicy  # noqa: E402

# An agent on the standard library alone (any nox env runs it): the task from $GEM_TASK_PROMPT, two calls,
# the answer of the second written to answer.txt, every call's messages logged to sent.json.
AGENT = textwrap.dedent(
    """
    import json, os, sys, time, urllib.request

    def chat(messages):
        request = urllib.request.Request(
            os.environ["OPENAI_BASE_URL"] + "/chat/completions", json.dumps({"model": "m", "messages": messages}).encode(),
            {"Content-Type": "application/json", "Authorization": "Bearer " + os.environ["OPENAI_API_KEY"]})
        return json.load(urllib.request.urlopen(request, timeout=120))["choices"][0]["message"]["content"]

    prompt = os.environ["GEM_TASK_PROMPT"]
    if "exit" in prompt:
        sys.exit(2)
    messages, sent = [{"role": "user", "content": prompt}], []
    for turn in range(2):
        sent.append(list(messages))
        json.dump(sent, open("sent.json", "w"))
        text = chat(messages)
        if "hang" in prompt:
            time.sleep(1000)
        messages += [{"role": "assistant", "content": text}, {"role": "user", "content": "Now write only the word."}]
    open("answer.txt", "w").write(text)
    """
)


def answer(prompt_text: str) -> str:
    """The scripted policy's answer: the task's word on the second turn, a remark on the first."""
    word = re.findall(r"Write the word (\w+)", prompt_text)
    return word[0] if "Now write only the word." in prompt_text else f"thinking about {word[0] if word else '?'}"


def setup(task, workdir):
    (workdir / "task.txt").write_text(task)
    return TaskSetup(prompt=f"Write the word {task} to answer.txt.", data=task)


def grader(run):
    path = run.workdir / "answer.txt"
    run.info["success"] = path.exists() and path.read_text() == run.setup.data
    return float(run.info["success"])


@pytest.fixture
def program(tmp_path):
    path = tmp_path / "agent.py"
    path.write_text(AGENT)
    return AgentProgram(command=[sys.executable, str(path)], setup=setup, grader=grader, time_limit=60)


def scripted(tokenizer):
    return ScriptedPolicy(tokenizer, lambda ids: answer(tokenizer.decode(ids)))


class WaitsForEveryEpisode(BatchingPolicy):
    """A batching policy that samples a round only once every live episode waits (as the trainers' do)."""

    def __init__(self, tokenizer, num_episodes):
        super().__init__(tokenizer, num_episodes=num_episodes, sample_in_thread=False)
        self.script = scripted(tokenizer)
        self.rounds: list[int] = []
        self.finished = 0

    def episode_finished(self):
        self.finished += 1
        super().episode_finished()

    def sample_batch(self, prompts, sampling, max_new_tokens):
        self.rounds.append(len(prompts))
        out = []
        for prompt in prompts:
            ids = self.tokenizer.encode(answer(self.tokenizer.decode(prompt)), add_special_tokens=False) + list(self.script.chat_template.end_of_turn_ids)
            out.append((ids, [ScriptedPolicy.logprob_of(t) for t in ids]))
        return out


def rendered_ids(tokenizer, messages):
    text = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    return tokenizer.encode(text, add_special_tokens=False)


def test_each_task_is_one_trajectory_the_endpoint_recorded_token_by_token_with_the_graders_reward(program, tiny_tokenizer):
    tasks = ["apple", "pear", "plum"]
    sent_by_key = {}

    def keep_what_was_sent(run):  # the run's temporary workdir is gone once graded
        sent_by_key[run.key] = json.loads((run.workdir / "sent.json").read_text())
        return grader(run)

    program.grader = keep_what_was_sent
    runs = asyncio.run(run_agent_programs(program, scripted(tiny_tokenizer), tiny_tokenizer, tasks))
    assert [run.task for run in runs] == tasks
    for run in runs:
        assert run.exit_code == 0 and run.reward == 1.0, run.stderr_tail
        trajectory = episode_trajectory(run, tiny_tokenizer)
        (recorded,) = run.episode.trajectories(run.reward)  # the endpoint's own record of the episode
        for name in ("prompt_ids", "response_ids", "loss_mask", "logprobs", "turn_spans", "rewards", "terminated", "truncated"):
            assert getattr(trajectory, name) == getattr(recorded, name), name
        assert trajectory.rewards == [0.0, 1.0] and trajectory.terminated and trajectory.infos[-1]["success"] is True
        # Each call's prompt is the trajectory so far and equals the template's rendering of what the agent sent.
        sent = sent_by_key[run.key]
        ids = trajectory.prompt_ids + trajectory.response_ids
        for (start, _), messages in zip(trajectory.turn_spans, sent):
            assert ids[: len(trajectory.prompt_ids) + start] == rendered_ids(tiny_tokenizer, messages)
        assert trajectory.metrics["agent_reward"] == 1.0 and trajectory.metrics["agent_dropped_branches"] == 0


def test_the_trainers_sampling_wins_over_the_agents_request(program, tiny_tokenizer):
    """The token budget of the trainer caps the call (the agent asked for the endpoint's default of 1024)."""
    config = AgentEndpointConfig(sampling=SamplingParams(max_new_tokens=2))
    (trajectory,) = asyncio.run(run_agent_episodes(program, scripted(tiny_tokenizer), tiny_tokenizer, ["apple"], config=config))
    start, end = trajectory.turn_spans[0]
    assert end - start == 2 and trajectory.episode_return == 0.0  # cut to two tokens: the answer is wrong


class CountsFinishedEpisodes(ScriptedPolicy):
    def __init__(self, tokenizer):
        super().__init__(tokenizer, lambda ids: answer(tokenizer.decode(ids)))
        self.finished = 0
        self.released: list[list[int]] = []

    def episode_finished(self):
        self.finished += 1

    def release_context(self, token_ids):
        self.released.append(list(token_ids))


def test_a_hung_agent_is_truncated_at_its_time_limit_and_one_that_exits_early_has_no_turns(program, tiny_tokenizer):
    program.time_limit = 5
    tasks = ["apple", "hang", "exit"]
    policy = CountsFinishedEpisodes(tiny_tokenizer)
    solved, hung, exited = asyncio.run(run_agent_episodes(program, policy, tiny_tokenizer, tasks))
    assert solved.rewards == [0.0, 1.0] and solved.terminated
    assert hung.truncated and not hung.terminated and hung.num_turns == 1 and hung.episode_return == 0.0
    assert "time limit" in hung.metrics["agent_ended"] and hung.metrics["agent_exit_code"] is None
    assert exited.num_turns == 0 and exited.response_ids == [] and exited.metrics["agent_exit_code"] == 2
    assert exited.prompt_ids == rendered_ids(tiny_tokenizer, [{"role": "user", "content": "Write the word exit to answer.txt."}])
    assert policy.finished == len(tasks)  # each run told the policy once, however it ended
    # ... and a backend that keeps attention states is told which contexts are over (the exited run had none).
    assert sorted(policy.released) == sorted([solved.prompt_ids + solved.response_ids, hung.prompt_ids + hung.response_ids])


def test_every_run_is_in_flight_at_once_for_a_policy_that_waits_for_every_live_episode(program, tiny_tokenizer):
    """More runs than the event loop's default executor has threads (min(32, cpus + 4)): a bounded pool would
    hold some runs back while the policy waits for them, and every call would time out."""
    tasks = [f"word{i}" for i in range(10)]
    policy = WaitsForEveryEpisode(tiny_tokenizer, num_episodes=len(tasks))
    config = AgentEndpointConfig(call_timeout=30)
    trajectories = asyncio.run(run_agent_episodes(program, policy, tiny_tokenizer, tasks, config=config))
    assert [t.episode_return for t in trajectories] == [1.0] * len(tasks)
    assert policy.rounds[0] == len(tasks)  # the first round held every run's first call


class NoLogprobs(ScriptedPolicy):
    """A backend that reports no log-probabilities (TRL's own generation without vLLM)."""

    async def generate(self, prompt_ids, sampling):
        generation = await super().generate(prompt_ids, sampling)
        return type(generation)(token_ids=generation.token_ids, logprobs=None, finish_reason=generation.finish_reason)


def test_a_policy_without_logprobs_is_said_so_in_the_metrics_not_read_as_zeros(program, tiny_tokenizer):
    (with_none,) = asyncio.run(run_agent_episodes(program, NoLogprobs(tiny_tokenizer, lambda ids: answer(tiny_tokenizer.decode(ids))), tiny_tokenizer, ["apple"]))
    (with_some,) = asyncio.run(run_agent_episodes(program, scripted(tiny_tokenizer), tiny_tokenizer, ["apple"]))
    assert with_none.num_turns == 2 and with_none.metrics["has_logprobs"] is False
    assert with_some.metrics["has_logprobs"] is True


@pytest.mark.parametrize("budget", [4, 12])
def test_a_response_token_budget_caps_each_call_and_truncates_the_episode_when_full(program, tiny_tokenizer, budget):
    """4: the first answer is cut to the budget (no room to close its turn); 12: the answer fits, but the
    next call's user turn would fill the budget, so that call is refused. Either way: truncated, within budget."""
    (trajectory,) = asyncio.run(run_agent_episodes(program, scripted(tiny_tokenizer), tiny_tokenizer, ["apple"], max_response_tokens=budget))
    assert trajectory.truncated and "response token budget of" in trajectory.metrics["agent_ended"]
    assert trajectory.num_turns == 1 and len(trajectory.response_ids) <= budget
    start, end = trajectory.turn_spans[0]
    assert (end - start == budget) == (budget == 4)
