"""A remote OpenEnv server whose answer is JSON of the right shape but not a usable observation (no configured
observation field, not an object, a ``done`` that is not a bool): a step ends as a truncation naming the
server, a reset raises one RemoteEnvError naming it, as for any other malformed answer."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("openenv")
pytest.importorskip("websockets")

from openenv.core import GenericEnvClient
from test_openenv_interop import _GOOD_RESET, malformed_openenv_server  # noqa: F401 (the fixture)

from gem_core.serve.openenv_interop import OpenEnvEnv, TextAction
from gem_core.serve.remote import RemoteEnvError


def _answer(observation, done=False) -> str:
    return json.dumps({"type": "observation", "data": {"observation": observation, "reward": 0, "done": done}})


MALFORMED = {
    "no_observation_field": _answer({"other": "x"}),
    "observation_is_a_list": _answer([1, 2]),
    "observation_is_a_string": _answer("x"),
    "observation_is_null": _answer(None),
    "done_is_a_string": _answer({"text": "o"}, done="no"),
    "done_is_a_number": _answer({"text": "o"}, done=0),
}


def _client_env(url: str) -> OpenEnvEnv:
    return OpenEnvEnv(GenericEnvClient(base_url=url, message_timeout_s=5).sync(), TextAction, observation_field="text")


@pytest.mark.parametrize("step_answer", list(MALFORMED.values()), ids=list(MALFORMED))
def test_a_step_answer_that_is_no_usable_observation_is_a_truncation_naming_the_server(malformed_openenv_server, step_answer):  # noqa: F811
    url, answers = malformed_openenv_server
    answers.update(reset=_GOOD_RESET, step=step_answer)
    env = _client_env(url)
    try:
        assert env.reset(seed=1)[0] == "hi"
        observation, reward, terminated, truncated, info = env.step("\\boxed{3}")
        assert (observation, reward, terminated, truncated) == ("", 0.0, False, True)
        assert "the OpenEnv server at ws://127.0.0.1:" in info["error"], info
        answers.update(step=_answer({"text": "after"}))
        assert env.reset(seed=1)[0] == "hi"  # the next reset plays again
        assert env.step("\\boxed{3}")[:4] == ("after", 0.0, False, False)
    finally:
        env.close()


@pytest.mark.parametrize("reset_answer", list(MALFORMED.values()), ids=list(MALFORMED))
def test_a_reset_answer_that_is_no_usable_observation_is_a_remote_env_error_naming_the_server(malformed_openenv_server, reset_answer):  # noqa: F811
    url, answers = malformed_openenv_server
    answers.update(reset=reset_answer)
    env = _client_env(url)
    try:
        with pytest.raises(RemoteEnvError, match="the OpenEnv server at ws://127.0.0.1:"):
            env.reset(seed=1)
    finally:
        env.close()
