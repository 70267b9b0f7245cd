"""OpenEnv both ways with the `openenv` package's own classes: a GEM env driven by OpenEnv's
GenericEnvClient through OpenEnv's server, and an OpenEnv Environment (written here with OpenEnv's base
classes) played through gem_core.make and run_episode."""

from __future__ import annotations

import random
import threading
import time

import pytest

pytest.importorskip("openenv")
uvicorn = pytest.importorskip("uvicorn")

from openenv.core import GenericEnvClient  # noqa: E402
from openenv.core.env_server import Action, Environment, Observation, State  # noqa: E402

from gem_core import make, register  # noqa: E402
from gem_core.openenv_interop import OpenEnvEnv, openenv_app  # noqa: E402
from gem_core.serve.asgi import listening_socket  # noqa: E402


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
