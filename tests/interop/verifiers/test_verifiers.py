"""verifiers 0.4.0 tasksets (written here against verifiers.v1's own Taskset, Task, TaskData and
@vf.reward) played through make("verifiers:<module>") and the episode runner with a scripted policy, the
reward equal to what verifiers' own Task.score gives; tasks that need verifiers' harness (tools) and
unknown modules refused with what to do."""

from __future__ import annotations

import asyncio
import sys
import textwrap
import time

import pytest

vf = pytest.importorskip("verifiers.v1")

from gem_core import make  # noqa: E402
from gem_core.interop.verifiers import UnknownVerifiersModule, VerifiersUnsupported  # noqa: E402
from gem_core.rollout import run_episode  # noqa: E402
from gem_core.testing import ScriptedPolicy, make_tokenizer  # noqa: E402

SINGLE_TURN = '''
import asyncio

import verifiers.v1 as vf


class SumData(vf.TaskData):
    answer: str


class SumTask(vf.Task[SumData, vf.State, vf.TaskConfig]):
    @vf.reward
    async def correct(self, trace) -> float:
        return 1.0 if trace.last_reply.strip() == self.data.answer else 0.0

    @vf.reward(weight=0.5)
    async def brief(self, trace) -> float:
        if trace.last_reply == "hang":  # a judge that never answers
            await asyncio.sleep(60)
        if trace.last_reply in ("nan", "inf"):
            return float(trace.last_reply)
        return 1.0 if len(trace.last_reply) <= 3 else 0.0

    @vf.metric
    async def reply_chars(self, trace) -> float:
        if trace.last_reply == "boom":
            raise RuntimeError("grader crashed")
        return float(len(trace.last_reply))


class SumTaskset(vf.Taskset[SumTask]):
    def load(self):
        for a, b in [(1, 2), (30, 40), (5, 6)]:
            yield SumTask(SumData(prompt=f"What is {a} + {b}?", system_prompt="Reply with the number only.", answer=str(a + b)), self.config.task)


__all__ = ["SumTaskset"]
'''

WITH_TOOLS = '''
import verifiers.v1 as vf


class ToolTask(vf.Task[vf.TaskData, vf.State, vf.TaskConfig]):
    @classmethod
    def toolsets(cls, config):
        return [object()]

    @vf.reward
    async def anything(self, trace) -> float:
        return 1.0


class ToolTaskset(vf.Taskset[ToolTask]):
    def load(self):
        yield ToolTask(vf.TaskData(prompt="use the tool"), self.config.task)


__all__ = ["ToolTaskset"]
'''


@pytest.fixture(scope="module")
def modules(tmp_path_factory):
    root = tmp_path_factory.mktemp("vf_modules")
    (root / "gem_test_sum.py").write_text(textwrap.dedent(SINGLE_TURN))
    (root / "gem_test_tools.py").write_text(textwrap.dedent(WITH_TOOLS))
    sys.path.insert(0, str(root))
    yield root
    sys.path.remove(str(root))


def verifiers_reward(module: str, index: int, reply: str) -> float:
    """What verifiers' own Task.score gives the reply, on the task its own loader yields."""
    from gem_core.interop.verifiers import VerifiersEnv

    env = VerifiersEnv(module)
    env.reset(options={"index": index})
    trace = env._trace(env.tasks[index], reply)
    asyncio.run(env.tasks[index].score(trace))
    return trace.reward


def test_a_single_turn_taskset_plays_through_the_episode_runner_with_verifiers_own_rewards(modules):
    tokenizer = make_tokenizer("chatml")
    env = make("verifiers:gem_test_sum")
    observation, info = env.reset(options={"index": 1})
    assert observation == "Reply with the number only.\n\nWhat is 30 + 40?" and info["task_index"] == 1
    for reply, expected in (("70", 1.5), ("seventy", 0.0), ("71", 0.5)):
        assert verifiers_reward("gem_test_sum", 1, reply) == expected  # the inputs make the rewards differ
        env = make("verifiers:gem_test_sum")
        seed = next(s for s in range(50) if env.reset(seed=s)[1]["task_index"] == 1)
        trajectory = asyncio.run(run_episode(env, ScriptedPolicy(tokenizer, [reply]), tokenizer, seed=seed))
        assert trajectory.rewards == [expected] and trajectory.terminated and not trajectory.truncated
        assert trajectory.infos[-1]["rewards"] == {"correct": float(expected >= 1.0), "brief": 0.5 * float(len(reply) <= 3)}
        assert trajectory.infos[-1]["metrics"] == {"reply_chars": float(len(reply))}


