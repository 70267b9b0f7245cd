"""The agent endpoint: the plain OpenAI client against a scripted policy, calls stitched token by token."""

from __future__ import annotations

import asyncio
import copy
import json
import re

import pytest

openai = pytest.importorskip("openai")
httpx = pytest.importorskip("httpx")
pytest.importorskip("uvicorn")

from gem_core.agent.endpoint import AgentEndpoint, AgentEndpointConfig  # noqa: E402
from gem_core.testing import ScriptedPolicy  # noqa: E402

SYSTEM = {"role": "system", "content": "You are a helpful assistant."}


def rendered_ids(tokenizer, messages, tools=None, generation_prompt=True):
    """The chat template's rendering of ``messages``, tokenized: what every call's prompt must equal."""
    text = tokenizer.apply_chat_template(messages, tools=tools, tokenize=False, add_generation_prompt=generation_prompt)
    return tokenizer.encode(text, add_special_tokens=False)


def assert_calls_match_rendering(tokenizer, trajectory, sent, tools=None):
    """Every call's prompt is the trajectory's ids up to that turn and equals the template's rendering of
    the messages sent, token by token; the sampled ids sit under loss mask 1 with the policy's logprobs."""
    ids = trajectory.prompt_ids + trajectory.response_ids
    offset = len(trajectory.prompt_ids)
    assert len(sent) == trajectory.num_turns
    for (start, end), messages in zip(trajectory.turn_spans, sent):
        expected = rendered_ids(tokenizer, messages, tools)
        assert ids[: offset + start] == expected
        assert trajectory.loss_mask[start:end] == [1] * (end - start)
        assert trajectory.logprobs[start:end] == [ScriptedPolicy.logprob_of(t) for t in trajectory.response_ids[start:end]]
    assert sum(trajectory.loss_mask) == sum(end - start for start, end in trajectory.turn_spans)


def test_openai_client_calls_extend_one_trajectory_equal_to_the_templates_rendering(tiny_tokenizer):
    policy = ScriptedPolicy(tiny_tokenizer, ["I guess \\boxed{10}", "\\boxed{15}", "\\boxed{13}"])
    with AgentEndpoint(policy, tiny_tokenizer) as endpoint:
        episode = endpoint.open_episode()
        client = openai.OpenAI(base_url=endpoint.base_url, api_key=episode.key, max_retries=0)
        messages = [SYSTEM, {"role": "user", "content": "I am thinking of an integer between 1 and 20."}]
        sent = []
        for feedback in ["The number is higher than 10.", "The number is lower than 15.", None]:
            sent.append(list(messages))
            reply = client.chat.completions.create(model="any", messages=messages, logprobs=True)
            assert reply.choices[0].finish_reason == "stop"
            messages.append({"role": "assistant", "content": reply.choices[0].message.content})
            if feedback:
                messages.append({"role": "user", "content": feedback})
        (trajectory,) = endpoint.close_episode(episode.key).trajectories(reward=1.0)
    assert [m["content"] for m in messages if m["role"] == "assistant"] == ["I guess \\boxed{10}", "\\boxed{15}", "\\boxed{13}"]
    assert_calls_match_rendering(tiny_tokenizer, trajectory, sent)
    # The whole episode is the rendering of the final conversation (its last glue after the final end-of-turn aside).
    full = rendered_ids(tiny_tokenizer, messages, generation_prompt=False)
    assert trajectory.prompt_ids + trajectory.response_ids == full[: len(trajectory.prompt_ids) + len(trajectory.response_ids)]
    assert trajectory.rewards == [0.0, 0.0, 1.0] and trajectory.terminated and trajectory.metrics["num_branches"] == 1


