"""OpenEnv both ways with the `openenv` package's own classes: a GEM env driven by OpenEnv's
GenericEnvClient through OpenEnv's server, an OpenEnv Environment (written here with OpenEnv's base
classes) played through gem_core.make and run_episode, and OpenEnv's own template env (what
`openenv init` writes) wrapped in-process and, served by its own app in a child process, through
OpenEnv's clients."""

from __future__ import annotations

import importlib
import random
import sys
import threading
import time

import pytest

pytest.importorskip("openenv")
uvicorn = pytest.importorskip("uvicorn")

from openenv.core import GenericEnvClient  # noqa: E402
from openenv.core.env_server import Action, Environment, Observation, State  # noqa: E402

from gem_core import make, register  # noqa: E402
from gem_core.env import episode_over_result  # noqa: E402
from gem_core.serve.openenv_interop import OpenEnvEnv, openenv_app  # noqa: E402
from gem_core.serve.asgi import listening_socket  # noqa: E402
from server_process import ServerProcess  # noqa: E402


@pytest.fixture
def openenv_server():
    """OpenEnv's app for game:GuessTheNumber-v0 under uvicorn on a loopback port (in a thread)."""
    sock = listening_socket("127.0.0.1", 0)
    server = uvicorn.Server(uvicorn.Config(openenv_app("game:GuessTheNumber-v0"), log_level="warning"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started and time.monotonic() < deadline:
        time.sleep(0.05)
    yield f"http://127.0.0.1:{sock.getsockname()[1]}"
    server.should_exit = True
    thread.join(10)
    sock.close()


def test_openenv_client_plays_a_gem_env(openenv_server):
    local = make("game:GuessTheNumber-v0")
    with GenericEnvClient(base_url=openenv_server).sync() as client:
        for seed in (0, 1):
            result = client.reset(seed=seed)
            assert result.observation["text"] == local.reset(seed=seed)[0] and not result.done
            for action in ["\\boxed{10}", "no idea", "\\boxed{15}"]:
                observation, reward, terminated, truncated, info = local.step(action)
                result = client.step({"text": action})
                assert result.observation["text"] == observation
                assert result.reward == pytest.approx(float(reward)) and result.done == (terminated or truncated)
                assert result.observation["info"].get("format_error") == info.get("format_error")


class DoubleAction(Action):
    answer: int


class DoubleObservation(Observation):
    prompt: str = ""


class Double(Environment[DoubleAction, DoubleObservation, State]):
    """An OpenEnv env: answer twice the number shown."""

    def reset(self, seed=None, episode_id=None, **kwargs):
        self.number = random.Random(seed).randint(1, 50)
        self._state = State(episode_id=episode_id, step_count=0)
        return DoubleObservation(prompt=f"Double {self.number}; answer with the number only.", done=False, reward=None)

    def step(self, action, timeout_s=None, **kwargs):
        self._state.step_count += 1
        right = action.answer == 2 * self.number
        return DoubleObservation(prompt="Right." if right else "Wrong.", done=True, reward=1.0 if right else 0.0, metadata={"expected": 2 * self.number})

    @property
    def state(self):
        return self._state


register(
    "openenv:Double-v0",
    lambda: OpenEnvEnv(Double, DoubleAction, action_field="answer", observation_field="prompt", sample_action=lambda rng: str(int(rng.integers(2, 101)))),
)


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), float("-inf")])
def test_a_step_whose_reward_is_not_finite_ends_the_episode_with_the_error(bad):
    class NotFinite(Double):
        def step(self, action, timeout_s=None, **kwargs):
            return DoubleObservation(prompt="?", done=True, reward=bad)

    env = OpenEnvEnv(NotFinite, DoubleAction, action_field="answer", observation_field="prompt")
    env.reset(seed=0)
    observation, reward, terminated, truncated, info = env.step("2")
    assert (observation, reward, terminated, truncated) == ("", 0.0, False, True)
    assert f"reward {bad}" in info["error"] and "not a finite number" in info["error"]
    env.close()