NEEDS_NETWORK = '''
import httpx
import verifiers.v1 as vf


class RemoteTaskset(vf.Taskset[vf.Task]):
    def load(self):
        rows = httpx.get("http://127.0.0.1:PORT/rows.json", timeout=2).json()
        for row in rows:
            yield vf.Task(vf.TaskData(prompt=row))


__all__ = ["RemoteTaskset"]
'''


def test_a_taskset_that_needs_the_network_says_so(modules):
    import socket

    from gem_core.interop.verifiers import VerifiersUnavailable

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    (modules / "gem_test_remote.py").write_text(textwrap.dedent(NEEDS_NETWORK).replace("PORT", str(port)))
    with pytest.raises(VerifiersUnavailable, match=r"verifiers:gem_test_remote: its taskset's load\(\) needs the network"):
        make("verifiers:gem_test_remote")


def test_tasks_that_need_verifiers_harness_and_unknown_modules_are_refused_with_the_fix(modules):
    with pytest.raises(VerifiersUnsupported, match=r"verifiers:gem_test_tools: task 0 cannot be scored from one reply.*toolsets.*harness='HARNESS_ID'"):
        make("verifiers:gem_test_tools").reset(seed=0)
    with pytest.raises(UnknownVerifiersModule, match=r"verifiers:no_such_taskset: no verifiers taskset module.*sys.path"):
        make("verifiers:no_such_taskset")


def test_a_task_whose_scoring_raises_ends_that_episode_only(modules):
    env = make("verifiers:gem_test_sum")
    env.reset(seed=0)
    observation, reward, terminated, truncated, info = env.step("boom")
    assert (reward, terminated, truncated) == (0.0, False, True)
    assert "verifiers:gem_test_sum: scoring raised TaskError" in info["error"] and "grader crashed" in info["error"]
    env.reset(options={"index": 0})
    assert env.step("3")[1:3] == (1.5, True)  # the next episode plays


def test_a_task_whose_scoring_hangs_ends_that_episode_after_max_step_seconds(modules):
    env = make("verifiers:gem_test_sum")
    env.max_step_seconds = 0.2
    env.reset(seed=0)
    started = time.monotonic()
    observation, reward, terminated, truncated, info = env.step("hang")
    assert time.monotonic() - started < 10
    assert (reward, terminated, truncated) == (0.0, False, True)
    assert "verifiers:gem_test_sum: scoring took longer than max_step_seconds=0.2" in info["error"]


@pytest.mark.parametrize("reply", ["nan", "inf"])
def test_a_task_whose_reward_is_not_finite_ends_that_episode_with_the_error(modules, reply):
    env = make("verifiers:gem_test_sum")
    env.reset(seed=0)
    observation, reward, terminated, truncated, info = env.step(reply)
    assert (reward, terminated, truncated) == (0.0, False, True)
    assert "verifiers:gem_test_sum: the reward is" in info["error"] and "not a finite number" in info["error"]


def gem_first_step_reward(env_id: str, seed: int, reply: str) -> float:
    env = make(env_id)
    env.reset(seed=seed)
    return float(env.step(reply)[1])


def answer_of(seed: int) -> int:
    return next(g for g in range(1, 21) if gem_first_step_reward("game:GuessTheNumber-v0", seed, f"\\boxed{{{g}}}") > 0)


def test_a_gem_env_exported_as_a_verifiers_taskset_is_scored_by_verifiers_with_gem_s_rewards(modules):
    from gem_core.interop.verifiers import load_environment

    env_id = "game:GuessTheNumber-v0"
    tasks = list(load_environment(env_id, num_tasks=3, seed_start=4).take(3))  # verifiers' own taskset view
    assert [t.data.seed for t in tasks] == [4, 5, 6]
    for task in tasks:
        assert task.data.prompt == make(env_id).reset(seed=task.data.seed)[0]
        right = f"\\boxed{{{answer_of(task.data.seed)}}}"
        for reply in (right, "\\boxed{0}", "no guess"):
            env = make("verifiers:gem_test_sum")  # only for its trace builder
            trace = env._trace(task, reply)
            asyncio.run(task.score(trace))  # verifiers' own scoring of the exported task
            assert trace.reward == gem_first_step_reward(env_id, task.data.seed, reply)
        assert gem_first_step_reward(env_id, task.data.seed, right) == 1.0