def test_rewritten_history_forks_the_trajectory_and_its_metrics_say_why(tiny_tokenizer):
    policy = ScriptedPolicy(tiny_tokenizer, ["first answer", "second answer", "third answer"])
    with AgentEndpoint(policy, tiny_tokenizer) as endpoint:
        episode = endpoint.open_episode()
        client = openai.OpenAI(base_url=endpoint.episode_url(episode.key), api_key="unused", max_retries=0)
        first = [SYSTEM, {"role": "user", "content": "hello"}]
        a = client.chat.completions.create(model="any", messages=first).choices[0].message.content
        second = [*first, {"role": "assistant", "content": a}, {"role": "user", "content": "go on"}]
        b = client.chat.completions.create(model="any", messages=second).choices[0].message.content
        # The agent summarises: it drops the first exchange and edits the user turn.
        third = [SYSTEM, {"role": "user", "content": "summary: hello, go on"}, {"role": "assistant", "content": b}, {"role": "user", "content": "next"}]
        client.chat.completions.create(model="any", messages=third)
        trajectories = endpoint.close_episode(episode.key).trajectories(reward=1.0)
    assert len(trajectories) == 2
    main, fork = trajectories
    assert_calls_match_rendering(tiny_tokenizer, main, [first, second])
    assert fork.prompt_ids == rendered_ids(tiny_tokenizer, third) and fork.num_turns == 1
    assert fork.metrics["parent_branch"] == 0 and fork.metrics["forked_at_call"] == 2
    assert fork.metrics["shared_messages"] == 1 and "message 1" in fork.metrics["fork_reason"]
    assert main.rewards == [0.0, 0.0] and fork.rewards == [1.0]  # the reward goes to the branch the agent ended on


def test_an_edited_assistant_reply_forks(tiny_tokenizer):
    policy = ScriptedPolicy(tiny_tokenizer, ["an answer", "another"])
    with AgentEndpoint(policy, tiny_tokenizer) as endpoint:
        episode = endpoint.open_episode()
        client = openai.OpenAI(base_url=endpoint.base_url, api_key=episode.key, max_retries=0)
        first = [{"role": "user", "content": "hello"}]
        client.chat.completions.create(model="any", messages=first)
        client.chat.completions.create(
            model="any", messages=[*first, {"role": "assistant", "content": "a better answer"}, {"role": "user", "content": "ok"}]
        )
        trajectories = endpoint.close_episode(episode.key).trajectories()
    assert len(trajectories) == 2 and "assistant reply" in trajectories[1].metrics["fork_reason"]