def test_an_openenv_env_through_make():
    env = make("openenv:Double-v0")
    observation, _ = env.reset(seed=3)
    number = int(observation.split()[1].rstrip(";"))
    assert env.step(str(2 * number))[:3] == ("Right.", 1.0, True)
    env.reset(seed=3)
    observation, reward, terminated, _, info = env.step("twelve")  # fails DoubleAction's validation
    assert info["format_error"] and reward < 0 and "not accepted" in observation and not terminated
    observation, reward, terminated, _, info = env.step(str(2 * number + 1))
    assert (observation, reward, terminated, info["expected"]) == ("Wrong.", 0.0, True, 2 * number)


async def test_an_openenv_env_through_run_episode():
    from gem_core.rollout import run_episode
    from gem_core.testing import ScriptedPolicy, make_tokenizer

    tokenizer = make_tokenizer("chatml")
    env = make("openenv:Double-v0")
    number = int(env.reset(seed=7)[0].split()[1].rstrip(";"))
    trajectory = await run_episode(env, ScriptedPolicy(tokenizer, [str(2 * number)]), tokenizer, seed=7)
    assert trajectory.rewards == [1.0] and trajectory.terminated and trajectory.actions == [str(2 * number)]


@pytest.fixture(scope="module")
def echo_template(tmp_path_factory):
    """OpenEnv's template env as `openenv init echo_env` writes it (rendered with OpenEnv's own template
    functions; the CLI would also run `uv lock`, which needs the network), imported from a temp folder."""
    init = pytest.importorskip("openenv.cli.commands.init")
    root = tmp_path_factory.mktemp("openenv_template")
    init._copy_template_directory(
        "openenv.cli.templates.openenv_env", "", root / "echo_env", init._create_template_replacements("echo_env"), "echo_env"
    )
    sys.path.insert(0, str(root))
    try:
        models = importlib.import_module("echo_env.models")
        environment = importlib.import_module("echo_env.server.echo_env_environment")
        client = importlib.import_module("echo_env.client")
        yield root, models, environment.EchoEnvironment, client.EchoEnv
    finally:
        sys.path.remove(str(root))
        for name in [m for m in sys.modules if m == "echo_env" or m.startswith("echo_env.")]:
            del sys.modules[name]


@pytest.fixture(scope="module")
def echo_server(echo_template):
    """The template's own server app (OpenEnv's create_app) under uvicorn in a child process on loopback."""
    root = echo_template[0]
    script = (
        "import sys, uvicorn; sys.path.insert(0, sys.argv[1]); "
        "from echo_env.server.app import app; "  # imported before the address is printed: clients connect to a ready app
        "from gem_core.serve.asgi import listening_socket; "
        "sock = listening_socket('127.0.0.1', 0); "
        "print(f'listening on http://127.0.0.1:{sock.getsockname()[1]}', flush=True); "
        "uvicorn.Server(uvicorn.Config(app, log_level='warning')).run(sockets=[sock])"
    )
    server = ServerProcess([sys.executable, "-c", script, str(root)], r"listening on (http://\S+)", "OpenEnv template server")
    yield server
    server.stop()


def echo_env(environment, echo_template):
    return OpenEnvEnv(environment, echo_template[1].EchoAction, action_field="message", observation_field="echoed_message")


@pytest.mark.parametrize("form", ["class", "instance"])
def test_the_openenv_template_env_whose_reset_takes_no_seed_plays_in_process(echo_template, form):
    """Issue 28.7: OpenEnv's template env has `def reset(self)`; GEM's seed (and options) go only to a reset
    that takes them, as OpenEnv's own server does. A built instance works as well as a factory."""
    cls = echo_template[2]
    env = echo_env(cls if form == "class" else cls(), echo_template)
    assert env.reset(seed=3) == ("Echo Env environment ready!", {})
    assert env.reset(seed=4, options={"difficulty": 2})[0] == "Echo Env environment ready!"
    observation, reward, terminated, truncated, info = env.step("hello")
    assert (observation, reward, terminated, truncated) == ("hello", pytest.approx(0.5), False, False)
    assert info == {"original_message": "hello", "step": 1}
    env.close()