def test_a_gem_env_round_trips_through_verifiers_loader_and_back_into_gem(modules):
    (modules / "gem_tasks.py").write_text("from gem_core.interop.verifiers import GemTaskset\n\n__all__ = ['GemTaskset']\n")
    tokenizer = make_tokenizer("chatml")
    config = {"env_id": "game:GuessTheNumber-v0", "num_tasks": 2, "seed_start": 7}
    env = make("verifiers:gem_tasks", taskset_config=config)
    reply = f"\\boxed{{{answer_of(8)}}}"
    trajectory = asyncio.run(run_episode(env, ScriptedPolicy(tokenizer, [reply]), tokenizer, seed=next(
        s for s in range(50) if make("verifiers:gem_tasks", taskset_config=config).reset(seed=s)[1]["task_index"] == 1)))
    assert trajectory.rewards == [gem_first_step_reward("game:GuessTheNumber-v0", 8, reply)] == [1.0]
    with pytest.raises(UnknownVerifiersModule, match=r"top-level module name.*__all__"):
        make("verifiers:gem_core.interop.verifiers")


ONE_SHOT_HARNESS = '''
"""A tool-less chat harness written against verifiers' Harness: one model call through the rollout's endpoint."""
import httpx
from verifiers.v1.configs.harness import HarnessConfig
from verifiers.v1.harness import Harness
from verifiers.v1.runtimes import ProgramResult


class OneShotConfig(HarnessConfig):
    pass


class OneShotHarness(Harness[OneShotConfig]):
    APPENDS_SYSTEM_PROMPT = True
    EXECUTES_CODE = False
    NEEDS_CONTAINER = False

    async def launch(self, ctx, trace, runtime, endpoint, secret, mcp_urls, data, tool_interception_url=None):
        system, prompt = self.resolve_prompt(data)
        messages = ([{"role": "system", "content": system}] if system else []) + [{"role": "user", "content": prompt}]
        async with httpx.AsyncClient(timeout=30) as client:
            response = await client.post(f"{endpoint}/chat/completions", headers={"Authorization": f"Bearer {secret}"},
                                         json={"model": ctx.model, "messages": messages})
        return ProgramResult(exit_code=0 if response.status_code == 200 else 1, stdout=response.text, stderr="")


__all__ = ["OneShotHarness"]
'''