# A Qwen-style ChatML template that renders tools and tool calls (the tiny "chatml" one renders neither).
TOOL_TEMPLATE = (
    "{% if tools %}<|im_start|>system\n# Tools\n<tools>{% for t in tools %}\n{{ t | tojson }}{% endfor %}\n</tools><|im_end|>\n{% endif %}"
    "{% for m in messages %}"
    "{% if m.role == 'assistant' %}<|im_start|>assistant\n{{ m.content }}"
    "{% for c in m.tool_calls or [] %}<tool_call>\n{\"name\": \"{{ c.function.name }}\", \"arguments\": {% if c.function.arguments is string %}{{ c.function.arguments }}{% else %}{{ c.function.arguments | tojson }}{% endif %}}\n</tool_call>{% endfor %}"
    "<|im_end|>\n"
    "{% elif m.role == 'tool' %}<|im_start|>user\n<tool_response>\n{{ m.content }}\n</tool_response><|im_end|>\n"
    "{% else %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endif %}"
    "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
TOOLS = [{"type": "function", "function": {"name": "bash", "description": "run a command",
                                           "parameters": {"type": "object", "properties": {"command": {"type": "string"}}}}}]


def test_native_tool_calls_come_back_as_openai_tool_calls_and_the_tool_turn_extends(tiny_tokenizer):
    tokenizer = copy.deepcopy(tiny_tokenizer)
    tokenizer.chat_template = TOOL_TEMPLATE
    call_text = '<tool_call>\n{"name": "bash", "arguments": {"command": "ls"}}\n</tool_call>'
    policy = ScriptedPolicy(tokenizer, [call_text, "There are 2 files."])
    with AgentEndpoint(policy, tokenizer) as endpoint:
        episode = endpoint.open_episode()
        client = openai.OpenAI(base_url=endpoint.base_url, api_key=episode.key, max_retries=0)
        messages = [{"role": "user", "content": "How many files are there?"}]
        sent = [list(messages)]
        reply = client.chat.completions.create(model="any", messages=messages, tools=TOOLS)
        message = reply.choices[0].message
        assert reply.choices[0].finish_reason == "tool_calls" and message.content is None
        (call,) = message.tool_calls
        assert call.function.name == "bash" and json.loads(call.function.arguments) == {"command": "ls"}
        messages += [message.model_dump(exclude_none=True), {"role": "tool", "tool_call_id": call.id, "content": "a.txt\nb.txt"}]
        sent.append(list(messages))
        final = client.chat.completions.create(model="any", messages=messages, tools=TOOLS)
        assert final.choices[0].message.content == "There are 2 files." and not final.choices[0].message.tool_calls
        (trajectory,) = endpoint.close_episode(episode.key).trajectories()
    assert_calls_match_rendering(tokenizer, trajectory, sent, tools=TOOLS)


def test_completions_extend_when_the_prompt_starts_with_the_earlier_prompt_and_completion(tiny_tokenizer):
    policy = ScriptedPolicy(tiny_tokenizer, lambda ids: "the quick brown fox")
    with AgentEndpoint(policy, tiny_tokenizer) as endpoint:
        episode = endpoint.open_episode()
        client = openai.OpenAI(base_url=endpoint.base_url, api_key=episode.key, max_retries=0)
        prompt = "<|im_start|>user\nhello<|im_end|>\n<|im_start|>assistant\n"
        text = client.completions.create(model="any", prompt=prompt).choices[0].text
        assert text == "the quick brown fox"
        longer = prompt + text + "<|im_end|>\n<|im_start|>user\nmore<|im_end|>\n<|im_start|>assistant\n"
        client.completions.create(model="any", prompt=longer)
        (trajectory,) = endpoint.close_episode(episode.key).trajectories()
    ids = trajectory.prompt_ids + trajectory.response_ids
    assert trajectory.num_turns == 2
    assert ids[: len(trajectory.prompt_ids) + trajectory.turn_spans[1][0]] == tiny_tokenizer.encode(longer, add_special_tokens=False)


# -- many episodes at once -------------------------------------------------------------------------

def _echo(tokenizer):
    """A policy that answers the last 'agent N turn T' it sees: a reply names the episode it was routed to."""

    def answer(prompt_ids):
        marks = re.findall(r"agent (\d+) turn (\d+)", tokenizer.decode(prompt_ids))
        return "reply to agent {} turn {}".format(*marks[-1])

    return ScriptedPolicy(tokenizer, answer)


async def _run_agents(endpoint, count, turns):
    async def agent(number):
        episode = endpoint.open_episode()
        client = openai.AsyncOpenAI(base_url=endpoint.base_url, api_key=episode.key, max_retries=0)
        messages = [{"role": "user", "content": f"agent {number} turn 0"}]
        sent = []
        for turn in range(turns):
            sent.append(list(messages))
            reply = await client.chat.completions.create(model="any", messages=messages)
            messages += [{"role": "assistant", "content": reply.choices[0].message.content},
                         {"role": "user", "content": f"agent {number} turn {turn + 1}"}]
        await client.close()
        return number, episode.key, sent, messages

    return await asyncio.gather(*(agent(n) for n in range(count)))


def check_no_crossing(tokenizer, endpoint, results):
    """Each episode holds exactly its own agent's calls, as one branch equal to its own rendering."""
    for number, key, sent, messages in results:
        replies = [m["content"] for m in messages if m["role"] == "assistant"]
        assert replies == [f"reply to agent {number} turn {t}" for t in range(len(sent))], (number, replies)
        (trajectory,) = endpoint.close_episode(key).trajectories()
        assert_calls_match_rendering(tokenizer, trajectory, sent)
        assert set(re.findall(r"agent (\d+)", tokenizer.decode(trajectory.prompt_ids + trajectory.response_ids))) == {str(number)}


def test_32_concurrent_episodes_are_never_crossed(tiny_tokenizer):
    with AgentEndpoint(_echo(tiny_tokenizer), tiny_tokenizer) as endpoint:
        results = asyncio.run(_run_agents(endpoint, 32, 3))
        check_no_crossing(tiny_tokenizer, endpoint, results)
        assert endpoint.episodes == {}


def test_the_crossing_check_fails_when_keys_are_mixed(tiny_tokenizer, monkeypatch):
    """The check above can fail: route every call of one agent to another agent's episode."""
    with AgentEndpoint(_echo(tiny_tokenizer), tiny_tokenizer) as endpoint:
        real = AgentEndpoint._episode

        def mixed(self, request):
            episode = real(self, request)
            keys = sorted(self.episodes)
            return self.episodes[keys[(keys.index(episode.key) + 1) % len(keys)]] if len(keys) == 4 else episode

        monkeypatch.setattr(AgentEndpoint, "_episode", mixed)
        results = asyncio.run(_run_agents(endpoint, 4, 2))
        with pytest.raises(AssertionError):
            check_no_crossing(tiny_tokenizer, endpoint, results)


# -- bad input ---------------------------------------------------------------------------------------

def test_bad_requests_get_clear_openai_shaped_errors_and_the_episode_goes_on(tiny_tokenizer):
    config = AgentEndpointConfig(max_body_bytes=4096)
    with AgentEndpoint(ScriptedPolicy(tiny_tokenizer, ["ok"]), tiny_tokenizer, config) as endpoint:
        episode = endpoint.open_episode(max_turns=2)
        url = endpoint.base_url + "/chat/completions"
        auth = {"Authorization": f"Bearer {episode.key}"}
        good = {"model": "any", "messages": [{"role": "user", "content": "hi"}]}

        def post(body, headers=auth, target=url):
            data = body if isinstance(body, bytes) else json.dumps(body).encode()
            response = httpx.post(target, content=data, headers={**headers, "Content-Type": "application/json"})
            return response.status_code, response.json()["error"] if response.status_code != 200 else response.json()

        status, error = post(b"{not json")
        assert status == 400 and "not valid JSON" in error["message"]
        status, error = post({"model": "any", "messages": [{"role": "wizard", "content": "x"}]})
        assert status == 400 and "messages[0]" in error["message"]
        status, error = post({**good, "n": 2})
        assert status == 400 and "'n'" in error["message"]
        for stop in ("\nObservation:", ["\nObservation:"]):  # was ignored: the answer ran on past it, and was trained on
            status, error = post({**good, "stop": stop})
            assert status == 400 and "'stop' sequences are not supported" in error["message"]
        status, error = post(good, headers={})
        assert status == 401 and "no API key" in error["message"]
        status, error = post(good, headers={"Authorization": "Bearer nobody"})
        assert status == 401 and error["code"] == "invalid_api_key"
        status, error = post(good, target=endpoint.episode_url("nobody") + "/chat/completions")
        assert status == 404 and "nobody" in error["message"]
        status, error = post({"model": "any", "messages": [{"role": "user", "content": "x" * 5000}]})
        assert status == 413 and "4096" in error["message"]
        assert episode.calls == []  # nothing above reached the episode
        assert post({**good, "stop": None})[0] == 200 and post({**good, "stop": []})[0] == 200  # none given
        status, error = post(good)  # the third call is over max_turns=2: refused, episode truncated
        assert status == 409 and "turn limit" in error["message"]
        assert episode.truncated
        first, repeat = endpoint.close_episode(episode.key).trajectories()
        assert "repeated call" in repeat.metrics["fork_reason"]  # the same messages twice: a second sample, a fork
        assert repeat.truncated and not repeat.terminated and not first.truncated
        status, error = post(good)
        assert status == 409 and error["code"] == "episode_over"


def test_a_failing_policy_is_a_502_and_the_episode_can_go_on(tiny_tokenizer):
    class Flaky(ScriptedPolicy):
        async def generate(self, prompt_ids, sampling):
            self.calls += 1
            if self.calls == 1:
                raise RuntimeError("backend down")
            return await super().generate(prompt_ids, sampling)

    with AgentEndpoint(Flaky(tiny_tokenizer, ["fine"]), tiny_tokenizer) as endpoint:
        episode = endpoint.open_episode()
        client = openai.OpenAI(base_url=endpoint.base_url, api_key=episode.key, max_retries=0)
        messages = [{"role": "user", "content": "hi"}]
        with pytest.raises(openai.InternalServerError, match="backend down"):
            client.chat.completions.create(model="any", messages=messages)
        assert client.chat.completions.create(model="any", messages=messages).choices[0].message.content == "fine"
        trajectories = endpoint.close_episode(episode.key).trajectories()
    assert [t.num_turns for t in trajectories] == [1]


def test_closing_an_episode_mid_call_cancels_the_sample_and_leaves_no_unanswered_prompt(tiny_tokenizer):
    """An agent killed at its time limit while the policy samples: the call is cut, nothing dangles."""
    import threading

    reached, cancelled = threading.Event(), threading.Event()

    class Stuck(ScriptedPolicy):
        async def generate(self, prompt_ids, sampling):
            if self.calls == 1:
                reached.set()
                try:
                    await asyncio.Event().wait()
                except asyncio.CancelledError:
                    cancelled.set()
                    raise
            return await super().generate(prompt_ids, sampling)

    with AgentEndpoint(Stuck(tiny_tokenizer, ["first", "second"]), tiny_tokenizer) as endpoint:
        episode = endpoint.open_episode()
        client = openai.OpenAI(base_url=endpoint.base_url, api_key=episode.key, max_retries=0)
        messages = [{"role": "user", "content": "hi"}]
        first = client.chat.completions.create(model="any", messages=messages).choices[0].message.content
        messages += [{"role": "assistant", "content": first}, {"role": "user", "content": "more"}]
        errors = []

        def second_call():
            try:
                client.chat.completions.create(model="any", messages=messages)
            except openai.APIStatusError as error:
                errors.append(error)

        caller = threading.Thread(target=second_call)
        caller.start()
        assert reached.wait(30)
        closed = endpoint.close_episode(episode.key, "time limit of 1 s reached", truncated=True)
        caller.join(30)
        assert cancelled.is_set() and errors and errors[0].status_code == 409
        (trajectory,) = closed.trajectories()
    assert trajectory.num_turns == 1 and trajectory.truncated
    assert trajectory.prompt_ids + trajectory.response_ids == rendered_ids(tiny_tokenizer, messages[:2], generation_prompt=False)[:-1]


def test_a_streaming_client_reads_the_whole_answer_and_the_calls_still_extend(tiny_tokenizer):
    policy = ScriptedPolicy(tiny_tokenizer, ["the quick brown fox", "jumps over the lazy dog"])
    with AgentEndpoint(policy, tiny_tokenizer) as endpoint:
        episode = endpoint.open_episode()
        client = openai.OpenAI(base_url=endpoint.base_url, api_key=episode.key, max_retries=0)
        messages = [{"role": "user", "content": "hello"}]
        sent = []
        for _ in range(2):
            sent.append(list(messages))
            stream = client.chat.completions.create(model="any", messages=messages, stream=True, stream_options={"include_usage": True})
            chunks = list(stream)
            text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
            assert chunks[-1].usage.completion_tokens > 0
            messages += [{"role": "assistant", "content": text}, {"role": "user", "content": "and then?"}]
        (trajectory,) = endpoint.close_episode(episode.key).trajectories()
    assert [m["content"] for m in messages if m["role"] == "assistant"] == ["the quick brown fox", "jumps over the lazy dog"]
    assert_calls_match_rendering(tiny_tokenizer, trajectory, sent)


def _post(endpoint, body, key, path="/chat/completions"):
    """(status, the answer's JSON) of one call to ``endpoint`` with API key ``key``."""
    response = httpx.post(endpoint.base_url + path, json=body, headers={"Authorization": f"Bearer {key}"}, timeout=20)
    return response.status_code, response.json()


HI = {"model": "any", "messages": [{"role": "user", "content": "hi"}]}


@pytest.mark.parametrize("field", [
    {"stream": True, "stream_options": 5}, {"stream": True, "stream_options": "x"}, {"stream": True, "stream_options": [1]},
    {"stream": True, "stream_options": {"include_usage": "yes"}}, {"stream": "yes"}, {"logprobs": "yes"},
])
def test_output_options_are_checked_before_sampling_and_a_bad_one_costs_no_turn(tiny_tokenizer, field):
    """They are read after sampling: a bad one was a 500 after the call had been sampled and recorded."""
    policy = ScriptedPolicy(tiny_tokenizer, ["ok"])
    with AgentEndpoint(policy, tiny_tokenizer) as endpoint:
        episode = endpoint.open_episode()
        status, answer = _post(endpoint, {**HI, **field}, episode.key)
        assert status == 400 and answer["error"]["type"] == "invalid_request_error", answer
        assert repr(next(iter(field)) if len(field) == 1 else "stream_options") in answer["error"]["message"]
        assert policy.calls == 0 and episode.calls == []


def test_completion_logprobs_are_checked_before_sampling(tiny_tokenizer):
    policy = ScriptedPolicy(tiny_tokenizer, ["ok"])
    with AgentEndpoint(policy, tiny_tokenizer) as endpoint:
        episode = endpoint.open_episode()
        status, answer = _post(endpoint, {"model": "any", "prompt": "hi", "logprobs": "yes"}, episode.key, "/completions")
        assert status == 400 and "'logprobs'" in answer["error"]["message"]
        assert _post(endpoint, {"model": "any", "prompt": "hi", "logprobs": 2}, episode.key, "/completions")[0] == 200
        assert policy.calls == 1


def test_a_null_max_completion_tokens_falls_back_to_max_tokens(tiny_tokenizer):
    policy = ScriptedPolicy(tiny_tokenizer, ["one two three four five six seven eight nine ten " * 5])
    with AgentEndpoint(policy, tiny_tokenizer) as endpoint:
        key = endpoint.open_episode().key
        status, answer = _post(endpoint, {**HI, "max_tokens": 3, "max_completion_tokens": None}, key)
        assert status == 200 and answer["usage"]["completion_tokens"] == 3
        status, answer = _post(endpoint, {**HI, "max_tokens": 0, "max_completion_tokens": None}, key)
        assert status == 400 and "'max_tokens'" in answer["error"]["message"]
        status, answer = _post(endpoint, {**HI, "max_tokens": 3, "max_completion_tokens": 0}, key)
        assert status == 400 and "'max_completion_tokens'" in answer["error"]["message"]
        assert policy.calls == 1


@pytest.mark.parametrize(("name", "value"), [
    ("call_timeout", -1), ("call_timeout", "600"), ("body_timeout", 0), ("max_body_bytes", "8MB"), ("max_body_bytes", 0),
    ("default_max_tokens", 0), ("max_tokens_cap", -3), ("max_tokens_cap", 2.5), ("chat_template_kwargs", [1]),
    ("chat_template_kwargs", {1: True}), ("max_closed_keys", -1), ("max_closed_keys", True), ("model_name", None),
    ("model_name", ""), ("sampling", {"temperature": 1.0}), ("max_connections", 0), ("max_open_requests", 0),
])
def test_a_bad_config_value_is_refused_when_the_config_is_made(name, value):
    from gem_core.errors import InvalidArgument, InvalidArgumentType

    with pytest.raises((InvalidArgument, InvalidArgumentType), match=f"AgentEndpointConfig: {name}="):
        AgentEndpointConfig(**{name: value})


def test_a_misspelt_config_keyword_is_named_with_the_closest_one():
    from gem_core.errors import GemError

    with pytest.raises(GemError, match=r"'call_timout' \(did you mean 'call_timeout'\?\)"):
        AgentEndpointConfig(call_timout=5)


def test_max_closed_keys_zero_remembers_no_ended_episode(tiny_tokenizer):
    with AgentEndpoint(ScriptedPolicy(tiny_tokenizer, ["ok"]), tiny_tokenizer, AgentEndpointConfig(max_closed_keys=0)) as endpoint:
        key = endpoint.open_episode().key
        endpoint.close_episode(key)
        assert _post(endpoint, HI, key)[0] == 401


def test_unknown_routes_and_methods_get_openai_shaped_json(tiny_tokenizer):
    with AgentEndpoint(ScriptedPolicy(tiny_tokenizer, ["ok"]), tiny_tokenizer) as endpoint:
        root = f"http://127.0.0.1:{endpoint.port}"
        response = httpx.get(root + "/nope", timeout=10)
        assert response.status_code == 404 and response.headers["content-type"] == "application/json"
        assert response.json()["error"]["code"] == "unknown_route" and "/v1" in response.json()["error"]["message"]
        for method, path in (("PUT", "/v1/chat/completions"), ("GET", "/episodes/abc/v1/completions"), ("POST", "/v1/models")):
            response = httpx.request(method, root + path, timeout=10)
            assert response.status_code == 405 and response.headers["content-type"] == "application/json", (method, path)
            assert response.json()["error"]["code"] == "method_not_allowed" and response.headers["allow"]


# -- one agent cannot starve the others ----------------------------------------------------------------

class _Slow(ScriptedPolicy):
    async def generate(self, prompt_ids, sampling):
        await asyncio.sleep(0.05)
        return await super().generate(prompt_ids, sampling)


def test_an_episode_flooding_the_endpoint_gets_429s_and_other_episodes_are_still_served(tiny_tokenizer):
    """Every agent connects from 127.0.0.1: a cap per address let one agent's 512 waiting calls refuse all others."""
    import http.client
    import socket

    with AgentEndpoint(_Slow(tiny_tokenizer, ["ok"]), tiny_tokenizer) as endpoint:
        flooder, other = endpoint.open_episode(), endpoint.open_episode()
        body = json.dumps(HI).encode()
        request = (f"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {flooder.key}\r\n"
                   f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n").encode() + body
        sockets = []
        try:
            for _ in range(600):  # more than the 512 connections a client address could hold
                sock = socket.create_connection(("127.0.0.1", endpoint.port), timeout=20)
                sock.sendall(request)
                sockets.append(sock)
            status, answer = _post(endpoint, HI, other.key)
            assert status == 200, answer
            statuses = []
            for sock in sockets:
                response = http.client.HTTPResponse(sock)
                response.begin()
                payload = json.loads(response.read())
                statuses.append(response.status)
                if response.status == 429:  # an excess call's connection is closed, freeing its slot
                    assert payload["error"]["code"] == "rate_limit_exceeded" and "max_open_requests" in payload["error"]["message"]
                    assert response.getheader("connection") == "close" and sock.recv(1) == b""
        finally:
            for sock in sockets:
                sock.close()
        assert statuses.count(429) > 0 and statuses.count(200) + statuses.count(429) == 600
        endpoint.close_episode(flooder.key)
        endpoint.close_episode(other.key)


def test_connections_past_the_endpoints_cap_get_an_openai_shaped_503(tiny_tokenizer):
    import socket

    with AgentEndpoint(ScriptedPolicy(tiny_tokenizer, ["ok"]), tiny_tokenizer, AgentEndpointConfig(max_connections=3)) as endpoint:
        key = endpoint.open_episode().key
        idle = [socket.create_connection(("127.0.0.1", endpoint.port), timeout=10) for _ in range(3)]
        try:
            status, answer = _post(endpoint, HI, key)
        finally:
            for sock in idle:
                sock.close()
        assert status == 503 and answer["error"]["type"] == "server_error" and answer["error"]["code"] == "too_many_connections"
        assert "3 connections" in answer["error"]["message"]


def test_a_lone_surrogate_in_a_message_or_a_prompt_is_encoded_as_u_fffd(tiny_tokenizer):
    """Valid JSON ("\\ud800") that no tokenizer encodes, e.g. text an agent decoded with surrogateescape: it was a
    500 internal_error, and every later call repeats it in its history."""
    user = '{"role": "user", "content": "a\\ud800b"}'
    reply = '{"role": "assistant", "content": "ok"}'
    more = '{"role": "user", "content": "c\\udfffd"}'
    bodies = [
        ("/chat/completions", f'{{"model": "any", "messages": [{user}]}}'),
        ("/chat/completions", f'{{"model": "any", "messages": [{user}, {reply}, {more}]}}'),  # extends: the delta path
        ("/completions", '{"model": "any", "prompt": "a\\udfffb"}'),
        ("/completions", '{"model": "any", "prompt": "a\\udfffbok<|im_end|> more\\ud800"}'),  # extends the completion branch
    ]
    with AgentEndpoint(ScriptedPolicy(tiny_tokenizer, ["ok"] * 4), tiny_tokenizer) as endpoint:
        episode = endpoint.open_episode()
        for path, body in bodies:
            response = httpx.post(endpoint.base_url + path, content=body.encode(), timeout=20,
                                  headers={"Authorization": f"Bearer {episode.key}", "Content-Type": "application/json"})
            assert response.status_code == 200, response.text
        chat, completion = endpoint.close_episode(episode.key).trajectories()
    assert chat.num_turns == 2 and completion.num_turns == 2
    sent = [[{"role": "user", "content": "a\ufffdb"}],
            [{"role": "user", "content": "a\ufffdb"}, {"role": "assistant", "content": "ok"}, {"role": "user", "content": "c\ufffdd"}]]
    assert_calls_match_rendering(tiny_tokenizer, chat, sent)
    ids = completion.prompt_ids + completion.response_ids
    assert completion.prompt_ids == tiny_tokenizer.encode("a\ufffdb", add_special_tokens=False)
    delta = tiny_tokenizer.encode(" more\ufffd", add_special_tokens=False)
    assert ids[: len(completion.prompt_ids) + completion.turn_spans[1][0]][-len(delta):] == delta


@pytest.mark.parametrize(("name", "value"), [
    ("max_turns", "3"), ("max_turns", 0), ("max_turns", -1), ("max_turns", 2.5), ("max_turns", True),
    ("max_response_tokens", "3"), ("max_response_tokens", 0),
])
def test_open_episode_refuses_a_bound_that_is_not_a_count_naming_it(tiny_tokenizer, name, value):
    """They were stored unchecked: "3" made every call of the episode a 500, -1 a 409 "turn limit of -1"."""
    from gem_core.errors import InvalidArgument

    endpoint = AgentEndpoint(ScriptedPolicy(tiny_tokenizer, ["ok"]), tiny_tokenizer)
    with pytest.raises(InvalidArgument, match=f"{name}={value!r}"):
        endpoint.open_episode(**{name: value})
    assert endpoint.episodes == {}


def test_a_bad_port_is_refused_when_made_and_a_port_in_use_names_port_0(tiny_tokenizer):
    from gem_core.errors import InvalidArgument, StartFailed

    policy = ScriptedPolicy(tiny_tokenizer, ["ok"])
    for bad in ("abc", -1, 70000, 2.5):
        with pytest.raises(InvalidArgument, match=r"AgentEndpoint: port=.*0 picks a free port"):
            AgentEndpoint(policy, tiny_tokenizer, port=bad)
    with AgentEndpoint(policy, tiny_tokenizer) as first:
        second = AgentEndpoint(policy, tiny_tokenizer, port=first.port)
        with pytest.raises(StartFailed, match=rf"{first.port}.*port=0 for a free one"):
            second.start()
        assert _post(first, HI, first.open_episode().key)[0] == 200
