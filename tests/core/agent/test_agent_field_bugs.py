"""Agent endpoint and programs: defects found in the field (abandoned calls, cancelled setups, an endpoint never
started, non-finite tool arguments, what a grader, a setup or a command returns, options the policy cannot honour)."""

from __future__ import annotations

import asyncio
import copy
import http.client
import json
import socket
import sys
import threading
import time

import pytest

httpx = pytest.importorskip("httpx")
pytest.importorskip("uvicorn")

from gem_core.agent.endpoint import AgentEndpoint  # noqa: E402
from gem_core.agent.episodes import run_agent_programs  # noqa: E402
from gem_core.agent.program import AgentProgram, TaskSetup  # noqa: E402
from gem_core.errors import GemError, UsageError  # noqa: E402
from gem_core.testing import ScriptedPolicy  # noqa: E402

HI = {"model": "any", "messages": [{"role": "user", "content": "hi"}]}


def _post(endpoint, body, key, path="/chat/completions"):
    """(status, the answer's JSON) of one call to ``endpoint`` with API key ``key``."""
    response = httpx.post(endpoint.base_url + path, json=body, headers={"Authorization": f"Bearer {key}"}, timeout=20)
    return response.status_code, response.json()


def _send(endpoint, key, body):
    """A socket that has sent one whole chat call (its answer unread): a client that may give up on it."""
    data = json.dumps(body).encode()
    sock = socket.create_connection(("127.0.0.1", endpoint.port), timeout=20)
    sock.sendall((f"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {key}\r\n"
                  f"Content-Type: application/json\r\nContent-Length: {len(data)}\r\n\r\n").encode() + data)
    return sock


class _HeldFirst(ScriptedPolicy):
    """Holds its first sample (up to 5 s) until released, and says whether it was reached and cancelled."""

    def __init__(self, tokenizer, actions):
        super().__init__(tokenizer, actions)
        self.reached, self.cancelled, self.release = threading.Event(), threading.Event(), threading.Event()

    async def generate(self, prompt_ids, sampling):
        if not self.reached.is_set():
            self.reached.set()
            try:
                for _ in range(100):
                    if self.release.is_set():
                        break
                    await asyncio.sleep(0.05)
            except asyncio.CancelledError:
                self.cancelled.set()
                raise
        return await super().generate(prompt_ids, sampling)


# -- 1. a call its client gave up on -------------------------------------------------------------------------------

def test_a_call_whose_client_disconnected_mid_sample_is_cancelled_and_not_recorded(tiny_tokenizer):
    """An agent's HTTP client gave up on a slow call (its timeout, then its retry): the endpoint went on sampling the
    abandoned call and recorded it as a turn, so with max_turns=1 the retry got 409 though the agent had no answer."""
    policy = _HeldFirst(tiny_tokenizer, ["answer"])
    with AgentEndpoint(policy, tiny_tokenizer) as endpoint:
        episode = endpoint.open_episode(max_turns=1)
        sock = _send(endpoint, episode.key, HI)
        assert policy.reached.wait(10)
        sock.close()
        assert policy.cancelled.wait(3), "the call its client abandoned went on sampling"
        status, answer = _post(endpoint, HI, episode.key)
        assert status == 200, answer
        assert answer["choices"][0]["message"]["content"] == "answer"
        endpoint.close_episode(episode.key)
    assert len(episode.calls) == 1 and len(episode.branches) == 1


def test_a_call_whose_client_disconnected_while_waiting_for_its_turn_is_never_sampled(tiny_tokenizer):
    """A call waiting behind the episode's call in progress, abandoned by its client: it was sampled once its turn
    came and recorded (here a fork, "a repeated call": a reply nobody read became a trained branch)."""
    policy = _HeldFirst(tiny_tokenizer, ["answer"])
    with AgentEndpoint(policy, tiny_tokenizer) as endpoint:
        episode = endpoint.open_episode()
        first = _send(endpoint, episode.key, HI)
        assert policy.reached.wait(10)
        second = _send(endpoint, episode.key, HI)
        time.sleep(0.5)  # its body read: it waits for the episode's lock
        second.close()
        time.sleep(0.3)
        policy.release.set()
        response = http.client.HTTPResponse(first)
        response.begin()
        assert response.status == 200 and json.loads(response.read())["choices"][0]["message"]["content"] == "answer"
        first.close()
        deadline = time.monotonic() + 1.0
        while time.monotonic() < deadline and len(episode.calls) < 2:
            time.sleep(0.05)
        endpoint.close_episode(episode.key)
    assert policy.calls == 1 and len(episode.calls) == 1 and len(episode.branches) == 1


# -- 2. a batch cancelled while a run is in its setup -----------------------------------------------------------------