def test_seed_and_options_reach_a_reset_that_takes_them(echo_template):
    seen = []

    class Seeded(echo_template[2]):
        def reset(self, seed=None, **kwargs):
            seen.append((seed, kwargs))
            return super().reset()

    env = echo_env(Seeded, echo_template)
    env.reset(seed=7, options={"difficulty": 2})
    env.reset()
    assert seen == [(7, {"difficulty": 2}), (None, {})]


@pytest.mark.parametrize("client", ["generic", "generic-async", "typed", "factory"])
def test_a_remote_openenv_env_through_its_client(echo_template, echo_server, client):
    """Issue 28.7: an OpenEnv server (the template's app, a child process) wrapped through OpenEnv's clients:
    the sync client, the async client, the env's typed client, or a factory that builds one."""
    from openenv.core import GenericEnvClient

    url = echo_server.url
    environment = {
        "generic": lambda: GenericEnvClient(base_url=url).sync(),
        "generic-async": lambda: GenericEnvClient(base_url=url),
        "typed": lambda: echo_template[3](base_url=url).sync(),
        "factory": lambda: (lambda: GenericEnvClient(base_url=url).sync()),
    }[client]()
    env = echo_env(environment, echo_template)
    try:
        assert env.reset(seed=5)[0] == "Echo Env environment ready!"
        observation, reward, terminated, truncated, info = env.step("hi there")
        assert (observation, reward, terminated, truncated) == ("hi there", pytest.approx(0.8), False, False)
        assert env.step("")[:2] == ("", 0.0)
        assert env.reset()[0] == "Echo Env environment ready!"  # a second episode on the same connection
    finally:
        env.close()


def test_a_gem_env_served_by_openenv_round_trips_through_openenvenv(openenv_server):
    """GEM -> OpenEnv server -> OpenEnv client -> OpenEnvEnv: the seed reaches the GEM env remotely."""
    from openenv.core import GenericEnvClient

    from gem_core.serve.openenv_interop import TextAction

    local = make("game:GuessTheNumber-v0")
    env = OpenEnvEnv(GenericEnvClient(base_url=openenv_server).sync(), TextAction, observation_field="text")
    try:
        for seed in (0, 1):
            assert env.reset(seed=seed)[0] == local.reset(seed=seed)[0]
            for action in ["\\boxed{10}", "\\boxed{15}"]:
                observation, reward, terminated, truncated, _ = local.step(action)
                assert env.step(action)[:3] == (observation, pytest.approx(float(reward)), terminated or truncated)
    finally:
        env.close()


def _openenv_server_process(port: int = 0) -> ServerProcess:
    """openenv_app for game:GuessTheNumber-v0 under uvicorn in a child process (so it can be killed)."""
    script = (
        "import sys, uvicorn; "
        "from gem_core.serve.openenv_interop import openenv_app; "
        "from gem_core.serve.asgi import listening_socket; "
        "app = openenv_app('game:GuessTheNumber-v0'); "
        "sock = listening_socket('127.0.0.1', int(sys.argv[1])); "
        "print(f'listening on http://127.0.0.1:{sock.getsockname()[1]}', flush=True); "
        "uvicorn.Server(uvicorn.Config(app, log_level='warning')).run(sockets=[sock])"
    )
    return ServerProcess([sys.executable, "-c", script, str(port)], r"listening on (http://\S+)", "OpenEnv server")


