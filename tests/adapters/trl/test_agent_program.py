"""TRL's GRPOTrainer (rollout_func route) training an agent program: each prompt's label is a SWE task, the
program (a stdlib script that owns its loop) calls the endpoint the trainer's policy answers, and the task's
tests grade what it left. A scripted policy stands in for sampling (a random tiny model never writes the fix)."""

from __future__ import annotations

import json
import sys
import textwrap

import pytest

pytest.importorskip("uvicorn")

import gem_adapters.trl.rollout as rollout_module  # noqa: E402
from gem_adapters.trl import GemRolloutFunc, env_return_reward, make_dataset  # noqa: E402
from gem_core.agent.swe import swe_agent_program  # noqa: E402
from gem_core.testing import ScriptedPolicy  # noqa: E402
from gem_core.tools.sandbox import available_modes  # noqa: E402
from ci_guard import module_needs

_bubblewrap = module_needs("bwrap" in available_modes(), "the SWE grader runs in the bubblewrap sandbox")

FIX = {"path": "gemstats/__init__.py", "old": "    return (ordered[middle] + ordered[middle + 1]) / 2",
       "new": "    return (ordered[middle - 1] + ordered[middle]) / 2"}
ASK = "Reply with your edit as JSON: {\"path\": ..., \"old\": ..., \"new\": ...}"

# The agent: two calls (a look, then the edit as JSON), the edit applied to the repository it runs in.
AGENT = textwrap.dedent(
    f"""
    import json, os, urllib.request

    def chat(messages):
        request = urllib.request.Request(
            os.environ["OPENAI_BASE_URL"] + "/chat/completions", json.dumps({{"model": "m", "messages": messages}}).encode(),
            {{"Content-Type": "application/json", "Authorization": "Bearer " + os.environ["OPENAI_API_KEY"]}})
        return json.load(urllib.request.urlopen(request, timeout=120))["choices"][0]["message"]["content"]

    messages = [{{"role": "user", "content": os.environ["GEM_TASK_PROMPT"]}}]
    messages += [{{"role": "assistant", "content": chat(messages)}}, {{"role": "user", "content": {ASK!r}}}]
    edit = json.loads(chat(messages))
    source = open(edit["path"]).read()
    open(edit["path"], "w").write(source.replace(edit["old"], edit["new"]))
    """
)


def test_grpo_trains_an_agent_program_on_swe_tasks_rewarded_by_their_tests(grpo_config, fresh_model, tiny_tokenizer, monkeypatch, tmp_path):
    from trl import GRPOTrainer

    agent = tmp_path / "agent.py"
    agent.write_text(AGENT)
    actions = ["I will fix the median.", json.dumps(FIX)]
    monkeypatch.setattr(rollout_module, "trainer_policy", lambda trainer, n, **kwargs: ScriptedPolicy(tiny_tokenizer, actions))
    received: list[dict] = []

    def reward(completions, env_return, **kwargs):
        received.append({"env_return": list(env_return), **kwargs})
        return env_return_reward(completions, env_return)

    rollout = GemRolloutFunc(max_new_tokens=256, agent=swe_agent_program([sys.executable, str(agent)], time_limit=120, max_turns=4))
    trainer = GRPOTrainer(
        model=fresh_model, reward_funcs=reward, args=grpo_config(max_steps=1, max_completion_length=4096),
        processing_class=tiny_tokenizer, train_dataset=make_dataset("swe:Sample-v0", n=2, seed_start=0), rollout_func=rollout,
    )
    trainer.train()
    assert received and received[-1]["env_return"] == [1.0] * 4  # the task's tests passed on what the agent left
    trajectories = rollout.last_trajectories
    assert [t.rewards for t in trajectories] == [[0.0, 1.0]] * 4 and all(t.infos[-1]["success"] for t in trajectories)
    assert received[-1]["num_turns"] == [2] * 4 and received[-1]["truncated"] == [False] * 4
    # Token-exact: each call's prompt is the trajectory so far and the chat template's rendering of what the agent sent.
    for trajectory in trajectories:
        ids = trajectory.prompt_ids + trajectory.response_ids
        first = [{"role": "user", "content": trajectory_prompt(trajectory, tiny_tokenizer)}]
        second = [*first, {"role": "assistant", "content": actions[0]}, {"role": "user", "content": ASK}]
        for (start, end), messages in zip(trajectory.turn_spans, [first, second]):
            text = tiny_tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
            assert ids[: len(trajectory.prompt_ids) + start] == tiny_tokenizer.encode(text, add_special_tokens=False)
            assert trajectory.loss_mask[start:end] == [1] * (end - start)


