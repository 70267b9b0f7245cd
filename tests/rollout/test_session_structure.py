"""EpisodeSession.step reads as the steps it performs (issue 31.9): check the action's log-probs, record
the action, act on the env, build the next observation's turn, or end the episode. Its behaviour and
token-exactness are held by the rest of tests/rollout."""

from __future__ import annotations

import inspect

from gem_core.rollout.session import EpisodeSession


def test_step_delegates_each_of_its_steps_to_a_method_of_its_own():
    source = inspect.getsource(EpisodeSession.step)
    body = source.split('"""', 2)[2]  # past the docstring
    for part in ("_action_logprobs", "_record_action", "_act", "_observation_turn", "_end"):
        assert f"self.{part}(" in body
    assert len([line for line in body.splitlines() if line.strip()]) <= 40