def test_a_batch_cancelled_during_a_runs_setup_never_starts_its_agent(tiny_tokenizer, tmp_path):
    """Cancelled while a run was still in its setup, the run went on: its setup finished, its agent started against
    the stopped endpoint and ran to its time limit, which the interpreter then waited out at exit."""
    marker = tmp_path / "started"

    def setup(task, workdir):
        time.sleep(1.0)  # e.g. copying a repository

    program = AgentProgram(
        command=[sys.executable, "-c", "import sys, time; open(sys.argv[1], 'w').write('x'); time.sleep(60)", str(marker)],
        time_limit=5, setup=setup,
    )

    async def main():
        job = asyncio.ensure_future(run_agent_programs(program, ScriptedPolicy(tiny_tokenizer, ["x"]), tiny_tokenizer, ["t"]))
        await asyncio.sleep(0.3)
        job.cancel()
        with pytest.raises(asyncio.CancelledError):
            await asyncio.wait_for(job, 20)

    asyncio.run(main())
    deadline = time.monotonic() + 2.5  # the setup ends at 1 s; an agent started then writes its marker at once
    while time.monotonic() < deadline and not marker.exists():
        time.sleep(0.05)
    assert not marker.exists(), "the cancelled run's agent started after its setup"


# -- 3. an endpoint never started -------------------------------------------------------------------------------------

def test_a_run_against_an_endpoint_never_started_is_refused_before_its_setup(tiny_tokenizer, tmp_path):
    """The agent was pointed at http://127.0.0.1:0/v1, every call failed, and the run came back an ordinary one with
    reward 0.0 and no error: a batch of empty episodes to train on."""
    setups = []
    endpoint = AgentEndpoint(ScriptedPolicy(tiny_tokenizer, ["x"]), tiny_tokenizer)
    program = AgentProgram(command=[sys.executable, "-c", "pass"], time_limit=20, setup=lambda task, workdir: setups.append(task))
    with pytest.raises(UsageError, match=r"start the endpoint first.*with AgentEndpoint"):
        program.run(endpoint, "t", workdir=tmp_path)
    assert setups == [] and endpoint.episodes == {}


# -- 4. non-finite tool arguments ---------------------------------------------------------------------------------