def trajectory_prompt(trajectory, tokenizer):
    """The task text the agent got: the user turn of the first call's rendering (the issue, from the SWE task)."""
    from gem_core.agent.swe import _prompt
    from gem_core.envs.swe.swe_env import SweEnv

    env = SweEnv(sample=True)
    env.reset(seed=trajectory.seed)
    try:
        return _prompt(env.task)
    finally:
        env.close()


# A task of any env's label: the agent asks twice and writes the second answer; sent.json logs its calls.
ECHO_AGENT = textwrap.dedent(
    """
    import json, os, urllib.request

    def chat(messages):
        request = urllib.request.Request(
            os.environ["OPENAI_BASE_URL"] + "/chat/completions",
            json.dumps({"model": "m", "messages": messages, "temperature": 0.0, "max_tokens": 1000}).encode(),
            {"Content-Type": "application/json", "Authorization": "Bearer " + os.environ["OPENAI_API_KEY"]})
        return json.load(urllib.request.urlopen(request, timeout=300))["choices"][0]["message"]["content"]

    messages, sent = [{"role": "user", "content": os.environ["GEM_TASK_PROMPT"]}], []
    for turn in range(2):
        sent.append(list(messages))
        messages += [{"role": "assistant", "content": chat(messages)}, {"role": "user", "content": "Once more."}]
    json.dump(sent, open("sent.json", "w"))
    open("answer.txt", "w").write(messages[-2]["content"])
    """
)


def test_the_trainers_own_model_answers_the_agent_through_the_endpoint(grpo_config, fresh_model, tiny_tokenizer, tmp_path):
    """No stand-in: TRL's model samples every call (a batching policy over the 4 runs, on the endpoint's loop),
    with the trainer's token budget over the agent's max_tokens, and the trajectories reach TRL."""
    from trl import GRPOTrainer

    from gem_core.agent import AgentProgram, TaskSetup

    agent = tmp_path / "agent.py"
    agent.write_text(ECHO_AGENT)
    workdirs, sent = [], []

    def setup(label, workdir):
        workdirs.append(workdir)
        return TaskSetup(prompt=f"Say something about the number {label.seed}.")

    def grader(run):  # the run's temporary workdir is gone once graded
        sent.append(json.loads((run.workdir / "sent.json").read_text()))
        return float(bool((run.workdir / "answer.txt").read_text()))

    received: list[dict] = []

    def reward(completions, env_return, **kwargs):
        received.append({"env_return": list(env_return), **kwargs})
        return env_return_reward(completions, env_return)

    program = AgentProgram(command=[sys.executable, str(agent)], setup=setup, grader=grader, time_limit=300)
    rollout = GemRolloutFunc(max_new_tokens=6, agent=program)
    trainer = GRPOTrainer(
        model=fresh_model, reward_funcs=reward, args=grpo_config(max_steps=1), processing_class=tiny_tokenizer,
        train_dataset=make_dataset("game:GuessTheNumber-v0", n=2, seed_start=0), rollout_func=rollout,
    )
    trainer.train()
    trajectories = rollout.last_trajectories
    assert received and received[-1]["num_turns"] == [2] * 4 and len(workdirs) == 4
    for trajectory in trajectories:
        assert trajectory.metrics["num_branches"] == 1 and trajectory.metrics["has_logprobs"] is False  # TRL recomputes them
        assert all(end - start <= 6 for start, end in trajectory.turn_spans)  # the trainer's max_new_tokens, not the agent's 1000
        assert trajectory.episode_return == trajectory.metrics["agent_reward"]
    first = tiny_tokenizer.apply_chat_template(sent[0][0], tokenize=False, add_generation_prompt=True)
    prompts = {tuple(t.prompt_ids) for t in trajectories}
    assert tuple(tiny_tokenizer.encode(first, add_special_tokens=False)) in prompts