@pytest.fixture
def scripted_openai_server():
    """An OpenAI-compatible /v1/chat/completions on a loopback port answering the scripted replies in turn."""
    import threading
    import time

    import uvicorn
    from starlette.applications import Starlette
    from starlette.responses import JSONResponse
    from starlette.routing import Route

    from gem_core.serve.asgi import listening_socket

    script = {"replies": [], "requests": []}

    async def chat(request):
        body = await request.json()
        script["requests"].append(body)
        reply = script["replies"].pop(0)  # a text, or a whole assistant message (one with tool_calls)
        message = reply if isinstance(reply, dict) else {"role": "assistant", "content": reply}
        finish = "tool_calls" if message.get("tool_calls") else "stop"
        return JSONResponse({
            "id": f"chat-{len(script['requests'])}", "object": "chat.completion", "created": 0, "model": body["model"],
            "choices": [{"index": 0, "finish_reason": finish, "message": message}],
            "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
        })

    sock = listening_socket("127.0.0.1", 0)
    server = uvicorn.Server(uvicorn.Config(Starlette(routes=[Route("/v1/chat/completions", chat, methods=["POST"])]), log_level="warning"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started and time.monotonic() < deadline:
        time.sleep(0.05)
    script["url"] = f"http://127.0.0.1:{sock.getsockname()[1]}/v1"
    yield script
    server.should_exit = True
    thread.join(10)
    sock.close()


def test_an_exported_gem_env_runs_in_verifiers_own_rollout_with_gem_s_rewards(modules, scripted_openai_server, monkeypatch):
    """verifiers' SingleAgentEnv.run_episode (its interception server, trace and scoring) plays the exported
    env against a scripted OpenAI-compatible server on loopback; the reward is GEM's for the same reply."""
    from verifiers.v1.envs.single_agent import SingleAgentEnv, SingleAgentEnvConfig

    (modules / "gem_tasks.py").write_text("from gem_core.interop.verifiers import GemTaskset\n\n__all__ = ['GemTaskset']\n")
    (modules / "gem_one_shot_harness.py").write_text(textwrap.dedent(ONE_SHOT_HARNESS))
    monkeypatch.setenv("GEM_TEST_OPENAI_KEY", "not-a-secret")
    env_id = "game:GuessTheNumber-v0"
    config = SingleAgentEnvConfig(
        taskset={"id": "gem_tasks", "env_id": env_id, "num_tasks": 2, "seed_start": 3},
        agent={"harness": {"id": "gem_one_shot_harness"}, "runtime": {"type": "subprocess"}},
    )
    env = SingleAgentEnv(config)
    ctx = vf.ModelContext(model="scripted", client=vf.EvalClientConfig(base_url=scripted_openai_server["url"], api_key_var="GEM_TEST_OPENAI_KEY"))

    async def play(task):
        await env.start()
        try:
            return await env.run_episode(task, ctx)
        finally:
            await env.stop()

    for task in env.taskset:
        right = f"\\boxed{{{answer_of(task.data.seed)}}}"
        for reply in (right, "\\boxed{0}"):
            scripted_openai_server["replies"].append(reply)
            episode = asyncio.run(play(task))
            assert episode.ok and not episode.errors
            (trace,) = episode.traces
            assert trace.last_reply == reply
            assert trace.reward == gem_first_step_reward(env_id, task.data.seed, reply)
            assert scripted_openai_server["requests"][-1]["messages"][-1]["content"] == make(env_id).reset(seed=task.data.seed)[0]
        assert gem_first_step_reward(env_id, task.data.seed, right) == 1.0


# A multi-turn taskset and two harnesses written against verifiers' own Harness: in verifiers 0.4.0 the
# harness runs the conversation (a user turn after each reply; a tool it offers and runs).
QUIZ = 'import verifiers.v1 as vf\n\n\nclass QuizData(vf.TaskData):\n    answer: str\n\n\nclass QuizTask(vf.Task[QuizData, vf.State, vf.TaskConfig]):\n    @vf.reward\n    async def correct(self, trace) -> float:\n        return 1.0 if trace.last_reply.replace("final", "").strip() == self.data.answer else 0.0\n\n    @vf.metric\n    async def turns(self, trace) -> float:\n        return float(trace.num_turns)\n\n    @vf.metric\n    async def tool_results(self, trace) -> float:\n        return float(len(trace.tool_messages))\n\n\nclass QuizTaskset(vf.Taskset[QuizTask]):\n    def load(self):\n        for a, b in [(2, 3), (20, 22)]:\n            yield QuizTask(QuizData(prompt=f"What is {a} + {b}?", system_prompt="Reply with the number only.", answer=str(a + b)), self.config.task)\n\n\n__all__ = ["QuizTaskset"]\n'
RETRY_HARNESS = '"""A multi-turn chat harness: asks again until the reply says \'final\' (at most three turns)."""\nimport httpx\nfrom verifiers.v1.configs.harness import HarnessConfig\nfrom verifiers.v1.harness import Harness\nfrom verifiers.v1.runtimes import ProgramResult\n\n\nclass RetryConfig(HarnessConfig):\n    pass\n\n\nclass RetryHarness(Harness[RetryConfig]):\n    APPENDS_SYSTEM_PROMPT = True\n    EXECUTES_CODE = False\n    NEEDS_CONTAINER = False\n\n    async def launch(self, ctx, trace, runtime, endpoint, secret, mcp_urls, data, tool_interception_url=None):\n        system, prompt = self.resolve_prompt(data)\n        messages = ([{"role": "system", "content": system}] if system else []) + [{"role": "user", "content": prompt}]\n        async with httpx.AsyncClient(timeout=60) as client:\n            for _ in range(3):\n                response = await client.post(f"{endpoint}/chat/completions", headers={"Authorization": f"Bearer {secret}"},\n                                             json={"model": ctx.model, "messages": messages})\n                reply = response.json()["choices"][0]["message"]\n                messages.append({"role": "assistant", "content": reply["content"]})\n                if "final" in (reply["content"] or ""):\n                    break\n                messages.append({"role": "user", "content": "Are you sure? Say \'final\' with your answer when you are."})\n        return ProgramResult(exit_code=0, stdout="", stderr="")\n\n\n__all__ = ["RetryHarness"]\n'
TOOL_HARNESS = '"""A tool-calling chat harness: offers an `add` tool, runs the calls the model makes, until a reply without calls."""\nimport json\n\nimport httpx\nfrom verifiers.v1.configs.harness import HarnessConfig\nfrom verifiers.v1.harness import Harness\nfrom verifiers.v1.runtimes import ProgramResult\n\nADD = {"type": "function", "function": {"name": "add", "description": "Add two integers.",\n       "parameters": {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}}, "required": ["a", "b"]}}}\n\n\nclass ToolConfig(HarnessConfig):\n    pass\n\n\nclass ToolHarness(Harness[ToolConfig]):\n    APPENDS_SYSTEM_PROMPT = True\n    EXECUTES_CODE = False\n    NEEDS_CONTAINER = False\n\n    async def launch(self, ctx, trace, runtime, endpoint, secret, mcp_urls, data, tool_interception_url=None):\n        system, prompt = self.resolve_prompt(data)\n        messages = ([{"role": "system", "content": system}] if system else []) + [{"role": "user", "content": prompt}]\n        async with httpx.AsyncClient(timeout=60) as client:\n            for _ in range(4):\n                response = await client.post(f"{endpoint}/chat/completions", headers={"Authorization": f"Bearer {secret}"},\n                                             json={"model": ctx.model, "messages": messages, "tools": [ADD]})\n                reply = response.json()["choices"][0]["message"]\n                messages.append({k: v for k, v in reply.items() if k in ("role", "content", "tool_calls")})\n                if not reply.get("tool_calls"):\n                    break\n                for call in reply["tool_calls"]:\n                    args = json.loads(call["function"]["arguments"])\n                    messages.append({"role": "tool", "tool_call_id": call["id"], "content": str(args["a"] + args["b"])})\n        return ProgramResult(exit_code=0, stdout="", stderr="")\n\n\n__all__ = ["ToolHarness"]\n'


@pytest.fixture
def multi_turn_modules(modules):
    for name, source in (("gem_test_quiz", QUIZ), ("gem_test_retry_harness", RETRY_HARNESS), ("gem_test_tool_harness", TOOL_HARNESS)):
        (modules / f"{name}.py").write_text(source)
    return modules


def gem_trajectory(harness, index, actions):
    tokenizer = make_tokenizer("chatml")
    seed = next(s for s in range(50) if make("verifiers:gem_test_quiz").reset(seed=s)[1]["task_index"] == index)
    env = make("verifiers:gem_test_quiz", harness=harness)
    try:
        return asyncio.run(run_episode(env, ScriptedPolicy(tokenizer, actions), tokenizer, seed=seed))
    finally:
        env.close()


def test_a_multi_turn_taskset_plays_through_gem_with_the_rewards_of_verifiers_own_rollout(multi_turn_modules, scripted_openai_server, monkeypatch):
    from verifiers.v1.envs.single_agent import SingleAgentEnv, SingleAgentEnvConfig

    monkeypatch.setenv("GEM_TEST_OPENAI_KEY", "not-a-secret")
    direct = SingleAgentEnv(SingleAgentEnvConfig(taskset={"id": "gem_test_quiz"}, agent={"harness": {"id": "gem_test_retry_harness"}, "runtime": {"type": "subprocess"}}))
    ctx = vf.ModelContext(model="scripted", client=vf.EvalClientConfig(base_url=scripted_openai_server["url"], api_key_var="GEM_TEST_OPENAI_KEY"))

    async def play(task):
        await direct.start()
        try:
            return await direct.run_episode(task, ctx)
        finally:
            await direct.stop()

    for index, actions in ((1, ["maybe 41", "final 42"]), (1, ["40", "41", "43"]), (0, ["final 5"])):
        scripted_openai_server["replies"].extend(actions)
        (trace,) = asyncio.run(play(list(direct.taskset)[index])).traces
        trajectory = gem_trajectory("gem_test_retry_harness", index, actions)
        assert trajectory.actions == actions
        assert trajectory.rewards == [0.0] * (len(actions) - 1) + [trace.reward]  # the rollout's reward, at the last turn
        assert trajectory.terminated and trajectory.infos[-1]["metrics"]["turns"] == len(actions) == trace.num_turns
        assert trajectory.observations[1:len(actions)] == ["Are you sure? Say 'final' with your answer when you are."] * (len(actions) - 1)
    assert [gem_trajectory("gem_test_retry_harness", 1, a).rewards[-1] for a in (["final 42"], ["final 41"])] == [1.0, 0.0]


def test_a_tool_taskset_plays_through_gem_the_harness_running_the_calls(multi_turn_modules):
    call = '<tool_call>{"name": "add", "arguments": {"a": 20, "b": 22}}</tool_call>'
    trajectory = gem_trajectory("gem_test_tool_harness", 1, [call, "42"])
    assert '"name": "add"' in trajectory.observations[0]  # the offered tool is shown to the policy
    assert trajectory.observations[1] == "42"  # the harness ran add(20, 22)
    assert trajectory.rewards == [0.0, 1.0] and trajectory.terminated
    assert trajectory.infos[-1]["metrics"]["tool_results"] == 1.0
    # A harness that raises mid-rollout (add without "b") ends that episode with the error; the env plays on.
    broken = gem_trajectory("gem_test_tool_harness", 1, ['<tool_call>{"name": "add", "arguments": {"a": 1}}</tool_call>', "42"])
    assert broken.truncated and not broken.terminated and broken.rewards[-1] == 0.0
    assert "verifiers:gem_test_quiz: the rollout failed" in broken.infos[-1]["error"] and "KeyError" in broken.infos[-1]["error"]


def binary_search_actions(seed: int) -> tuple[list[str], list[str], float]:
    """A multi-turn GEM episode played here: the guesses, GEM's observations after each, and its return."""
    env = make("game:GuessTheNumber-v0")
    env.reset(seed=seed)
    low, high, actions, observations, total = 1, 20, [], [], 0.0
    while True:
        # A first move without a guess (a format error, which costs a turn), so every episode has several turns.
        action = f"\\boxed{{{(low + high) // 2}}}" if actions else "no guess yet"
        observation, reward, terminated, truncated, _ = env.step(action)
        actions.append(action)
        total += float(reward)
        if terminated or truncated:
            return actions, observations, total
        observations.append(observation)
        if action.startswith("\\boxed"):
            guess = (low + high) // 2
            low, high = (guess + 1, high) if "higher" in observation else (low, guess - 1)


def test_a_multi_turn_gem_env_plays_in_verifiers_own_rollout_through_gem_s_harness(modules, scripted_openai_server, monkeypatch):
    from verifiers.v1.envs.single_agent import SingleAgentEnv, SingleAgentEnvConfig

    (modules / "gem_tasks_mt.py").write_text(
        "from gem_core.interop.verifiers import GemHarness, GemTaskset\n\n__all__ = ['GemTaskset', 'GemHarness']\n")
    monkeypatch.setenv("GEM_TEST_OPENAI_KEY", "not-a-secret")
    env = SingleAgentEnv(SingleAgentEnvConfig(taskset={"id": "gem_tasks_mt", "env_id": "game:GuessTheNumber-v0", "num_tasks": 2},
                                              agent={"runtime": {"type": "subprocess"}}))  # the harness: the taskset's own
    ctx = vf.ModelContext(model="scripted", client=vf.EvalClientConfig(base_url=scripted_openai_server["url"], api_key_var="GEM_TEST_OPENAI_KEY"))

    async def play(task):
        await env.start()
        try:
            return await env.run_episode(task, ctx)
        finally:
            await env.stop()

    for task in env.taskset:
        actions, observations, gem_return = binary_search_actions(task.data.seed)
        assert len(actions) >= 2 and gem_return > 0.5  # a win after a format penalty
        scripted_openai_server["replies"].extend(actions)
        before = len(scripted_openai_server["requests"])
        episode = asyncio.run(play(task))
        assert episode.ok and not episode.errors
        (trace,) = episode.traces
        assert trace.num_turns == len(actions) and trace.reward == gem_return
        # The model saw GEM's observations as its user turns.
        seen = [r["messages"][-1]["content"] for r in scripted_openai_server["requests"][before + 1:]]
        assert seen == observations


EMPTY = 'import verifiers.v1 as vf\n\n\nclass EmptyTaskset(vf.Taskset[vf.Task]):\n    def load(self):\n        return iter(())\n\n\n__all__ = ["EmptyTaskset"]\n'
SILENT_HARNESS = '"""A harness that never calls the model (a hung agent)."""\nimport asyncio\n\nfrom verifiers.v1.configs.harness import HarnessConfig\nfrom verifiers.v1.harness import Harness\n\n\nclass SilentConfig(HarnessConfig):\n    pass\n\n\nclass SilentHarness(Harness[SilentConfig]):\n    APPENDS_SYSTEM_PROMPT = True\n    EXECUTES_CODE = False\n    NEEDS_CONTAINER = False\n\n    async def launch(self, ctx, trace, runtime, endpoint, secret, mcp_urls, data, tool_interception_url=None):\n        await asyncio.sleep(3600)\n\n\n__all__ = ["SilentHarness"]\n'


def relay_threads():
    import threading

    return [t for t in threading.enumerate() if t.name == "gem-verifiers-relay"]


def test_a_harness_env_whose_construction_fails_leaves_no_relay_server_behind(multi_turn_modules):
    (multi_turn_modules / "gem_test_empty.py").write_text(EMPTY)
    before = len(relay_threads())
    for _ in range(2):
        with pytest.raises(UnknownVerifiersModule, match="yields no tasks"):
            make("verifiers:gem_test_empty", harness="gem_test_retry_harness")
    assert len(relay_threads()) == before


def test_a_step_after_a_failed_harness_reset_is_a_truncation_that_says_to_reset(multi_turn_modules):
    from gem_core.interop.verifiers_relay import RelayError

    (multi_turn_modules / "gem_test_silent_harness.py").write_text(SILENT_HARNESS)
    env = make("verifiers:gem_test_quiz", harness="gem_test_silent_harness", relay_timeout=0.5)
    try:
        with pytest.raises(RelayError, match="made no model call"):
            env.reset(seed=0)
        observation, reward, terminated, truncated, info = env.step("42")
        assert (observation, reward, terminated, truncated) == ("", 0.0, False, True)
        assert "call reset() first" in info["error"], info
    finally:
        env.close()


@pytest.mark.parametrize("index", ["x", None, [1], float("nan")])
def test_a_task_index_that_is_not_an_integer_is_refused_naming_the_option(modules, index):
    from gem_core.errors import InvalidArgumentType

    env = make("verifiers:gem_test_sum")
    with pytest.raises(InvalidArgumentType, match=r"verifiers:gem_test_sum: options\['index'\] must be an integer"):
        env.reset(options={"index": index})
    assert env.reset(options={"index": 4})[1]["task_index"] == 1  # wraps around the 3 tasks, as before


@pytest.mark.parametrize(("settings", "named"), [
    (dict(call_format="bogus"), "call_format"),
    (dict(call_format=3), "call_format"),
    (dict(relay_timeout=-1), "relay_timeout"),
    (dict(relay_timeout="20"), "relay_timeout"),
    (dict(relay_timeout=float("nan")), "relay_timeout"),
])
def test_verifiers_harness_settings_are_checked_at_make(modules, settings, named):
    """call_format="bogus" was accepted: the harness's first model call got an HTTP 500 and the episode failed
    as "ProviderError: upstream 500"; relay_timeout was not checked at all."""
    from gem_core.errors import InvalidArgument

    with pytest.raises(InvalidArgument, match=named):
        make("verifiers:gem_test_sum", harness="no_such_harness_is_needed", **settings)


@pytest.mark.parametrize("max_tasks", [-1, "5", 2.5, 0, True])
def test_verifiers_max_tasks_must_be_a_whole_number_of_at_least_one(modules, max_tasks):
    """max_tasks=-1/"5"/2.5 raised a raw ValueError out of itertools.islice; 0 said "the taskset yields no tasks"."""
    from gem_core.errors import InvalidArgument

    with pytest.raises(InvalidArgument, match="max_tasks"):
        make("verifiers:gem_test_sum", max_tasks=max_tasks)