TOOL_TEMPLATE = (
    "{% if tools %}<|im_start|>system\n# Tools\n<tools>{% for t in tools %}\n{{ t | tojson }}{% endfor %}\n</tools><|im_end|>\n{% endif %}"
    "{% for m in messages %}"
    "{% if m.role == 'assistant' %}<|im_start|>assistant\n{{ m.content }}"
    "{% for c in m.tool_calls or [] %}<tool_call>\n{\"name\": \"{{ c.function.name }}\", \"arguments\": {% if c.function.arguments is string %}"
    "{{ c.function.arguments }}{% else %}{{ c.function.arguments | tojson }}{% endif %}}\n</tool_call>{% endfor %}"
    "<|im_end|>\n"
    "{% elif m.role == 'tool' %}<|im_start|>user\n<tool_response>\n{{ m.content }}\n</tool_response><|im_end|>\n"
    "{% else %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endif %}"
    "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
TOOLS = [{"type": "function", "function": {"name": "f", "parameters": {"type": "object", "properties": {"x": {"type": "number"}}}}}]


def test_a_tool_call_with_non_finite_arguments_sent_back_as_received_extends_the_episode(tiny_tokenizer):
    """The arguments were sent as JSON (NaN as null) but recorded with the float: the agent's next call, echoing the
    reply it got, no longer matched it, and the episode forked ("the assistant reply ... was edited")."""
    tokenizer = copy.deepcopy(tiny_tokenizer)
    tokenizer.chat_template = TOOL_TEMPLATE
    policy = ScriptedPolicy(tokenizer, ['<tool_call>{"name": "f", "arguments": {"x": NaN, "y": [Infinity, 1]}}</tool_call>', "done"])
    with AgentEndpoint(policy, tokenizer) as endpoint:
        episode = endpoint.open_episode()
        messages = [{"role": "user", "content": "call f"}]
        status, reply = _post(endpoint, {**HI, "messages": messages, "tools": TOOLS}, episode.key)
        assert status == 200, reply
        message = reply["choices"][0]["message"]
        assert json.loads(message["tool_calls"][0]["function"]["arguments"]) == {"x": None, "y": [None, 1]}
        messages += [message, {"role": "tool", "tool_call_id": message["tool_calls"][0]["id"], "content": "ok"}]
        status, reply = _post(endpoint, {**HI, "messages": messages, "tools": TOOLS}, episode.key)
        assert status == 200, reply
        endpoint.close_episode(episode.key)
    assert len(episode.branches) == 1, episode.branches[-1].fork_reason


# -- 5. what a grader, a setup or a command function returns --------------------------------------------------------

@pytest.mark.parametrize(
    ("fields", "named"),
    [
        ({"grader": lambda run: None}, "grader"),
        ({"grader": lambda run: "yes"}, "grader"),
        ({"grader": lambda run: "0.7"}, "grader"),  # was taken as the reward 0.7
        ({"grader": lambda run: True}, "grader"),
        ({"grader": lambda run: float("nan")}, "grader"),
        ({"setup": lambda task, workdir: {"prompt": "fix it"}}, "setup"),
        ({"setup": lambda task, workdir: "fix it"}, "setup"),
        ({"setup": lambda task, workdir: TaskSetup(prompt=5)}, "prompt"),
        ({"command": lambda task: None}, "command"),
        ({"command": lambda task: [sys.executable, None]}, "command"),
    ],
    ids=["grader-None", "grader-yes", "grader-text-number", "grader-bool", "grader-nan", "setup-dict", "setup-str",
         "setup-prompt-int", "command-None", "command-None-argument"],
)
def test_what_a_grader_setup_or_command_returns_is_checked_and_a_bad_value_named(tiny_tokenizer, tmp_path, fields, named):
    """Each was a raw TypeError, ValueError or AttributeError naming neither the grader, the setup nor the command,
    after the agent had run; a grader's text "0.7" was silently taken as the reward 0.7."""
    with AgentEndpoint(ScriptedPolicy(tiny_tokenizer, ["x"]), tiny_tokenizer) as endpoint:
        program = AgentProgram(**{"command": [sys.executable, "-c", "pass"], "time_limit": 20, **fields})
        with pytest.raises(GemError, match=named):
            program.run(endpoint, "t", workdir=tmp_path)
        assert endpoint.episodes == {}


def test_a_grader_returning_a_whole_number_or_a_numpy_float_is_its_reward(tiny_tokenizer, tmp_path):
    np = pytest.importorskip("numpy")
    with AgentEndpoint(ScriptedPolicy(tiny_tokenizer, ["x"]), tiny_tokenizer) as endpoint:
        for value in (1, np.float32(0.5)):
            run = AgentProgram(command=[sys.executable, "-c", "pass"], time_limit=20, grader=lambda run, v=value: v).run(endpoint, "t", workdir=tmp_path)
            assert run.reward == float(value) and type(run.reward) is float


# -- 6. options the policy cannot honour ---------------------------------------------------------------------------

@pytest.mark.parametrize(
    ("path", "body", "named"),
    [
        ("/completions", {"prompt": "PROMPT ", "echo": True}, "echo"),
        ("/completions", {"prompt": "def f(", "suffix": "\n    return x"}, "suffix"),
        ("/chat/completions", {**HI, "seed": 1234}, "seed"),
        ("/completions", {"prompt": "hello", "seed": 1234}, "seed"),
    ],
    ids=["echo", "suffix", "chat-seed", "completion-seed"],
)
def test_an_option_the_policy_cannot_honour_is_a_400_naming_it_and_costs_no_turn(tiny_tokenizer, path, body, named):
    """They were answered 200 as if honoured: echo's answer held no prompt, the suffix was ignored, and a seeded
    evaluation got a different sample each time."""
    with AgentEndpoint(ScriptedPolicy(tiny_tokenizer, ["ok"]), tiny_tokenizer) as endpoint:
        episode = endpoint.open_episode()
        status, answer = _post(endpoint, body, episode.key, path)
        assert status == 400 and f"'{named}'" in answer["error"]["message"], answer
        assert episode.calls == []


@pytest.mark.parametrize(("path", "body"), [
    ("/chat/completions", {**HI, "n": None}), ("/completions", {"prompt": "hi", "echo": False, "suffix": None, "n": None}),
    ("/completions", {"prompt": "hi", "suffix": ""}), ("/chat/completions", {**HI, "seed": None}),
])
def test_the_defaults_clients_write_out_are_accepted(tiny_tokenizer, path, body):
    """``n: null``, the OpenAI default several clients write out, was refused 400 ("'n' must be 1")."""
    with AgentEndpoint(ScriptedPolicy(tiny_tokenizer, ["ok"]), tiny_tokenizer) as endpoint:
        status, answer = _post(endpoint, body, endpoint.open_episode().key, path)
        assert status == 200, answer


def test_a_seed_is_overridden_like_the_temperature_when_the_trainers_sampling_wins(tiny_tokenizer):
    from gem_core.agent.endpoint import AgentEndpointConfig
    from gem_core.rollout.policy import SamplingParams

    config = AgentEndpointConfig(sampling=SamplingParams(max_new_tokens=64))
    with AgentEndpoint(ScriptedPolicy(tiny_tokenizer, ["ok"]), tiny_tokenizer, config) as endpoint:
        status, answer = _post(endpoint, {**HI, "seed": 7}, endpoint.open_episode().key)
        assert status == 200, answer