def test_max_completion_length_is_the_agent_runs_response_budget(grpo_config, fresh_model, tiny_tokenizer, tmp_path):
    """A run whose second call would not fit in GRPOConfig.max_completion_length is refused and truncated there."""
    from trl import GRPOTrainer

    from gem_core.agent import AgentProgram, TaskSetup

    agent = tmp_path / "agent.py"
    agent.write_text(ECHO_AGENT)
    program = AgentProgram(command=[sys.executable, str(agent)], setup=lambda label, workdir: TaskSetup(prompt="Say something."), time_limit=300)
    rollout = GemRolloutFunc(max_new_tokens=6, agent=program)
    trainer = GRPOTrainer(
        model=fresh_model, reward_funcs=env_return_reward, args=grpo_config(max_steps=1, max_completion_length=8),
        processing_class=tiny_tokenizer, train_dataset=make_dataset("game:GuessTheNumber-v0", n=2, seed_start=0), rollout_func=rollout,
    )
    trainer.train()
    for trajectory in rollout.last_trajectories:
        assert trajectory.truncated and trajectory.num_turns == 1 and len(trajectory.response_ids) <= 8


# Exits at once for an even seed, sleeps past its time limit for an odd one: no call either way.
SILENT_AGENT = "import os, sys, time\nif int(os.environ['GEM_TASK_PROMPT']) % 2:\n    time.sleep(60)\n"


def test_a_run_that_made_no_call_reaches_trls_step_as_one_masked_token(grpo_config, fresh_model, tiny_tokenizer, tmp_path):
    """A run killed at its time limit before its first call (or that exits without one) has an empty completion;
    TRL's step read its last id and failed with IndexError. It reaches TRL as one token out of the loss, truncated
    exactly when the run was, its reward kept."""
    import torch
    from trl import GRPOTrainer

    from gem_core.agent import AgentProgram, TaskSetup

    class Recorder(GRPOTrainer):
        seen: list[dict] = []

        def _compute_loss(self, model, inputs):
            Recorder.seen.append({k: v.clone() for k, v in inputs.items() if torch.is_tensor(v)})
            return super()._compute_loss(model, inputs)

    agent = tmp_path / "agent.py"
    agent.write_text(SILENT_AGENT)
    program = AgentProgram(command=[sys.executable, str(agent)], setup=lambda label, workdir: TaskSetup(prompt=str(label.seed)), time_limit=1.0)
    received: list[dict] = []

    def reward(completions, env_return, completion_ids, **kwargs):
        received.append({"env_return": list(env_return), "completion_ids": [list(ids) for ids in completion_ids], **kwargs})
        return env_return_reward(completions, env_return)

    rollout = GemRolloutFunc(max_new_tokens=6, agent=program)
    trainer = Recorder(
        model=fresh_model, reward_funcs=reward, args=grpo_config(max_steps=1), processing_class=tiny_tokenizer,
        train_dataset=make_dataset("game:GuessTheNumber-v0", n=2, seed_start=0), rollout_func=rollout,
    )
    trainer.train()
    trajectories = rollout.last_trajectories
    assert all(not t.response_ids for t in trajectories) and sorted(t.truncated for t in trajectories) == [False, False, True, True]
    batch = received[-1]
    assert batch["env_return"] == [t.episode_return for t in trajectories] and batch["truncated"] == [t.truncated for t in trajectories]
    ends = [*trainer.eos_token_ids, tiny_tokenizer.pad_token_id]
    assert [len(ids) for ids in batch["completion_ids"]] == [1] * 4
    assert [ids[-1] not in ends for ids in batch["completion_ids"]] == [t.truncated for t in trajectories]
    assert Recorder.seen[-1]["tool_mask"][:, :1].tolist() == [[0]] * 4  # the token is not the model's: out of the loss
    logged = next(entry for entry in trainer.state.log_history if "completions/clipped_ratio" in entry)
    assert logged["completions/clipped_ratio"] == 0.5