def test_a_dead_openenv_server_is_a_truncation_on_step_and_one_clear_error_on_reset():
    """Like RemoteEnv: a step that cannot reach the server ends the episode with info['error'] naming the
    server; a reset raises one error naming it; after a restart the next reset plays again."""
    from openenv.core import GenericEnvClient

    from gem_core.serve.openenv_interop import TextAction
    from gem_core.serve.remote import RemoteEnvError

    server = _openenv_server_process()
    env = OpenEnvEnv(GenericEnvClient(base_url=server.url).sync(), TextAction, observation_field="text")
    ws_url = server.url.replace("http://", "ws://") + "/ws"
    try:
        assert env.reset(seed=0)[0] == make("game:GuessTheNumber-v0").reset(seed=0)[0]
        server.kill()
        observation, reward, terminated, truncated, info = env.step("\\boxed{6}")
        assert (observation, reward, terminated, truncated) == ("", 0.0, False, True)
        assert info["error"].startswith(f"the OpenEnv server at {ws_url} is unreachable (")
        assert info["error"].endswith("check that it is running; the next reset() reconnects"), info
        assert env.step("\\boxed{7}")[4] == {"episode_over": True}  # the episode ended (GEM's guard)
        with pytest.raises(RemoteEnvError) as raised:
            env.reset(seed=1)
        assert str(raised.value).startswith(f"the OpenEnv server at {ws_url} is unreachable (")
        assert str(raised.value).endswith("check that it is running and that the URL is right")
        # no episode after a failed reset: the ended one stays ended (GEM's guard), no new server-side session is opened
        assert env.step("\\boxed{7}") == episode_over_result()
        server.stop()
        server = _openenv_server_process(server.port)  # restarted on the same port
        assert env.reset(seed=1)[0] == make("game:GuessTheNumber-v0").reset(seed=1)[0]
        assert env.step("\\boxed{10}")[0]
    finally:
        env.close()
        server.stop()


@pytest.fixture
def malformed_openenv_server():
    """A WebSocket server speaking OpenEnv's protocol badly: ``answers[kind]`` is sent for each message of that kind."""
    import asyncio
    import json

    from websockets.asyncio.server import serve

    answers: dict = {}
    box: dict = {}

    async def handler(ws):
        async for message in ws:
            kind = json.loads(message).get("type")
            if kind in answers:
                await ws.send(answers[kind])

    async def main():
        async with serve(handler, "127.0.0.1", 0) as server:
            box["port"], box["stop"] = server.sockets[0].getsockname()[1], asyncio.Event()
            box["loop"] = asyncio.get_running_loop()
            await asyncio.wait_for(box["stop"].wait(), 60)

    thread = threading.Thread(target=asyncio.run, args=(main(),), daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while "loop" not in box and time.monotonic() < deadline:
        time.sleep(0.05)
    yield f"http://127.0.0.1:{box['port']}", answers
    box["loop"].call_soon_threadsafe(box["stop"].set)
    thread.join(10)


_GOOD_RESET = '{"type": "observation", "data": {"observation": {"text": "hi"}, "reward": null, "done": false}}'


@pytest.mark.parametrize("step_answer", ["<html>502 Bad Gateway</html>", '{"type": "observation", "data": {"observation": {"text": "o"}, "reward": "lots", "done": false}}'])
def test_a_malformed_step_answer_from_a_remote_openenv_server_is_a_truncation_naming_the_server(malformed_openenv_server, step_answer):
    from gem_core.serve.openenv_interop import TextAction

    url, answers = malformed_openenv_server
    answers.update(reset=_GOOD_RESET, step=step_answer)
    env = OpenEnvEnv(GenericEnvClient(base_url=url, message_timeout_s=5).sync(), TextAction, observation_field="text")
    try:
        assert env.reset(seed=1)[0] == "hi"
        observation, reward, terminated, truncated, info = env.step("\\boxed{3}")
        assert (observation, reward, terminated, truncated) == ("", 0.0, False, True)
        assert "the OpenEnv server at ws://127.0.0.1:" in info["error"], info
    finally:
        env.close()


@pytest.mark.parametrize("reset_answer", ["<html>502 Bad Gateway</html>", '["not", "an", "object"]', '{"type": "observation", "data": {"observation": {"text": "o"}, "reward": "lots", "done": false}}'])
def test_a_malformed_reset_answer_from_a_remote_openenv_server_is_a_remote_env_error_naming_the_server(malformed_openenv_server, reset_answer):
    from gem_core.serve.openenv_interop import TextAction
    from gem_core.serve.remote import RemoteEnvError

    url, answers = malformed_openenv_server
    answers.update(reset=reset_answer)
    env = OpenEnvEnv(GenericEnvClient(base_url=url, message_timeout_s=5).sync(), TextAction, observation_field="text")
    try:
        with pytest.raises(RemoteEnvError, match="the OpenEnv server at ws://127.0.0.1:"):
            env.reset(seed=1)
    finally:
        env.close()
